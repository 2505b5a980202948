//! The catalogue's input notation: fields, ranges, defaults, bodies.

use mpa_gateway::{BodyKind, BodySpec, FieldKind, parse_body, parse_field, split_top};
use serde_json::Value;

#[test]
fn splits_outside_brackets_only() {
    assert_eq!(
        split_top(
            "page:int>=1 (opt); count:int 1..200 (opt; omit both); days:int=7",
            "; "
        ),
        vec![
            "page:int>=1 (opt)",
            "count:int 1..200 (opt; omit both)",
            "days:int=7"
        ]
    );
}

#[test]
fn parses_the_notation() {
    let f = parse_field("count:int 1..50=20 (Bangumi/AniList only)")
        .unwrap()
        .field;
    assert_eq!(
        (f.minimum, f.maximum, f.default, f.note),
        (
            Some(1),
            Some(50),
            Some(Value::from(20)),
            Some("Bangumi/AniList only")
        )
    );
    let f = parse_field("page:int>=1=1").unwrap().field;
    assert_eq!((f.minimum, f.default), (Some(1), Some(Value::from(1))));
    let f = parse_field("tags:str=\"\"").unwrap().field;
    assert_eq!(f.default, Some(Value::from("")));
    let f = parse_field("media_source:arr<MediaSource>=[]")
        .unwrap()
        .field;
    assert_eq!(
        f.kind,
        FieldKind::Array(Box::new(FieldKind::Named("MediaSource")))
    );
    assert_eq!(f.default, Some(Value::Array(vec![])));
    let f = parse_field("type*:const \"person\"").unwrap().field;
    assert!(f.required && f.kind == FieldKind::Const("person"));
    let e = parse_field("title:str  [skill doc @0c9d8c92 also lists mtype:MediaType, year:str]")
        .unwrap();
    assert_eq!(
        e.extras.iter().map(|f| f.name).collect::<Vec<_>>(),
        vec!["mtype", "year"]
    );
    assert!(
        parse_field("count:int 1..200 (opt; omit both = full)")
            .unwrap()
            .optional_marker
    );
    assert!(parse_field("x:weird").is_err());
    assert!(parse_field("x:enum(a|b)=c").is_err());
}

#[test]
fn parses_bodies() {
    assert_eq!(parse_body("-").unwrap(), BodySpec::NONE);
    let b = parse_body("$AgentCommandRunRequest* {command*:str}").unwrap();
    let BodyKind::Object { model, fields, .. } = &b.kind else {
        panic!("{b:?}")
    };
    assert_eq!(
        (*model, fields[0].name, fields[0].required),
        (Some("AgentCommandRunRequest"), "command", true)
    );
    assert!(
        !parse_body("$SystemUpdateRequest | null (optional)")
            .unwrap()
            .required
    );
    assert_eq!(
        parse_body("arr<str> | $PluginFolderPluginsUpdateRequest (required)").unwrap(),
        BodySpec {
            kind: BodyKind::ArrayOrObject {
                items: "str",
                model: "PluginFolderPluginsUpdateRequest"
            },
            required: true,
            note: None
        }
    );
    let b =
        parse_body("obj* (complete plugin config, additionalProperties, minProperties 1)").unwrap();
    assert!(matches!(
        b.kind,
        BodyKind::Object {
            min_properties: 1,
            model: None,
            ..
        }
    ));
    assert_eq!(
        parse_body("const \"dev\"*").unwrap().kind,
        BodyKind::Literal("dev")
    );
    assert!(parse_body("$Foo").is_err());
}
