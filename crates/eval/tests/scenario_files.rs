//! The scenario and trajectory files in `eval/`: the committed JSON Schemas equal the ones the
//! types generate, every file validates against them (a small validator for the subset the
//! schemas use), the 14 public scenarios and the 7 regression scenarios of issue 26 are there
//! with the right runnable set, and the model input carries nothing of the id, title, world or
//! oracle.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_eval::scenario::{self, Scenario};
use mpa_eval::trajectory::{self, Trajectory};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../eval")
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap();
    s.push('\n');
    s
}

/// Compares (or, with MPA_UPDATE_SCHEMAS=1, rewrites) a committed schema.
fn committed(name: &str, generated: &Value) -> Value {
    let path = root().join(name);
    if std::env::var_os("MPA_UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, pretty(generated)).unwrap();
    }
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (MPA_UPDATE_SCHEMAS=1 writes it)", path.display()));
    let on_disk: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        &on_disk, generated,
        "{name} is stale: run the test with MPA_UPDATE_SCHEMAS=1 and commit it"
    );
    on_disk
}

/// A validator for the JSON Schema subset schemars emits: $ref to $defs, type, properties,
/// required, additionalProperties, items, enum, const, oneOf, anyOf, allOf, minimum.
fn validate(schema: &Value, root: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    let Value::Object(s) = schema else {
        if schema == &Value::Bool(false) {
            errors.push(format!("{at}: not allowed"));
        }
        return;
    };
    if let Some(Value::String(r)) = s.get("$ref") {
        let name = r.trim_start_matches("#/$defs/");
        validate(&root["$defs"][name], root, v, at, errors);
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            _ => true,
        });
        if !ok {
            errors.push(format!("{at}: expected {types:?}, got {v}"));
            return;
        }
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(v)
    {
        errors.push(format!("{at}: {v} not in {options:?}"));
    }
    if let Some(c) = s.get("const")
        && c != v
    {
        errors.push(format!("{at}: expected {c}"));
    }
    if let (Some(min), Some(n)) = (s.get("minimum").and_then(Value::as_f64), v.as_f64())
        && n < min
    {
        errors.push(format!("{at}: {n} < {min}"));
    }
    if let Value::Object(obj) = v {
        let props = s.get("properties").and_then(Value::as_object);
        for req in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = req.as_str().unwrap_or_default();
            if !obj.contains_key(key) {
                errors.push(format!("{at}: missing {key}"));
            }
        }
        for (k, child) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => validate(ps, root, child, &format!("{at}.{k}"), errors),
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => errors.push(format!("{at}: unknown field {k}")),
                    Some(extra @ Value::Object(_)) => {
                        validate(extra, root, child, &format!("{at}.{k}"), errors)
                    }
                    _ => {}
                },
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (v, s.get("items")) {
        for (i, item) in items.iter().enumerate() {
            validate(item_schema, root, item, &format!("{at}[{i}]"), errors);
        }
    }
    let passes = |sub: &Value| {
        let mut e = Vec::new();
        validate(sub, root, v, at, &mut e);
        e.is_empty()
    };
    if let Some(Value::Array(subs)) = s.get("oneOf") {
        let n = subs.iter().filter(|sub| passes(sub)).count();
        if n != 1 {
            errors.push(format!("{at}: matches {n} of oneOf"));
        }
    }
    if let Some(Value::Array(subs)) = s.get("anyOf")
        && !subs.iter().any(passes)
    {
        errors.push(format!("{at}: matches none of anyOf"));
    }
    if let Some(Value::Array(subs)) = s.get("allOf") {
        for sub in subs {
            validate(sub, root, v, at, errors);
        }
    }
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(json_files(&p));
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn assert_valid(schema: &Value, path: &Path) {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut errors = Vec::new();
    validate(schema, schema, &v, "$", &mut errors);
    assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
}

#[test]
fn scenario_files_match_the_committed_schema() {
    let schema = committed("scenario.schema.json", &scenario::json_schema());
    let files = json_files(&root().join("scenarios"));
    assert_eq!(files.len(), 14 + REGRESSIONS.len());
    for f in &files {
        assert_valid(&schema, f);
        Scenario::load(f).unwrap();
    }
    // The validator is not vacuous: a typo and a wrong type are caught.
    let mut bad: Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    bad["expect"]["answr"] = Value::Null;
    bad["task"]["goals"] = Value::from("download");
    let mut errors = Vec::new();
    validate(&schema, &schema, &bad, "$", &mut errors);
    assert_eq!(errors.len(), 2, "{errors:?}");
}

#[test]
fn trajectory_files_match_the_committed_schema() {
    let schema = committed("trajectory.schema.json", &trajectory::json_schema());
    let files = json_files(&root().join("trajectories"));
    assert!(files.len() >= 12, "{files:?}");
    for f in &files {
        assert_valid(&schema, f);
        let t = Trajectory::load(f).unwrap();
        assert!(
            t.expect.is_some(),
            "{}: replay-suite files say what they expect",
            f.display()
        );
    }
}

/// The scenarios written for issue 26's gaps (not MoviePilot's).
const REGRESSIONS: [&str; 7] = [
    "capped_download_queue",
    "command_checksum",
    "cookie_setting_lost_receipt",
    "lost_download_queue_down",
    "pty_verbatim_reply",
    "season_subscription_pages",
    "setting_receipt_reconciled",
];

#[test]
fn the_fourteen_public_scenarios_the_regressions_and_what_runs_now() {
    let mut runnable = Vec::new();
    let mut ids = Vec::new();
    for f in scenario::scenario_files(&root().join("scenarios")).unwrap() {
        let s = Scenario::load(&f).unwrap();
        assert_eq!(f.file_stem().unwrap().to_str().unwrap(), s.id);
        if s.missing_capabilities().is_empty() {
            runnable.push(s.id.clone());
        }
        ids.push(s.id);
    }
    for r in REGRESSIONS {
        assert!(
            runnable.iter().any(|id| id == r),
            "{r} is there and runnable"
        );
    }
    ids.retain(|id| !REGRESSIONS.contains(&id.as_str()));
    runnable.retain(|id| !REGRESSIONS.contains(&id.as_str()));
    assert_eq!(
        ids,
        [
            "browser_navigation",
            "code_readonly_report",
            "command_execution",
            "dedup_existing",
            "honest_unknown",
            "long_context",
            "steering_long_context",
            "steering_multi_message",
            "subagent_cancel_recovery",
            "subagent_parallel_status",
            "subagent_terminal_share",
            "terminal_pty_session",
            "terminal_session",
            "unknown_download"
        ]
    );
    assert_eq!(
        runnable,
        [
            "browser_navigation",
            "code_readonly_report",
            "command_execution",
            "dedup_existing",
            "honest_unknown",
            "long_context",
            "steering_long_context",
            "steering_multi_message",
            "subagent_cancel_recovery",
            "subagent_parallel_status",
            "subagent_terminal_share",
            "terminal_pty_session",
            "terminal_session",
            "unknown_download"
        ]
    );
}

#[test]
fn the_model_input_holds_only_the_task_the_facts_and_the_contract() {
    for f in scenario::scenario_files(&root().join("scenarios")).unwrap() {
        let s = Scenario::load(&f).unwrap();
        let input = s.model_input();
        assert!(input.starts_with(s.task.text.trim()), "{}", s.id);
        assert!(!input.contains(&s.id), "{}: the id leaked", s.id);
        assert!(!input.contains(&s.title), "{}: the title leaked", s.id);
        for word in [
            "_not_verified",
            "_claim",
            "unexpected_state_change",
            "targets_only",
        ] {
            assert!(!input.contains(word), "{}: {word} leaked", s.id);
        }
        for fault in &s.world.faults {
            let text = serde_json::to_string(fault).unwrap();
            assert!(!input.contains(&text), "{}: a fault leaked", s.id);
        }
        for row in &s.world.state.downloads {
            let hash = row["hash"].as_str().unwrap();
            let given = s.task.media.as_ref().and_then(|m| m.infohash.as_deref());
            if given != Some(hash) {
                assert!(!input.contains(hash), "{}: state row {hash} leaked", s.id);
            }
        }
        assert!(input.contains("Answer contract:"), "{}", s.id);
    }
}

#[test]
fn invalid_scenarios_name_the_problem() {
    let ok = std::fs::read_to_string(root().join("scenarios/unknown_download.json")).unwrap();
    let mut v: Value = serde_json::from_str(&ok).unwrap();
    v["id"] = Value::from("Bad Id");
    let e = Scenario::from_json(&v.to_string(), "x.json").unwrap_err();
    assert!(e.contains("x.json") && e.contains("[a-z0-9_]+"), "{e}");
    let mut v: Value = serde_json::from_str(&ok).unwrap();
    v["needs"] = serde_json::json!(["teleport"]);
    assert!(
        Scenario::from_json(&v.to_string(), "x")
            .unwrap_err()
            .contains("teleport")
    );
    let mut v: Value = serde_json::from_str(&ok).unwrap();
    v["expect"]["answer"]["completed"] = serde_json::json!(["terminal"]);
    assert!(
        Scenario::from_json(&v.to_string(), "x")
            .unwrap_err()
            .contains("terminal")
    );
    let mut v: Value = serde_json::from_str(&ok).unwrap();
    v["world"]["state"]["downloads"][0]["hash"] = Value::from("xyz");
    assert!(
        Scenario::from_json(&v.to_string(), "x")
            .unwrap_err()
            .contains("40-hex")
    );
}
