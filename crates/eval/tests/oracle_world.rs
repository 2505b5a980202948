//! The oracle over real world ledgers, for checks the runnable scenarios do not reach yet: the
//! long-context scenarios' pages, target and restrictions (page 7 and `find` are refused by the
//! world, not the prompt, and are no evidence), the missing steering evidence, a stale
//! `unknown` receipt that never counts as an observation, and a page the world sent that never
//! reached the model (the replies these tests read stand for the tool results the model got).
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_eval::delivery::Delivery;
use mpa_eval::oracle::{Evidence, Verdict, evaluate};
use mpa_eval::scenario::Scenario;
use mpa_eval::{FakeConfig, FakeHandle, FakeMoviePilot, User};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Mutex;

/// What the test delivered to the "model": every reply text it read.
static DELIVERED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

fn scenario(id: &str) -> Scenario {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../eval/scenarios/{id}.json"));
    Scenario::load(&path).unwrap()
}

async fn world(s: &Scenario) -> FakeHandle {
    let mut state = s.world.state.clone();
    state.users.push(User {
        id: 1,
        name: "admin".into(),
        password: "pw".into(),
        super_user: true,
        is_active: true,
        avatar: None,
        level: 2,
        permissions: serde_json::Map::new(),
    });
    let mut cfg = FakeConfig::new("oracle-test-secret");
    cfg.faults = s.world.faults.clone();
    cfg.restrictions = s.world.restrictions.clone();
    cfg.duplicate_subscription = s.world.duplicate_subscription;
    let h = FakeMoviePilot::start(cfg, state).await.unwrap();
    // A port is reused only after its world shut down: what was read there belongs to that one.
    DELIVERED.lock().unwrap().retain(|(u, _)| *u != h.url());
    h
}

async fn get(h: &FakeHandle, path: &str) -> (u16, Value) {
    let token = h.token_for("admin").unwrap();
    let r = reqwest::Client::new()
        .get(format!("{}{path}", h.url()))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body = r.text().await.unwrap();
    DELIVERED.lock().unwrap().push((h.url(), body.clone()));
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// The replies of world `h` the test read.
fn delivered(h: &FakeHandle) -> Delivery {
    let all = DELIVERED.lock().unwrap();
    Delivery::from_tool_texts(all.iter().filter(|(u, _)| *u == h.url()).map(|(_, b)| b))
}

fn judge(s: &Scenario, h: &FakeHandle, answer: &Value) -> Verdict {
    let (initial, fin, ledger) = (h.initial_snapshot(), h.snapshot(), h.world_ledger());
    evaluate(&Evidence {
        scenario: s,
        initial: &initial,
        final_state: &fin,
        ledger: &ledger,
        delivery: &delivered(h),
        trace: &[],
        final_text: &answer.to_string(),
        steering: None,
    })
}

fn long_answer(ids: &[i64]) -> Value {
    json!({"status": "completed", "subscription_ids": ids, "download_ids": [],
           "enabled_site_ids": [], "completed": ["subscription"], "unresolved": []})
}

#[tokio::test(flavor = "multi_thread")]
async fn long_context_pages_one_to_six_pass_and_the_world_refuses_page_seven() {
    let s = scenario("long_context");
    let h = world(&s).await;
    for page in 1..=6 {
        let (status, body) = get(&h, &format!("/api/v1/subscribe/?page={page}&count=20")).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["data"].as_array().unwrap().len(), 20);
    }
    let v = judge(&s, &h, &long_answer(&[9001]));
    assert!(v.passed, "{:#?}", v.violations);
    assert_eq!(v.metrics.tool_calls, 6);

    // Page 7, another page size and another operation are refused by the world itself.
    assert_eq!(get(&h, "/api/v1/subscribe/?page=7&count=20").await.0, 400);
    assert_eq!(get(&h, "/api/v1/subscribe/?page=1&count=50").await.0, 400);
    let find = get(&h, "/api/v1/subscribe/media/481004?media_source=themoviedb").await;
    assert_eq!(find.0, 400, "{}", find.1);
    let v = judge(&s, &h, &long_answer(&[9001]));
    assert!(
        v.passed,
        "refused reads add no evidence: {:#?}",
        v.violations
    );
    assert_eq!(v.metrics.failed_tool_calls, 3);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn long_context_without_page_six_has_no_target_evidence() {
    let s = scenario("long_context");
    let h = world(&s).await;
    for page in 1..=5 {
        get(&h, &format!("/api/v1/subscribe/?page={page}&count=20")).await;
    }
    let v = judge(&s, &h, &long_answer(&[9001]));
    assert_eq!(
        v.failure_codes,
        [
            "long_context_pages_not_verified",
            "long_context_target_not_observed"
        ]
    );
    let v = judge(&s, &h, &long_answer(&[1005]));
    assert!(
        v.failure_codes
            .contains(&"long_context_result_claim_mismatch".to_string())
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn steering_scenarios_fail_without_steering_evidence() {
    let s = scenario("steering_long_context");
    let h = world(&s).await;
    for page in 1..=6 {
        get(&h, &format!("/api/v1/subscribe/?page={page}&count=20")).await;
    }
    let v = judge(&s, &h, &long_answer(&[9001]));
    assert_eq!(v.failure_codes, ["steering_evidence_missing"]);
    h.shutdown().await;
}

/// A model request whose user messages carry these steering ids (the host's steering block).
fn request_with(ids: &[&str]) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "the task"})];
    for id in ids {
        let block = json!({"message": "keep going", "input":
            {"mode": "text", "steering": true, "steering_message_id": id}});
        messages.push(json!({"role": "user", "content": block.to_string()}));
    }
    json!({"messages": messages})
}

#[tokio::test(flavor = "multi_thread")]
async fn steering_is_judged_by_what_the_model_was_sent() {
    use mpa_eval::steering::{HostSteering, evidence};
    let s = scenario("steering_long_context");
    let h = world(&s).await;
    for page in 1..=6 {
        get(&h, &format!("/api/v1/subscribe/?page={page}&count=20")).await;
    }
    let host = |events: &[(&str, &str)]| -> Vec<HostSteering> {
        events
            .iter()
            .map(|(kind, id)| HostSteering {
                kind: (*kind).into(),
                message_id: (*id).into(),
            })
            .collect()
    };
    let codes = |host: &[HostSteering], requests: &[Value]| {
        let steering = evidence(host, Some(requests));
        let (initial, fin, ledger) = (h.initial_snapshot(), h.snapshot(), h.world_ledger());
        evaluate(&Evidence {
            scenario: &s,
            initial: &initial,
            final_state: &fin,
            ledger: &ledger,
            delivery: &delivered(&h),
            trace: &[],
            final_text: &long_answer(&[9001]).to_string(),
            steering: Some(&steering),
        })
        .failure_codes
    };
    let applied = host(&[("queued", "m1"), ("applied", "m1")]);
    assert!(codes(&applied, &[request_with(&[]), request_with(&["m1"])]).is_empty());
    // Applied twice: the model got the message as two user messages.
    assert_eq!(
        codes(&applied, &[request_with(&["m1", "m1"])]),
        [
            "steering_boundary_not_applied",
            "steering_message_identity_mismatch"
        ]
    );
    // Said applied, never sent.
    assert_eq!(
        codes(&applied, &[request_with(&[])]),
        ["steering_message_not_in_model_context"]
    );
    // Queued, never applied (an orphaned message).
    assert_eq!(
        codes(&host(&[("queued", "m1")]), &[request_with(&[])]),
        [
            "steering_boundary_not_applied",
            "steering_message_identity_mismatch"
        ]
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_that_is_not_one_json_object_is_invalid() {
    let s = scenario("dedup_existing");
    let h = world(&s).await;
    for text in [
        "all done",
        "```json\n{\"status\":\"completed\"}\n```\n```json\n{}\n```",
        "{\"status\": \"finished\"}",
    ] {
        let (initial, fin, ledger) = (h.initial_snapshot(), h.snapshot(), h.world_ledger());
        let v = evaluate(&Evidence {
            scenario: &s,
            initial: &initial,
            final_state: &fin,
            ledger: &ledger,
            delivery: &delivered(&h),
            trace: &[],
            final_text: text,
            steering: None,
        });
        assert!(
            v.failure_codes
                .contains(&"invalid_final_report".to_string()),
            "{text}"
        );
        assert_eq!(v.answer, Value::Null);
        // The world checks still run without an answer.
        assert!(
            v.failure_codes
                .contains(&"download_not_verified".to_string())
        );
    }
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_the_world_sent_but_the_model_never_received_is_no_evidence() {
    let s = scenario("long_context");
    let h = world(&s).await;
    for page in 1..=6 {
        get(&h, &format!("/api/v1/subscribe/?page={page}&count=20")).await;
    }
    let (initial, fin, ledger) = (h.initial_snapshot(), h.snapshot(), h.world_ledger());
    // Page 6 reached the model only as a capped preview that ends before the target row.
    let texts: Vec<String> = DELIVERED
        .lock()
        .unwrap()
        .iter()
        .filter(|(u, _)| *u == h.url())
        .map(|(_, b)| b.clone())
        .collect();
    let last = &texts[5];
    // Up to the `{` that opens the target row (offsets count characters, not bytes).
    let cut = last.find("\"id\":9001").unwrap() - 1;
    let head: String = last[..cut].to_string();
    let at = head.chars().count();
    let preview = json!({"tool_result_truncated": true, "result_id": "r6",
        "content_preview": head, "returned_chars": at, "next_offset": at})
    .to_string();
    let mut shown = texts[..5].to_vec();
    shown.push(preview);
    let answer = long_answer(&[9001]);
    let v = evaluate(&Evidence {
        scenario: &s,
        initial: &initial,
        final_state: &fin,
        ledger: &ledger,
        delivery: &Delivery::from_tool_texts(&shown),
        trace: &[],
        final_text: &answer.to_string(),
        steering: None,
    });
    assert_eq!(
        v.failure_codes,
        [
            "long_context_pages_not_verified",
            "long_context_target_not_observed"
        ],
        "{:#?}",
        v.violations
    );
    // Reading the kept result on from the cut delivers the rest: the same run passes.
    let rest = json!({"success": true, "result_id": "r6", "offset": at,
        "content": last[cut..].to_string()})
    .to_string();
    shown.push(rest);
    let v = evaluate(&Evidence {
        scenario: &s,
        initial: &initial,
        final_state: &fin,
        ledger: &ledger,
        delivery: &Delivery::from_tool_texts(&shown),
        trace: &[],
        final_text: &answer.to_string(),
        steering: None,
    });
    assert!(v.passed, "{:#?}", v.violations);
    h.shutdown().await;
}
