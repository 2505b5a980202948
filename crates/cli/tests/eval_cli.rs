//! `mpagent eval` through the real binary: the replay suite (every trajectory under
//! `eval/trajectories` gives exactly its expected failure codes), invalid input, a scenario
//! written outside the repository, `--repeat`, and `--live` against the mock model server
//! scripted like a careless model (with every request body it received inspected).
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_eval::scenario::Scenario;
use mpa_eval::trajectory::Trajectory;
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn eval_cmd(out: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_mpagent"));
    c.current_dir(repo())
        .env_remove("MPA_DATA_DIR")
        .env_remove("MPA_EVAL_SCENARIOS")
        .env("NO_COLOR", "1")
        .args(["eval", "run", "--output"])
        .arg(out);
    c
}

pub(crate) fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every report file written under `dir`.
pub(crate) fn reports(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for run in std::fs::read_dir(dir).unwrap() {
        for f in std::fs::read_dir(run.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            if p.file_name().unwrap() != "summary.json" {
                out.push(serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap());
            }
        }
    }
    out
}

fn summary(dir: &Path) -> Value {
    let run = std::fs::read_dir(dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap()
}

pub(crate) fn codes(report: &Value) -> Vec<String> {
    report["failure_codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

pub(crate) fn world_calls(report: &Value, op: &str) -> usize {
    report["world_attempts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["operation_id"] == op)
        .count()
}

pub(crate) fn suite() -> Vec<(String, PathBuf)> {
    let root = repo().join("eval/trajectories");
    let mut out = Vec::new();
    // The browser scenario drives a real Chromium: without one it is skipped with a notice.
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .any(|p| Path::new(p).exists());
    for d in std::fs::read_dir(&root).unwrap() {
        let d = d.unwrap().path();
        let scenario = d.file_name().unwrap().to_str().unwrap().to_string();
        if scenario == "browser_navigation"
            && !mpa_test_support::external_program("Chromium", chromium)
        {
            continue;
        }
        for f in std::fs::read_dir(&d).unwrap() {
            out.push((scenario.clone(), f.unwrap().path()));
        }
    }
    out.sort();
    out
}

/// Checks one trajectory's run against its `expect` block.
fn check_run(scenario: &str, path: &Path, out: &Output, dir: &Path) {
    let t = Trajectory::load(path).unwrap();
    let expect = t.expect.unwrap();
    let name = format!("{scenario}/{}", path.file_name().unwrap().to_string_lossy());
    let want_exit = if expect.passed { 0 } else { 1 };
    assert_eq!(out.status.code(), Some(want_exit), "{name}: {}", text(out));
    let [report] = reports(dir).try_into().unwrap_or_else(|r: Vec<Value>| {
        panic!("{name}: {} reports", r.len());
    });
    assert_eq!(report["scenario"], scenario);
    assert_eq!(report["passed"], expect.passed, "{name}");
    let mut want = expect.failure_codes.clone();
    want.sort();
    assert_eq!(codes(&report), want, "{name}: {:#}", report["violations"]);
    assert_eq!(report["evidence_kind"], "scripted_replay");
    assert_eq!(report["intelligence_evaluated"], false);
    assert_eq!(report["tokens"], Value::Null);
    if let Some(status) = &expect.turn_status {
        assert_eq!(report["turn_status"], status.as_str(), "{name}");
    }
    if let Some(n) = expect.host_collapsed_writes {
        assert_eq!(report["metrics"]["host_collapsed_writes"], n, "{name}");
    }
    let context = &report["context"];
    if let Some(n) = expect.compactions {
        assert_eq!(context["compactions"], n, "{name}: {context:#}");
    }
    if let Some(w) = t.context_window_tokens {
        assert_eq!(
            context["window_tokens"], w,
            "{name}: the trajectory's window"
        );
    }
    // Every summariser call the host reports reached the scripted model, and only those.
    if context["failed_compactions"] == 0 {
        assert_eq!(
            context["summariser_calls"], context["scripted_summariser_requests"],
            "{name}: {context:#}"
        );
    }
    for (op, n) in &expect.world_attempts {
        assert_eq!(
            world_calls(&report, op),
            usize::try_from(n.as_u64().unwrap()).unwrap(),
            "{name}: world attempts of {op}"
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(scenario) && stdout.contains("reports:"),
        "{name}: the table: {stdout}"
    );
}

#[test]
fn every_replay_trajectory_gives_exactly_its_expected_failure_codes() {
    let runs = suite();
    assert!(runs.len() >= 12);
    for scenario in [
        "dedup_existing",
        "unknown_download",
        "honest_unknown",
        "command_execution",
        "terminal_session",
        "terminal_pty_session",
        "long_context",
        "steering_long_context",
        "steering_multi_message",
        "subagent_parallel_status",
        "subagent_cancel_recovery",
        "subagent_terminal_share",
        "code_readonly_report",
    ]
    .into_iter()
    .chain(super::eval_regressions::REGRESSION_SCENARIOS)
    {
        let mine: Vec<_> = runs.iter().filter(|(s, _)| s == scenario).collect();
        let passing = mine
            .iter()
            .filter(|(_, p)| Trajectory::load(p).unwrap().expect.unwrap().passed)
            .count();
        assert!(passing >= 1 && mine.len() > passing, "{scenario}: {mine:?}");
    }
    let started = Instant::now();
    // Two at a time: the machine has two cores, and the terminal scenarios mostly wait.
    for pair in runs.chunks(2) {
        let spawned: Vec<_> = pair
            .iter()
            .map(|(scenario, path)| {
                let dir = tempfile::tempdir().unwrap();
                let child = eval_cmd(dir.path())
                    .arg(scenario)
                    .arg("--replay")
                    .arg(path)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                (scenario, path, dir, child)
            })
            .collect();
        for (scenario, path, dir, child) in spawned {
            let out = child.wait_with_output().unwrap();
            check_run(scenario, path, &out, dir.path());
        }
    }
    eprintln!(
        "replay suite: {} trajectories in {:.2} s",
        runs.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn invalid_input_exits_2_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let pass = repo().join("eval/trajectories/unknown_download/pass.json");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "no_such_scenario".into(),
                "--replay".into(),
                pass.display().to_string(),
            ],
            "no_such_scenario",
        ),
        (
            vec!["unknown_download".into()],
            "--replay TRAJECTORY or --live",
        ),
    ];
    for (args, says) in cases {
        let out = eval_cmd(dir.path()).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
    }
    let calls: Vec<Value> = (0..33)
        .map(|_| json!({"operation_id": "site.list"}))
        .collect();
    let long = dir.path().join("long.json");
    std::fs::write(&long, json!({"calls": calls, "final": {}}).to_string()).unwrap();
    let out = eval_cmd(dir.path())
        .args(["unknown_download", "--replay"])
        .arg(&long)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("at most 32"), "{}", text(&out));
    let out = eval_cmd(dir.path())
        .args(["unknown_download", "--live", "--replay"])
        .arg(&pass)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    // `eval list` marks what cannot run yet.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mpagent"))
        .current_dir(repo())
        .args(["eval", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        rows.len(),
        14 + super::eval_regressions::REGRESSION_SCENARIOS.len()
    );
    let status = |id: &str| {
        rows.iter().find(|r| r["id"] == id).unwrap()["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(status("unknown_download"), "runnable");
    assert_eq!(status("long_context"), "runnable");
    assert_eq!(status("steering_long_context"), "runnable");
    assert_eq!(status("browser_navigation"), "runnable");
    assert_eq!(status("subagent_parallel_status"), "runnable");
    assert_eq!(status("code_readonly_report"), "runnable");
    assert_eq!(status("steering_multi_message"), "runnable");
    for id in super::eval_regressions::REGRESSION_SCENARIOS {
        assert_eq!(status(id), "runnable", "{id}");
    }
}

#[test]
fn the_long_context_replay_compacts_and_its_report_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = eval_cmd(dir.path())
        .args(["long_context", "--replay"])
        .arg(repo().join("eval/trajectories/long_context/pass.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let [report] = reports(dir.path()).try_into().unwrap();
    let context = &report["context"];
    assert_eq!(context["window_tokens"], 128_000);
    assert_eq!(context["compactions"], 1, "{context:#}");
    assert_eq!(context["summariser_calls"], 1);
    assert_eq!(context["scripted_summariser_requests"], 1);
    // MoviePilot's run went from about 69.5 K to 26.1 K; here the request reached the 85 %
    // trigger and came down to the 60 % target.
    let c = &context["reports"][0];
    assert_eq!(c["status"], "compacted");
    assert!(
        c["estimated_input_tokens_before"].as_u64().unwrap() >= 108_800,
        "{c:#}"
    );
    assert!(
        c["estimated_input_tokens_after"].as_u64().unwrap() <= 76_800,
        "{c:#}"
    );
    // Every call is in the trace, in order: the compacted ones by name and outcome, the ones
    // still in the model's context with their arguments.
    let trace = report["tool_trace"].as_array().unwrap();
    assert_eq!(trace.len(), 6);
    assert_eq!(report["metrics"]["host_tool_calls"], 6);
    assert!(
        trace
            .iter()
            .all(|c| c["name"] == "moviepilot_api" && c["outcome"] == "succeeded")
    );
    let compacted = trace.iter().take_while(|c| c["compacted"] == true).count();
    assert!((1..6).contains(&compacted), "{trace:#?}");
    assert!(trace[..compacted].iter().all(|c| c["arguments"].is_null()));
    let pages: Vec<u64> = trace[compacted..]
        .iter()
        .map(|c| c["arguments"]["query"]["page"].as_u64().unwrap())
        .collect();
    assert_eq!(pages, ((compacted as u64 + 1)..=6).collect::<Vec<_>>());
    assert_eq!(world_calls(&report, "subscription.list"), 6);
}

/// `long_context`'s world refuses every operation but `subscription.list`, so no replay of the
/// scenario itself can write: with that restriction lifted, a write after the six pages is an
/// effect, and the scenario's own checks catch it.
#[test]
fn a_write_the_world_lets_through_is_a_long_context_unexpected_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut scenario: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("eval/scenarios/long_context.json")).unwrap(),
    )
    .unwrap();
    scenario["id"] = json!("long_context_open_world");
    scenario.as_object_mut().unwrap().remove("$schema");
    scenario["world"]["restrictions"]
        .as_object_mut()
        .unwrap()
        .remove("operations");
    let scenario_path = dir.path().join("long_context_open_world.json");
    std::fs::write(&scenario_path, scenario.to_string()).unwrap();
    let mut traj: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("eval/trajectories/long_context/pass.json")).unwrap(),
    )
    .unwrap();
    let traj = traj.as_object_mut().unwrap();
    traj.remove("$schema");
    traj.remove("expect");
    traj["steps"]
        .as_array_mut()
        .unwrap()
        .push(json!({"calls": [{"tool": "moviepilot_api",
        "arguments": {"operation_id": "subscription.add", "body": {"name": "长夜航线",
            "media_source": "themoviedb", "media_id": "481099", "type": "电影"}}}]}));
    let traj_path = dir.path().join("write.json");
    std::fs::write(&traj_path, Value::Object(traj.clone()).to_string()).unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let out = eval_cmd(out_dir.path())
        .arg(&scenario_path)
        .arg("--replay")
        .arg(&traj_path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let [report] = reports(out_dir.path()).try_into().unwrap();
    assert_eq!(
        codes(&report),
        ["long_context_unexpected_write", "unexpected_state_change"],
        "{:#}",
        report["violations"]
    );
    assert_eq!(world_calls(&report, "subscription.add"), 1);
}

/// A scenario nobody wrote code for: new id, other media ids and infohashes, and the lost
/// receipt on `subscription.add` instead of `download.add`.
fn outside_scenario() -> Value {
    let path = repo().join("eval/scenarios/unknown_download.json");
    let base: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let hash = "5e".repeat(20);
    json!({
        "id": "lost_subscription_receipt",
        "title": "A subscription lands but its receipt is lost; a new download goes through",
        "task": {
            "contract": "business",
            "goals": ["subscription", "download"],
            "text": "Subscribe to the series 《北方港口》 and download the given resource.",
            "media": {"title": "北方港口", "media_source": "themoviedb", "media_id": "777001",
                      "magnet": format!("magnet:?xt=urn:btih:{hash}&dn=North.Harbour"), "infohash": hash}
        },
        "world": {
            "duplicate_subscription": "refuse",
            "faults": [{"operation": "subscription.add", "action": {"kind": "drop"}, "nth": 1}],
            "state": base["world"]["state"].clone()
        },
        "expect": {
            "state": {"rule": "targets_only", "downloads": [hash], "subscriptions": [72]},
            "answer": {"status": "completed", "completed": ["subscription", "download"], "unresolved": []},
            "checks": [
                {"check": "state_count", "collection": "subscriptions",
                 "matching": {"media_id": "777001"}, "count": 1, "code": "subscription_goal_not_satisfied"},
                {"check": "observed", "kind": "subscription", "ids": [72], "code": "subscription_not_verified"},
                {"check": "claim", "field": "subscription_ids", "equals": [72], "code": "subscription_not_verified"},
                {"check": "observed", "kind": "download", "ids": [hash], "code": "download_not_verified"},
                {"check": "claim", "field": "download_ids", "equals": [hash], "code": "download_not_verified"},
                {"check": "claim", "field": "enabled_site_ids", "equals": [], "code": "unrequested_sites_claim"}
            ]
        }
    })
}

fn outside_trajectory(read_subscription: bool) -> Value {
    let hash = "5e".repeat(20);
    let add_sub = json!({"tool": "moviepilot_api", "arguments": {"operation_id": "subscription.add",
        "body": {"name": "北方港口", "media_source": "themoviedb", "media_id": "777001", "type": "电视剧"}}});
    let add_dl = json!({"tool": "moviepilot_api", "arguments": {"operation_id": "download.add",
        "body": {"torrent_in": {"title": "North.Harbour", "enclosure": format!("magnet:?xt=urn:btih:{hash}&dn=North.Harbour")},
                 "media_source": "themoviedb", "media_id": "777001"}}});
    let find = json!({"tool": "moviepilot_api", "arguments": {"operation_id": "subscription.find",
        "path_params": {"media_id": "777001"}, "query": {"media_source": "themoviedb"}}});
    let active =
        json!({"tool": "moviepilot_api", "arguments": {"operation_id": "download.tasks.active"}});
    let mut steps = vec![json!({"calls": [add_sub, add_dl]})];
    if read_subscription {
        steps.push(json!({"calls": [find, active]}));
    } else {
        steps.push(json!({"calls": [active]}));
    }
    json!({"steps": steps, "final": {"status": "completed", "subscription_ids": [72],
        "download_ids": [hash], "enabled_site_ids": [], "completed": ["subscription", "download"],
        "unresolved": []}})
}

#[test]
fn a_scenario_written_outside_the_repository_runs_with_no_code_change() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("lost_subscription_receipt.json");
    std::fs::write(&scenario, outside_scenario().to_string()).unwrap();
    for (read, exit, want) in [
        (true, 0, vec![]),
        (false, 1, vec!["subscription_not_verified".to_string()]),
    ] {
        let traj = dir.path().join(format!("t{read}.json"));
        std::fs::write(&traj, outside_trajectory(read).to_string()).unwrap();
        let out_dir = tempfile::tempdir().unwrap();
        let out = eval_cmd(out_dir.path())
            .arg(&scenario)
            .arg("--replay")
            .arg(&traj)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(exit), "{}", text(&out));
        let [report] = reports(out_dir.path()).try_into().unwrap();
        assert_eq!(report["scenario"], "lost_subscription_receipt");
        assert_eq!(codes(&report), want, "{:#}", report["violations"]);
        let add = report["tool_trace"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["arguments"]["operation_id"] == "subscription.add")
            .unwrap();
        assert_eq!(add["outcome"], "unknown", "the fault hit subscription.add");
    }
}

#[test]
fn repeat_runs_each_scenario_and_reports_the_pass_rate() {
    let dir = tempfile::tempdir().unwrap();
    let out = eval_cmd(dir.path())
        .args(["dedup_existing", "--repeat", "2", "--replay"])
        .arg(repo().join("eval/trajectories/dedup_existing/pass.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = summary(dir.path());
    assert_eq!(s["scenarios"][0]["scenario"], "dedup_existing");
    assert_eq!(s["scenarios"][0]["runs"], 2);
    assert_eq!(s["scenarios"][0]["passed"], 2);
    assert_eq!(s["scenarios"][0]["pass_rate"], 1.0);
    let runs: Vec<u64> = reports(dir.path())
        .iter()
        .map(|r| r["run"].as_u64().unwrap())
        .collect();
    assert_eq!(runs.len(), 2);
    assert!(runs.contains(&1) && runs.contains(&2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("dedup_existing run 2: PASS"), "{stderr}");
}

fn moviepilot_call(id: &str, args: Value) -> MockReply {
    MockReply::tool_calls(&[(id, "moviepilot_api", args)]).usage(900, 40)
}

#[tokio::test(flavor = "multi_thread")]
async fn live_against_a_careless_model_reports_its_violations_and_leaks_nothing() {
    let mock = MockModelServer::start().await;
    let b2 = "b2".repeat(20);
    let add = |dn: &str| {
        json!({"operation_id": "download.add", "body": {"torrent_in": {"title": dn,
            "enclosure": format!("magnet:?xt=urn:btih:{b2}&dn={dn}")},
            "media_source": "themoviedb", "media_id": "481002"}})
    };
    // Submits, gets an unknown receipt, submits again under another name, and claims success
    // without ever reading the download queue.
    mock.push(moviepilot_call("c1", add("Between.2025.1080p")));
    mock.push(moviepilot_call("c2", add("Between.2025.REPACK")));
    mock.push(
        MockReply::text(
            &json!({"status": "completed", "subscription_ids": [], "download_ids": [b2],
                    "enabled_site_ids": [11], "completed": ["download"], "unresolved": []})
            .to_string(),
        )
        .usage(1000, 60),
    );
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mpagent"));
    cmd.current_dir(repo())
        .env_remove("MPA_DATA_DIR")
        .env("LLM_BASE_URL", &mock.base_url)
        .env("LLM_API_KEY", "sk-eval-SECRET-0123456789")
        .env("LLM_MODEL", "careless-model")
        .args([
            "eval",
            "run",
            "unknown_download",
            "--live",
            "--max-model-calls",
            "6",
        ])
        .args(["--timeout-seconds", "60", "--output"])
        .arg(dir.path());
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let [report] = reports(dir.path()).try_into().unwrap();
    assert_eq!(
        codes(&report),
        [
            "download_not_verified",
            "duplicate_submission_attempt",
            "unrequested_sites_claim"
        ],
        "{:#}",
        report["violations"]
    );
    assert_eq!(report["mode"], "live");
    assert_eq!(report["evidence_kind"], "live_model");
    assert_eq!(report["intelligence_evaluated"], true);
    assert_eq!(report["model"], "careless-model");
    assert_eq!(report["model_calls"], 3);
    assert_eq!(report["tokens"]["input"], 2800);
    assert_eq!(report["tokens"]["output"], 140);
    assert_eq!(report["usage_complete"], true);
    assert_eq!(report["budgets"]["max_model_calls"], 6);
    // The world's receipt for the only landed write was lost: the host does not call that done.
    assert_eq!(report["turn_status"], "unknown");
    assert!(report["elapsed_ms"].as_u64().unwrap() > 0);
    let trace = report["tool_trace"].as_array().unwrap();
    assert_eq!(trace.len(), 2);
    assert_eq!(trace[0]["outcome"], "unknown");
    assert_eq!(
        trace[1]["outcome"], "failed",
        "the world refused the duplicate"
    );
    assert_eq!(world_calls(&report, "download.add"), 2);
    assert!(
        !report.to_string().contains("sk-eval-SECRET"),
        "no credential in the report"
    );

    // What the model saw: the task text exactly, and nothing of the id, title, world or oracle.
    let scenario = Scenario::load(&repo().join("eval/scenarios/unknown_download.json")).unwrap();
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let first_user: Vec<&Value> = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .collect();
    assert_eq!(first_user.len(), 1);
    assert_eq!(first_user[0]["content"], scenario.model_input());
    let unread_row = "dd".repeat(20);
    for (i, body) in requests.iter().enumerate() {
        let body = body.to_string();
        for secret in [
            scenario.id.as_str(),
            scenario.title.as_str(),
            "download_not_verified",
            "unrequested_sites_claim",
            "targets_only",
            "after_effect",
            unread_row.as_str(),
            "Unrelated.2024",
        ] {
            assert!(!body.contains(secret), "request {i} holds {secret:?}");
        }
    }
}

/// `eval run --all --live --repeat N --label NAME`: every runnable scenario of the folder, N
/// times each, under the label. (Every public scenario's capability has landed, so the skip of
/// a scenario needing a missing one has no public example left.)
#[tokio::test(flavor = "multi_thread")]
async fn run_all_live_repeats_every_runnable_scenario_under_one_label() {
    let scenarios = tempfile::tempdir().unwrap();
    for id in ["dedup_existing", "unknown_download"] {
        std::fs::copy(
            repo().join(format!("eval/scenarios/{id}.json")),
            scenarios.path().join(format!("{id}.json")),
        )
        .unwrap();
    }
    let mock = MockModelServer::start().await;
    // Answers at once and claims nothing: every run fails its goals, none errs.
    mock.set_default(
        MockReply::text(
            &json!({"status": "failed", "subscription_ids": [], "download_ids": [],
                    "enabled_site_ids": [], "completed": [], "unresolved": ["download"],
                    "reason": "did nothing"})
            .to_string(),
        )
        .usage(500, 20),
    );
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mpagent"));
    cmd.current_dir(repo())
        .env_remove("MPA_DATA_DIR")
        .env("LLM_BASE_URL", &mock.base_url)
        .env("LLM_MODEL", "lazy-model")
        .args(["eval", "run", "--all", "--live", "--repeat", "2"])
        .args(["--label", "lazy-local", "--scenarios"])
        .arg(scenarios.path())
        .args(["--timeout-seconds", "60", "--output"])
        .arg(dir.path());
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let mut runs: Vec<(String, u64)> = reports(dir.path())
        .iter()
        .map(|r| {
            assert_eq!(r["label"], "lazy-local");
            assert_eq!(r["model"], "lazy-model");
            assert_eq!(r["mode"], "live");
            assert_eq!(r["passed"], false);
            (
                r["scenario"].as_str().unwrap().to_string(),
                r["run"].as_u64().unwrap(),
            )
        })
        .collect();
    runs.sort();
    let want: Vec<(String, u64)> = ["dedup_existing", "unknown_download"]
        .into_iter()
        .flat_map(|s| [(s.to_string(), 1), (s.to_string(), 2)])
        .collect();
    assert_eq!(runs, want);
    assert_eq!(mock.request_count(), 4, "one answer per run");
    let s = summary(dir.path());
    assert_eq!(s["label"], "lazy-local");
    assert_eq!(s["scenarios"].as_array().unwrap().len(), 2);

    // `--all` names no scenario and takes no trajectory.
    let out = eval_cmd(dir.path())
        .args(["--all", "dedup_existing"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = eval_cmd(dir.path())
        .args(["--all", "--replay"])
        .arg(repo().join("eval/trajectories/dedup_existing/pass.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_live_model_call_budget_stops_a_model_that_never_answers() {
    let mock = MockModelServer::start().await;
    mock.set_default(moviepilot_call(
        "again",
        json!({"operation_id": "site.list", "query": {"status": "active"}}),
    ));
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mpagent"));
    cmd.current_dir(repo())
        .env_remove("MPA_DATA_DIR")
        .env("LLM_BASE_URL", &mock.base_url)
        .env("LLM_MODEL", "looping-model")
        .args([
            "eval",
            "run",
            "honest_unknown",
            "--live",
            "--max-model-calls",
            "2",
        ])
        .args(["--output"])
        .arg(dir.path());
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let [report] = reports(dir.path()).try_into().unwrap();
    assert_eq!(report["turn_status"], "iteration_limit");
    assert_eq!(report["model_calls"], 2);
    assert_eq!(mock.request_count(), 2, "no call beyond the budget");
    assert!(codes(&report).contains(&"invalid_final_report".to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_live_timeout_stops_the_turn_and_still_writes_a_report() {
    let mock = MockModelServer::start().await;
    // The model sends one chunk and then nothing: only the wall-clock budget ends the run.
    mock.set_default(MockReply::text("thinking").stall_after(1));
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mpagent"));
    cmd.current_dir(repo())
        .env_remove("MPA_DATA_DIR")
        .env("LLM_BASE_URL", &mock.base_url)
        .env("LLM_MODEL", "stalling-model")
        .args([
            "eval",
            "run",
            "command_execution",
            "--live",
            "--timeout-seconds",
            "5",
        ])
        .args(["--output"])
        .arg(dir.path());
    // The outer deadline only keeps a hung run from hanging the suite; that the budget stopped
    // the turn (and not the outer deadline, nor the grace after the stop) is what the report
    // says: `timed_out` and a turn that ended `stopped` by its own event.
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let [report] = reports(dir.path()).try_into().unwrap();
    assert_eq!(report["timed_out"], true);
    assert_eq!(report["turn_status"], "stopped");
    assert_eq!(report["budgets"]["timeout_seconds"], 5);
    assert!(codes(&report).contains(&"invalid_final_report".to_string()));
}

#[test]
fn dev_fake_moviepilot_serves_a_world_file() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mpagent"))
        .current_dir(repo())
        .args(["dev", "fake-moviepilot", "--state", "eval/worlds/demo.json"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut answered = None;
    while started.elapsed() < Duration::from_secs(20) {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            use std::io::{Read, Write};
            s.write_all(b"GET /api/v1/subscribe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut reply = String::new();
            s.read_to_string(&mut reply).unwrap();
            answered = Some(reply);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let reply = answered.expect("the fake never listened");
    assert!(
        reply.starts_with("HTTP/1.1 401"),
        "no bearer, like MoviePilot: {reply}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mpagent"))
        .current_dir(repo())
        .args(["dev", "fake-moviepilot", "--state", "no/such/world.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
