//! Context-economy costs (issue 17). Targets: the budget estimate of a 200-message request
//! ≤ 0.2 ms; the compaction decision and partition ≤ 1 ms (the summariser call excluded); one
//! `read_tool_result` page ≤ 0.1 ms. With a real tokenizer (OpenAI models) the budget counts a
//! message once: the cold count of a 200-message conversation is measured apart from the cost of
//! one more call (the cache's lookups plus the messages the call adds).
//! Run: `cargo bench -p mpa-core --bench context`.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use divan::Bencher;
use mpa_core::tools::read_tool_result::ResultStore;
use mpa_core::turn::compact::{Costs, due, partition};
use mpa_core::turn::request::Tail;
use mpa_core::turn::steps::count_request;
use mpa_model::{BudgetLimits, TokenCache, TokenCounter};
use mpa_protocol::{Actor, Message, Outcome, ToolCall, ToolSpec, UserId};

fn main() {
    divan::main();
}

/// 200 messages as a long task makes them: requests (Chinese and English), tool calls, results
/// (~2000 characters of JSON), answers.
fn conversation() -> Vec<Message> {
    let mut v = Vec::new();
    for i in 0..50 {
        v.push(Message::user(format!(
            "第{i}页：请列出订阅，每页 20 条，不要删除任何东西 (page {i}, count 20)"
        )));
        v.push(Message::assistant(
            "",
            vec![ToolCall {
                id: format!("call_{i:04}"),
                name: "moviepilot_api".into(),
                arguments: format!(
                    r#"{{"operation_id":"subscription.list","query":{{"page":{i},"count":20}}}}"#
                ),
            }],
        ));
        let rows: String = (0..20)
            .map(|r| {
                format!(
                    r#"{{"id":{},"name":"订阅 {r} 流浪地球","state":"R"}},"#,
                    i * 20 + r
                )
            })
            .collect();
        v.push(Message::tool(
            format!("call_{i:04}"),
            "moviepilot_api",
            format!(r#"{{"success":true,"items":[{rows}],"total":400}}"#).repeat(2),
            Outcome::Succeeded,
        ));
        v.push(Message::assistant(
            format!("Page {i} read: 20 subscriptions, none of them the target. 继续下一页。"),
            vec![],
        ));
    }
    v
}

fn specs() -> Vec<ToolSpec> {
    (0..8)
        .map(|i| ToolSpec {
            name: format!("tool_{i}"),
            description: "A tool that does one thing well, described in two sentences. ".repeat(3),
            parameters: serde_json::json!({"type": "object", "properties": {
                "a": {"type": "string", "description": "the first argument"},
                "b": {"type": "integer", "minimum": 1, "maximum": 100}}}),
        })
        .collect()
}

fn limits(counter: TokenCounter) -> BudgetLimits {
    BudgetLimits {
        context_window_tokens: 16_000,
        model_max_output_tokens: None,
        configured_output_limit_tokens: None,
        counter,
    }
}

fn system() -> Message {
    Message::system("You are the MoviePilot agent. ".repeat(150))
}

/// A page of results as the conversation has them, unique per `i`.
fn result(i: usize) -> Message {
    let rows: String = (0..20)
        .map(|r| {
            format!(
                r#"{{"id":{},"name":"订阅 {r} 流浪地球","state":"R"}},"#,
                i * 20 + r
            )
        })
        .collect();
    Message::tool(
        format!("call_{i:06}"),
        "moviepilot_api",
        format!(r#"{{"success":true,"items":[{rows}],"total":400}}"#).repeat(2),
        Outcome::Succeeded,
    )
}

#[divan::bench]
fn budget_estimate_200_messages(b: Bencher) {
    let system = system();
    let messages = conversation();
    let tools = specs();
    let limits = limits(TokenCounter::Estimate);
    let cache = TokenCache::new();
    b.bench(|| {
        let est = TokenCounter::Estimate.breakdown(
            std::iter::once(&system).chain(divan::black_box(&messages)),
            &tools,
            &cache,
        );
        mpa_model::request_budget(&est, &limits)
    });
}

/// The first request of a conversation with a real tokenizer: every message and schema counted.
#[divan::bench(args = [TokenCounter::O200kBase, TokenCounter::Cl100kBase])]
fn budget_tokenizer_200_messages_cold(b: Bencher, counter: TokenCounter) {
    counter.warm_up();
    let system = system();
    let messages = conversation();
    let tools = specs();
    let limits = limits(counter);
    b.with_inputs(TokenCache::new).bench_local_refs(|cache| {
        let est = counter.breakdown(
            std::iter::once(&system).chain(divan::black_box(&messages)),
            &tools,
            cache,
        );
        mpa_model::request_budget(&est, &limits)
    });
}

/// Every later request, as the turn loop counts it (`count_request`): the conversation and the
/// schemas are in the cache (hashed and looked up), the plan block appended to the last message
/// is counted apart (cached too while the plan is unchanged); `new` messages were added since the
/// last request — with `new = 2` what one tool round adds: the assistant's call and its ~2.3 KB
/// result.
#[divan::bench(args = [0, 2])]
fn budget_o200k_200_messages_next_call(b: Bencher, new: usize) {
    let counter = TokenCounter::O200kBase;
    let system = system();
    let base = conversation();
    let tools = specs();
    let limits = limits(counter);
    let cache = TokenCache::new();
    let block = "<current_task_plan>objective: find the target subscription; step 2 of 3: \
                 read the next page (in progress)</current_task_plan>";
    let count = |messages: &[Message], tail: &Tail| {
        let est = count_request(counter, &system, &[], (0, messages), tail, &tools, &cache);
        mpa_model::request_budget(&est, &limits)
    };
    count(&base, &Tail::new(&base, &[block]));
    let mut i = 1_000;
    b.with_inputs(|| {
        i += 1;
        let mut messages = base.clone();
        if new > 0 {
            messages.push(Message::assistant(
                "",
                vec![ToolCall {
                    id: format!("call_{i:06}"),
                    name: "moviepilot_api".into(),
                    arguments: format!(
                        r#"{{"operation_id":"subscription.list","query":{{"page":{i}}}}}"#
                    ),
                }],
            ));
            messages.push(result(i));
        }
        let tail = Tail::new(&messages, &[block]);
        (messages, tail)
    })
    .bench_local_refs(|(messages, tail)| count(divan::black_box(messages), tail));
}

#[divan::bench(args = [TokenCounter::Estimate, TokenCounter::O200kBase])]
fn compaction_decision_and_partition_200_messages(b: Bencher, counter: TokenCounter) {
    let messages = conversation();
    let limits = limits(counter);
    let cache = TokenCache::new();
    let est = counter.breakdown(&messages, &specs(), &cache);
    let budget = mpa_model::request_budget(&est, &limits);
    b.bench(|| {
        assert!(due(&budget, false));
        let costs = Costs::of(counter, &cache, divan::black_box(&messages), est.total());
        partition(&messages, &costs, 16_000, messages.len(), None).unwrap()
    });
}

#[divan::bench]
fn read_tool_result_page_of_900_kb(b: Bencher) {
    let text: String = (0..17_500)
        .map(|i| format!("第{i}条 订阅《流浪地球》 season={i} ok\n"))
        .collect();
    assert!(
        text.len() > 900_000 && text.len() < 1_048_576,
        "{}",
        text.len()
    );
    let total = text.chars().count();
    let actor = Actor {
        user_id: UserId("u".into()),
        user_name: "u".into(),
        is_admin: false,
    };
    let mut store = ResultStore::default();
    let id = store.put(&actor, "t", &text).unwrap();
    let mut offset = 0usize;
    b.bench_local(|| {
        offset = (offset + 77_777) % total;
        store.page(&actor, &id, offset, 4000).unwrap().content.len()
    });
}
