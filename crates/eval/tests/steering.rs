//! Steering evidence: the host's events checked against what reached the model.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_eval::oracle::SteeringEvent;
use mpa_eval::steering::{HostSteering, evidence};
use serde_json::Value;
use serde_json::json;

fn steering_message(id: &str) -> Value {
    let block = json!({"message": "keep going", "input":
        {"mode": "text", "steering": true, "steering_message_id": id}});
    json!({"role": "user", "content": serde_json::to_string_pretty(&block).unwrap()})
}

fn request(messages: Vec<Value>) -> Value {
    json!({"messages": messages})
}

fn host(events: &[(&str, &str)]) -> Vec<HostSteering> {
    events
        .iter()
        .map(|(kind, id)| HostSteering {
            kind: (*kind).into(),
            message_id: (*id).into(),
        })
        .collect()
}

fn shown(events: &[SteeringEvent]) -> Vec<(String, String, bool)> {
    events
        .iter()
        .map(|e| (e.kind.clone(), e.message_id.clone(), e.model_boundary))
        .collect()
}

#[test]
fn an_applied_message_counts_once_it_reached_a_model_request() {
    let reqs = [
        request(vec![json!({"role": "user", "content": "task"})]),
        request(vec![
            json!({"role": "user", "content": "task"}),
            steering_message("m1"),
        ]),
    ];
    let ev = evidence(&host(&[("queued", "m1"), ("applied", "m1")]), Some(&reqs));
    assert_eq!(
        shown(&ev),
        [
            ("queued".into(), "m1".into(), false),
            ("applied".into(), "m1".into(), true)
        ]
    );
}

#[test]
fn a_message_the_model_never_saw_and_one_applied_twice_are_told_apart() {
    let reqs = [request(vec![
        json!({"role": "user", "content": "task"}),
        steering_message("m2"),
        steering_message("m2"),
    ])];
    let ev = evidence(
        &host(&[
            ("queued", "m1"),
            ("applied", "m1"),
            ("queued", "m2"),
            ("applied", "m2"),
        ]),
        Some(&reqs),
    );
    assert_eq!(
        shown(&ev),
        [
            ("queued".into(), "m1".into(), false),
            ("applied".into(), "m1".into(), false),
            ("queued".into(), "m2".into(), false),
            ("applied".into(), "m2".into(), true),
            ("applied".into(), "m2".into(), true),
        ]
    );
    // Live, the host's word stands.
    let live = evidence(&host(&[("queued", "m1"), ("applied", "m1")]), None);
    assert!(live[1].model_boundary);
}
