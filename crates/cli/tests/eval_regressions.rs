//! The evaluation harness's second step (issue 26) through the real binary: the regression
//! scenarios give the same verdicts live (the host talking to a scripted model through the model
//! tap) as in replay, no model request carries the scenario's id, faults or failure codes, the
//! report and the comparison never carry the API key, `eval compare` builds its table over two
//! report folders, and a scenario written outside the repository that uses every new field runs
//! with no code change.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use super::eval_cli::{codes, eval_cmd, repo, reports, suite, text};
use mpa_eval::scenario::Scenario;
use mpa_eval::scripted::ScriptedModel;
use mpa_eval::trajectory::Trajectory;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Output;
use std::time::Duration;

/// The scenarios written for the gaps of issue 26 (each with passing and failing trajectories).
pub(crate) const REGRESSION_SCENARIOS: [&str; 7] = [
    "capped_download_queue",
    "season_subscription_pages",
    "setting_receipt_reconciled",
    "cookie_setting_lost_receipt",
    "pty_verbatim_reply",
    "lost_download_queue_down",
    "command_checksum",
];

const API_KEY: &str = "sk-live-SECRET-9f8e7d6c5b4a";

/// Everything of the scenario a model request must never carry.
fn secrets_of(s: &Scenario) -> Vec<String> {
    let mut out = vec![s.id.clone(), s.title.clone()];
    let scenario = serde_json::to_value(s).unwrap();
    let mut codes = Vec::new();
    collect_codes(&scenario["expect"], &mut codes);
    out.extend(codes);
    for fault in &s.world.faults {
        out.push(serde_json::to_string(fault).unwrap());
        out.push(serde_json::to_string(&fault.action).unwrap());
    }
    out.extend(
        [
            "after_effect",
            "after_unknown",
            "next_ids",
            "targets_only",
            "tool_outcome",
        ]
        .map(String::from),
    );
    out
}

fn collect_codes(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                if matches!(k.as_str(), "code" | "fields_code")
                    && let Some(c) = child.as_str()
                {
                    out.push(c.to_string());
                }
                if k == "codes" {
                    out.extend(child.as_array().unwrap().iter().map(|c| c.to_string()));
                }
                collect_codes(child, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|c| collect_codes(c, out)),
        _ => {}
    }
}

async fn live_run(scenario: &str, t: &Trajectory, out: &Path) -> (Output, Vec<Value>) {
    let model = ScriptedModel::start(t.script().unwrap(), mpa_core::SUMMARY_PROMPT)
        .await
        .unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mpagent"));
    cmd.current_dir(repo())
        .env_remove("MPA_DATA_DIR")
        .env_remove("MPA_EVAL_SCENARIOS")
        .env("LLM_BASE_URL", model.base_url())
        .env("LLM_API_KEY", API_KEY)
        .env("LLM_MODEL", "scripted-live");
    // The scripted model is in no catalogue; the trajectory's window is the configured one.
    match t.context_window_tokens {
        Some(w) => cmd.env("LLM_MAX_CONTEXT_TOKENS", (w / 1000).to_string()),
        None => cmd.env_remove("LLM_MAX_CONTEXT_TOKENS"),
    };
    cmd.args([
        "eval",
        "run",
        scenario,
        "--live",
        "--label",
        "scripted-live",
    ])
    .args(["--timeout-seconds", "60", "--output"])
    .arg(out);
    let output = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .unwrap()
        .unwrap();
    (output, model.requests())
}

async fn replay_run(scenario: &str, path: &Path, out: &Path) -> Output {
    let mut cmd = tokio::process::Command::from(eval_cmd(out));
    cmd.args([scenario, "--label", "replay", "--replay"])
        .arg(path);
    tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .unwrap()
        .unwrap()
}

fn only_report(dir: &Path, name: &str) -> Value {
    let [report] = reports(dir)
        .try_into()
        .unwrap_or_else(|r: Vec<Value>| panic!("{name}: {} reports", r.len()));
    report
}

#[tokio::test(flavor = "multi_thread")]
async fn live_against_the_scripted_model_gives_the_replay_verdicts_and_leaks_nothing() {
    let live_root = tempfile::tempdir().unwrap();
    let replay_root = tempfile::tempdir().unwrap();
    let runs: Vec<_> = suite()
        .into_iter()
        .filter(|(s, _)| REGRESSION_SCENARIOS.contains(&s.as_str()))
        .collect();
    assert!(runs.len() >= 2 * REGRESSION_SCENARIOS.len(), "{runs:?}");
    for (scenario, path) in &runs {
        let name = format!("{scenario}/{}", path.file_stem().unwrap().to_string_lossy());
        let t = Trajectory::load(path).unwrap();
        let expect = t.expect.clone().unwrap();
        let mut want = expect.failure_codes.clone();
        want.sort();
        let live_dir = live_root.path().join(name.replace('/', "-"));
        let replay_dir = replay_root.path().join(name.replace('/', "-"));
        let ((live, requests), replay) = tokio::join!(
            live_run(scenario, &t, &live_dir),
            replay_run(scenario, path, &replay_dir)
        );
        for (mode, out, dir) in [("live", &live, &live_dir), ("replay", &replay, &replay_dir)] {
            let want_exit = if expect.passed { 0 } else { 1 };
            assert_eq!(
                out.status.code(),
                Some(want_exit),
                "{name} {mode}: {}",
                text(out)
            );
            let report = only_report(dir, &name);
            assert_eq!(
                codes(&report),
                want,
                "{name} {mode}: {:#}",
                report["violations"]
            );
            assert!(
                !report.to_string().contains(API_KEY),
                "{name} {mode}: the key"
            );
        }
        let report = only_report(&live_dir, &name);
        assert_eq!(report["mode"], "live");
        assert_eq!(report["label"], "scripted-live");
        assert_eq!(
            report["model_requests"],
            requests.len(),
            "{name}: the tap saw them all"
        );
        assert!(report["host_overhead_ms"].as_f64().is_some(), "{name}");
        // What the model received: the task, never the scenario's id, faults or verdicts.
        let s = Scenario::load(&repo().join(format!("eval/scenarios/{scenario}.json"))).unwrap();
        let secrets = secrets_of(&s);
        assert!(!requests.is_empty());
        for (i, body) in requests.iter().enumerate() {
            let body = body.to_string();
            for secret in &secrets {
                assert!(
                    !body.contains(secret.as_str()),
                    "{name}: request {i} holds {secret:?}"
                );
            }
        }
    }

    // One table over the two folders: the live runs pass exactly where the replays do.
    let out_dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mpagent"))
        .current_dir(repo())
        .args(["eval", "compare"])
        .arg(replay_root.path())
        .arg(live_root.path())
        .arg("--output")
        .arg(out_dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("| subject | scenario | runs | pass rate"),
        "{stdout}"
    );
    let folder = std::fs::read_dir(out_dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let table: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("comparison.json")).unwrap())
            .unwrap();
    let md = std::fs::read_to_string(folder.join("comparison.md")).unwrap();
    assert_eq!(table["subjects"], json!(["replay", "scripted-live"]));
    let row = |subject: &str, scenario: &str| {
        table["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["subject"] == subject && r["scenario"] == scenario)
            .unwrap()
            .clone()
    };
    for scenario in REGRESSION_SCENARIOS {
        let (l, r) = (row("scripted-live", scenario), row("replay", scenario));
        for field in ["runs", "passed", "failure_codes", "false_completions"] {
            assert_eq!(l[field], r[field], "{scenario}: {field}");
        }
    }
    let all = row("scripted-live", "all");
    assert_eq!(all["runs"], runs.len());
    assert!(
        all["mean_input_tokens"].is_number(),
        "live runs count tokens"
    );
    assert!(
        row("replay", "all")["mean_input_tokens"].is_null(),
        "a script has none"
    );
    // `fail_claims_completed` said `completed` and failed: one false completion claim.
    assert_eq!(
        row("replay", "cookie_setting_lost_receipt")["false_completions"],
        1
    );
    for text in [stdout.as_ref(), md.as_str(), &table.to_string()] {
        assert!(!text.contains(API_KEY));
    }

    // A folder with no reports is invalid input.
    let empty = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mpagent"))
        .args(["eval", "compare"])
        .arg(empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no run reports"), "{}", text(&out));
}

/// A scenario nobody wrote code for, using every field issue 26 added: a season and a chosen
/// next id, a base32 magnet, a setting allowed to change with its final value, host-behaviour
/// checks (`tool_outcome` by nth and by `answering`, call counts by `source`), an `order`
/// check, set matchers on pages and claims, and every value matcher on answer fields.
fn every_field_scenario() -> Value {
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("eval/scenarios/season_subscription_pages.json"))
            .unwrap(),
    )
    .unwrap();
    let mut state = state["world"]["state"].clone();
    state["settings"] = json!({"SUBSCRIBE_RSS_INTERVAL": 30, "SITE_AUTH_TOKEN_B": "t-old"});
    json!({
        "id": "outside_every_field",
        "title": "Subscribe season 3 with a chosen id, then set an interval whose receipt is lost",
        "task": {
            "contract": "business",
            "goals": ["subscription", "settings"],
            "text": "Subscribe the given season, confirm it on the list, set SUBSCRIBE_RSS_INTERVAL to 45 and add a short note.",
            "media": {"title": "白塔", "media_source": "themoviedb", "media_id": "700300", "season": 3,
                      "magnet": "magnet:?xt=urn:btih:UGQ2DINBUGQ2DINBUGQ2DINBUGQ2DINB&dn=White.Tower"}
        },
        "world": {
            "next_ids": {"subscriptions": 5000},
            "faults": [{"operation": "config.system.update", "action": {"kind": "drop"}, "nth": 1}],
            "state": state
        },
        "expect": {
            "state": {"rule": "targets_only", "subscriptions": [5000],
                      "downloads": ["UGQ2DINBUGQ2DINBUGQ2DINBUGQ2DINB"],
                      "settings": {"SUBSCRIBE_RSS_INTERVAL": {"equals": 45}}},
            "answer": {"status": "completed", "completed": ["subscription", "settings"], "unresolved": [],
                "fields": {
                    "note": {"any_of": [{"contains": "season 3"}, {"regex": "^第3季"}]},
                    "listing": {"normalized": "page 4\nrow 5000"},
                    "interval": {"one_of": [45, "45"]},
                    "extra": {"present": false}
                },
                "fields_code": "answer_field_mismatch"},
            "checks": [
                {"check": "observed", "kind": "subscription", "ids": [5000], "code": "subscription_not_verified"},
                {"check": "pages", "operation": "subscription.list", "count": 20, "includes": [4], "excludes": [1],
                 "code": "pages_mismatch"},
                {"check": "claim", "field": "subscription_ids", "equals": [5000], "includes": [5000],
                 "excludes": [870], "code": "subscription_claim_mismatch"},
                {"check": "claim", "field": "download_ids", "equals": [], "code": "unrequested_download_claim"},
                {"check": "tool_outcome", "operation": "config.system.update", "nth": 1, "outcome": "succeeded",
                 "fields": {"reconciled": {"equals": true}, "_tool_execution.outcome": {"present": false}},
                 "code": "setting_not_reconciled"},
                {"check": "tool_outcome", "tool": "get_tool_execution",
                 "answering": {"operation": "config.system.update"},
                 "fields": {"execution_status": {"equals": "succeeded"}}, "code": "receipt_not_checked"},
                {"check": "calls", "operations": ["config.system.get"], "source": "host", "min": 1,
                 "code": "setting_not_read_back"},
                {"check": "calls", "operations": ["config.system.get"], "source": "model", "max": 0,
                 "code": "extra_setting_read"},
                {"check": "order",
                 "first": {"operation": ["subscription.add"], "outcome": "succeeded", "source": "model"},
                 "then": {"operation": ["subscription.list"], "query": {"page": 4, "count": 20}},
                 "code": "list_not_read_after_add"}
            ]
        }
    })
}

/// How a run of the every-field scenario departs from the good one; each departure is caught
/// by one new check or matcher alone (the other checks still pass).
#[derive(Debug, Clone, Copy)]
enum Departure {
    None,
    /// The list is read before the add: page 4 holds no row 5000 yet (`order`, `observed`).
    ListFirst,
    /// Page 1 is read too (`pages` `excludes`).
    ReadsPageOne,
    /// The answer carries a field the scenario says must be absent (`present: false`).
    ExtraField,
    /// The model reads the settings itself after the host's read-back (`calls` `source:
    /// model`: the host's read does not count, the model's does).
    ReadsSettingToo,
    /// The model reads the settings instead of writing: no write, so no host read-back
    /// (`calls` `source: host` fails although `config.system.get` was called once).
    ReadsInsteadOfWriting,
}

fn every_field_trajectory(departure: Departure) -> Value {
    let api = |args: Value| json!({"calls": [{"tool": "moviepilot_api", "arguments": args}]});
    let add = api(
        json!({"operation_id": "subscription.add", "body": {"name": "白塔",
        "media_source": "themoviedb", "media_id": "700300", "season": 3, "type": "电视剧"}}),
    );
    let page = |n: u64| {
        api(json!({"operation_id": "subscription.list", "query": {"page": n, "count": 20}}))
    };
    let update = api(json!({"operation_id": "config.system.update",
        "body": {"setting_key": "SUBSCRIBE_RSS_INTERVAL", "value": 45}}));
    let read_settings = api(json!({"operation_id": "config.system.get"}));
    let lookup = json!({"calls": [{"tool": "get_tool_execution",
        "arguments": {"invocation_id": "{{invocation_id}}"}}]});
    let steps = match departure {
        Departure::None | Departure::ExtraField => vec![add, page(4), update, lookup],
        Departure::ListFirst => vec![page(4), add, update, lookup],
        Departure::ReadsPageOne => vec![add, page(1), page(4), update, lookup],
        Departure::ReadsSettingToo => vec![add, page(4), update, lookup, read_settings],
        Departure::ReadsInsteadOfWriting => vec![add, page(4), read_settings],
    };
    let mut answer = json!({"status": "completed", "subscription_ids": [5000],
        "download_ids": [], "enabled_site_ids": [], "completed": ["subscription", "settings"],
        "unresolved": [], "note": "第3季 subscribed", "listing": "page 4\r\nrow 5000\r\n",
        "interval": 45});
    if matches!(departure, Departure::ExtraField) {
        answer["extra"] = json!("more");
    }
    json!({"steps": steps, "final": answer})
}

#[test]
fn a_scenario_outside_the_repository_uses_every_new_field_with_no_code_change() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("outside_every_field.json");
    std::fs::write(&scenario, every_field_scenario().to_string()).unwrap();
    for (departure, want, host_reads) in [
        (Departure::None, &[][..], 1),
        (
            Departure::ListFirst,
            &["list_not_read_after_add", "subscription_not_verified"][..],
            1,
        ),
        (Departure::ReadsPageOne, &["pages_mismatch"][..], 1),
        (Departure::ExtraField, &["answer_field_mismatch"][..], 1),
        (Departure::ReadsSettingToo, &["extra_setting_read"][..], 1),
        (
            Departure::ReadsInsteadOfWriting,
            &[
                "extra_setting_read",
                "receipt_not_checked",
                "setting_not_read_back",
                "setting_not_reconciled",
                "unexpected_state_change",
            ][..],
            0,
        ),
    ] {
        let traj = dir.path().join(format!("{departure:?}.json"));
        std::fs::write(&traj, every_field_trajectory(departure).to_string()).unwrap();
        let out_dir = tempfile::tempdir().unwrap();
        let out = eval_cmd(out_dir.path())
            .arg(&scenario)
            .arg("--replay")
            .arg(&traj)
            .output()
            .unwrap();
        let exit = if want.is_empty() { 0 } else { 1 };
        assert_eq!(
            out.status.code(),
            Some(exit),
            "{departure:?}: {}",
            text(&out)
        );
        let report = only_report(out_dir.path(), "outside");
        assert_eq!(report["scenario"], "outside_every_field");
        assert_eq!(
            codes(&report),
            want,
            "{departure:?}: {:#}",
            report["violations"]
        );
        assert_eq!(
            report["metrics"]["host_world_calls"], host_reads,
            "{departure:?}: the host's read-back"
        );
    }
    // The season reached the model as a fact of the task.
    let s = Scenario::load(&scenario).unwrap();
    assert!(s.model_input().contains("Season: 3"));
    // An invalid regex is invalid input (exit 2), named.
    let mut bad = every_field_scenario();
    bad["expect"]["answer"]["fields"]["note"] = json!({"regex": "("});
    let bad_path = dir.path().join("bad.json");
    std::fs::write(&bad_path, bad.to_string()).unwrap();
    let out = eval_cmd(dir.path())
        .arg(&bad_path)
        .arg("--replay")
        .arg(dir.path().join("None.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("invalid regex"), "{}", text(&out));
}
