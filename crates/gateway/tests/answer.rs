//! MoviePilot's answers as the model reads them: data, rejections, empty records, refusals.

use mpa_gateway::Collection;
use mpa_gateway::{Answer, ApiError, ApiResponse, FieldError, Refusal};
use serde_json::Value;
use serde_json::json;

fn ok(payload: Value) -> ApiResponse {
    ApiResponse {
        status: 200,
        collection: None,
        payload,
    }
}

fn err(status: u16, data: Value) -> Refusal {
    ApiError {
        operation_id: "x".into(),
        status,
        data,
    }
    .refusal()
}

#[test]
fn answers() {
    assert_eq!(
        ok(json!([1, 2])).answer(true),
        Answer::Data(json!({"success": true, "data": [1, 2]}))
    );
    assert_eq!(
        ok(json!(0)).answer(true),
        Answer::Data(json!({"success": true, "data": 0}))
    );
    let env = json!({"success": true, "message": "ok", "data": {"id": 1}});
    assert_eq!(ok(env.clone()).answer(true), Answer::Data(env));
    let no = json!({"success": false, "message": "订阅已存在"});
    assert_eq!(ok(no.clone()).answer(false), Answer::Rejected(no));
    assert_eq!(
        ok(json!({"id": null, "name": null})).answer(true),
        Answer::EmptyRecord
    );
    assert_eq!(
        ok(json!({"success": true, "data": {"id": null}})).answer(true),
        Answer::EmptyRecord
    );
    // A write's null fields are its own business; an empty object is a miss, not null.
    assert!(matches!(
        ok(json!({"id": null})).answer(false),
        Answer::Data(_)
    ));
    assert!(matches!(ok(json!({})).answer(true), Answer::Data(_)));
    let listed = ApiResponse {
        status: 200,
        collection: Some(Collection {
            result_count: Some(2),
            ..Collection::default()
        }),
        payload: json!([1, 2]),
    };
    assert_eq!(
        serde_json::to_string(&match listed.answer(true) {
            Answer::Data(v) => v,
            other => panic!("{other:?}"),
        })
        .unwrap(),
        r#"{"collection":{"result_count":2},"success":true,"data":[1,2]}"#
    );
}

#[test]
fn refusals() {
    assert_eq!(
        err(400, json!({"detail": "用户权限不足"})),
        Refusal::PermissionDenied {
            detail: Some("用户权限不足".into())
        }
    );
    assert!(matches!(
        err(403, json!({"detail": "token校验不通过"})),
        Refusal::PermissionDenied { .. }
    ));
    assert_eq!(
        err(400, json!({"detail": "站点不存在"})),
        Refusal::Message("站点不存在".into())
    );
    assert_eq!(
        err(
            422,
            json!({"detail": [{"type": "int_parsing", "loc": ["query", "season"],
                "msg": "Input should be a valid integer", "input": "x"}]})
        ),
        Refusal::FieldErrors(vec![FieldError {
            field: "query.season".into(),
            message: "Input should be a valid integer".into(),
            kind: Some("int_parsing".into()),
        }])
    );
    assert_eq!(
        err(500, json!("Internal Server Error")),
        Refusal::Text("Internal Server Error".into())
    );
    assert_eq!(err(503, json!([1])), Refusal::Other(json!([1])));
}
