//! Steering evidence for the oracle (evaluation.md, `steering_*` scenarios): the host's
//! acknowledgements checked against what the model was actually sent.
//!
//! The host reports each message it queued and applied. In replay the scripted model recorded
//! every request, and those decide what was applied: a message reached the model when a
//! request's user message carries its id (the steering block's `input.steering_message_id`),
//! and a request holding two user messages with one id means it was applied twice — one more
//! `applied` event, which the oracle's count and identity checks catch. Live, the requests are
//! not recorded and the host's word stands.

use crate::oracle::SteeringEvent;
use serde_json::Value;
use std::collections::BTreeMap;

/// What the host reported of one steering message (`queued`, `applied`, `discarded`, or
/// `fallback` when no running turn took it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSteering {
    pub kind: String,
    pub message_id: String,
}

/// The steering ids a request's user messages carry, one per message, in order.
pub fn ids_in_request(request: &Value) -> Vec<String> {
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return Vec::new();
    };
    messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .filter_map(|m| {
            let text = match m.get("content")? {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => return None,
            };
            let block: Value = serde_json::from_str(&text).ok()?;
            let input = block.get("input")?;
            if input.get("steering") != Some(&Value::Bool(true)) {
                return None;
            }
            input
                .get("steering_message_id")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}

/// The evidence the oracle reads: every `queued` the host reported, and for every `applied` one
/// event flagged with whether a model request carried the message, plus one more for each extra
/// copy of it in a single request. `requests`: `None` when they were not recorded (live).
pub fn evidence(host: &[HostSteering], requests: Option<&[Value]>) -> Vec<SteeringEvent> {
    // The most copies of each id any one request held.
    let mut copies: BTreeMap<String, usize> = BTreeMap::new();
    for request in requests.unwrap_or_default() {
        let mut here: BTreeMap<String, usize> = BTreeMap::new();
        for id in ids_in_request(request) {
            *here.entry(id).or_insert(0) += 1;
        }
        for (id, n) in here {
            let best = copies.entry(id).or_insert(0);
            *best = (*best).max(n);
        }
    }
    let mut out = Vec::new();
    for h in host {
        match h.kind.as_str() {
            "queued" => out.push(SteeringEvent {
                kind: "queued".into(),
                message_id: h.message_id.clone(),
                model_boundary: false,
            }),
            "applied" => {
                let seen = match requests {
                    Some(_) => copies.get(&h.message_id).copied().unwrap_or(0),
                    None => 1,
                };
                for _ in 0..seen.max(1) {
                    out.push(SteeringEvent {
                        kind: "applied".into(),
                        message_id: h.message_id.clone(),
                        model_boundary: seen > 0,
                    });
                }
            }
            _ => {}
        }
    }
    out
}
