//! The per-request budget (issue 17, spec runtime.md §12.1): every model call's request is
//! estimated against the window — the catalogue's, else `LLM_MAX_CONTEXT_TOKENS` — and the
//! figures go out as a `Budget` event; provider usage accumulates in the session detail.

use crate::common::host::{TestHost, run_turn};
use mpa_core::Agent;
use mpa_protocol::{Actor, Event, RequestBudget, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::json;

async fn agent(
    mock: &MockModelServer,
    model: &str,
    window_k: u64,
) -> (tempfile::TempDir, Agent, Actor) {
    let h = TestHost::builder(mock, model)
        .model(|m| m.max_output_tokens = Some(512))
        .config(move |c| c.max_context_tokens_k = window_k)
        .build()
        .await;
    (h.dir, h.agent, h.actor)
}

async fn turn(agent: &Agent, actor: &Actor, session: &str, text: &str) -> (TurnStatus, Vec<Event>) {
    let t = run_turn(agent, actor, session, text).await;
    (t.status, t.events)
}

fn budgets(events: &[Event]) -> Vec<RequestBudget> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Budget { budget } => Some((**budget).clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn every_model_call_reports_its_budget_against_llm_max_context_tokens() {
    let mock = MockModelServer::start().await;
    mock.push(MockReply::tool_calls(&[("c1", "test_echo", json!({"text": "hi"}))]).usage(900, 20));
    mock.push(MockReply::text("done").usage(1000, 30));
    // A model the catalogue does not know: the window is LLM_MAX_CONTEXT_TOKENS × 1000.
    let (_d, agent, actor) = agent(&mock, "house-model-x", 16).await;
    let (status, events) = turn(&agent, &actor, "s1", "echo hi").await;
    assert_eq!(status, TurnStatus::Completed);
    let b = budgets(&events);
    assert_eq!(b.len(), 2, "one budget per model call");
    for x in &b {
        assert_eq!(x.context_window_tokens, 16_000);
        assert_eq!(x.estimator, "calibrated_estimate");
        assert_eq!(x.configured_output_limit_tokens, Some(512));
        let raw = x.message_tokens + x.system_tokens + x.tool_tokens + x.multimodal_tokens;
        assert_eq!(
            x.estimated_input_tokens,
            (raw * 3).div_ceil(2),
            "×1.5 factor"
        );
        assert_eq!(
            x.estimated_remaining_input_tokens,
            16_000 - x.estimated_input_tokens
        );
        assert!(!x.estimated_over_input_limit);
        assert!(x.system_tokens > 0 && x.tool_tokens > 0 && x.tool_count > 0);
        let ratio = x.estimated_input_tokens as f64 / 16_000.0;
        assert!((x.estimated_input_ratio - ratio).abs() < 0.001);
    }
    assert_eq!(b[0].message_count + 2, b[1].message_count, "call + result");
    assert!(b[1].message_tokens > b[0].message_tokens);

    // The session detail carries the provider's usage: last and total, and the call count.
    let chat = agent.chat_for(&actor, "s1").await.unwrap();
    let u = &chat.session_state["usage"];
    assert_eq!(u["model_call_count"], 2);
    assert_eq!(u["last_input_tokens"], 1000);
    assert_eq!(u["last_output_tokens"], 30);
    assert_eq!(u["total_input_tokens"], 1900);
    assert_eq!(u["total_output_tokens"], 50);
    assert_eq!(u["context_window_tokens"], 16_000);
    assert_eq!(
        u["last_estimated_input_tokens"],
        b[1].estimated_input_tokens
    );
    // Accumulates across turns.
    mock.push(MockReply::text("again").usage(1200, 10));
    turn(&agent, &actor, "s1", "more").await;
    let chat = agent.chat_for(&actor, "s1").await.unwrap();
    assert_eq!(chat.session_state["usage"]["model_call_count"], 3);
    assert_eq!(chat.session_state["usage"]["total_input_tokens"], 3100);
}

#[tokio::test]
async fn the_catalogue_window_wins_over_llm_max_context_tokens() {
    let mock = MockModelServer::start().await;
    mock.push(MockReply::text("ok"));
    let (_d, agent, actor) = agent(&mock, "gpt-4", 16).await;
    let (_, events) = turn(&agent, &actor, "s2", "hi").await;
    assert_eq!(budgets(&events)[0].context_window_tokens, 8_192);
    assert_eq!(budgets(&events)[0].model_max_output_tokens, Some(8_192));
}

#[tokio::test]
async fn openai_models_are_counted_with_their_tokenizer() {
    // Reference counts of OpenAI's own tiktoken for this text: o200k_base 11, cl100k_base 16.
    let text = "你好，世界！请列出我的订阅。";
    for (model, counter, text_tokens) in [
        ("gpt-4o", mpa_model::TokenCounter::O200kBase, 11),
        ("gpt-4", mpa_model::TokenCounter::Cl100kBase, 16),
    ] {
        let mock = MockModelServer::start().await;
        mock.push(MockReply::text("ok").usage(100, 2));
        let (_d, agent, actor) = agent(&mock, model, 16).await;
        let (_, events) = turn(&agent, &actor, "s", text).await;
        let b = &budgets(&events)[0];
        assert_eq!(b.estimator, counter.name(), "{model}");
        // The user message: 3 framing + 1 role + the text; 3 tokens prime the reply.
        assert_eq!(b.message_tokens, 3 + 1 + text_tokens + 3, "{model}");
        // The system message and the schemas are counted from what was sent.
        let sent = &mock.requests()[0];
        let system = sent["messages"][0]["content"].as_str().unwrap();
        assert_eq!(
            b.system_tokens,
            3 + 1 + counter.text_tokens(system),
            "{model}"
        );
        let schemas: u64 = sent["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                counter.tool_tokens(&mpa_protocol::ToolSpec {
                    name: t["function"]["name"].as_str().unwrap().into(),
                    description: t["function"]["description"].as_str().unwrap().into(),
                    parameters: t["function"]["parameters"].clone(),
                })
            })
            .sum();
        assert_eq!(b.tool_tokens, schemas, "{model}");
        // Messages exact, schemas with the ×1.5 factor inside `tool_tokens`: the sum, no more.
        assert_eq!(
            b.estimated_input_tokens,
            b.message_tokens + b.system_tokens + b.tool_tokens,
            "{model}"
        );
        let chat = agent.chat_for(&actor, "s").await.unwrap();
        assert_eq!(chat.session_state["usage"]["estimator"], counter.name());
    }
    // Any other model: the calibrated estimate, said so in the session detail too.
    let mock = MockModelServer::start().await;
    mock.push(MockReply::text("ok"));
    let (_d, agent, actor) = agent(&mock, "deepseek-chat", 16).await;
    let (_, events) = turn(&agent, &actor, "s", text).await;
    assert_eq!(budgets(&events)[0].estimator, "calibrated_estimate");
    let chat = agent.chat_for(&actor, "s").await.unwrap();
    assert_eq!(
        chat.session_state["usage"]["estimator"],
        "calibrated_estimate"
    );
}
