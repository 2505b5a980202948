//! The four ways to extend the host that `docs/DESIGN-NOTES.md` walks through, each as a small
//! test-only example compiled here (not shipped): a gate, an outbound contributor, a tool and a
//! capability.

#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::{TestHost, run_turn};
use async_trait::async_trait;
use mpa_core::capability::{Capability, Configure, Recall, SessionInfo, Setup};
use mpa_core::tools::gate::{CallFacts, Gate, Halt, Verdict};
use mpa_core::tools::{SessionState, ToolContext, ToolMeta, ToolOutput, ToolRegistry, TypedTool};
use mpa_core::turn::outbound::{Contributor, Outbound, StepView};
use mpa_protocol::{Actor, Event, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

fn tool_result(req: &Value, call_id: &str) -> Value {
    let m = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no result for {call_id}"));
    serde_json::from_str(m["content"].as_str().unwrap()).unwrap()
}

// (a) A gate: at most `max` calls of `test_echo` per turn; the next one is answered and the
// turn ends on purpose. Its count lives in the turn's slots, so every turn starts at zero.

#[derive(Default)]
struct EchoCount(usize);

struct EchoBudget {
    max: usize,
}

impl Gate for EchoBudget {
    fn name(&self) -> &'static str {
        "echo_budget"
    }

    fn check(&self, call: &CallFacts<'_>) -> Verdict {
        if call.tool != "test_echo" {
            return Verdict::Allow;
        }
        let n = call.turn.with(|c: &mut EchoCount| {
            c.0 += 1;
            c.0
        });
        if n <= self.max {
            return Verdict::Allow;
        }
        Verdict::Halt {
            output: ToolOutput::failure("echo_budget", "no more echoes this turn; not executed"),
            halt: Halt {
                code: "echo_budget".into(),
                message: format!("more than {} echoes in one turn", self.max),
                status: TurnStatus::Completed,
                reply: Some("I stopped echoing: this turn's budget is spent.".into()),
            },
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn how_to_add_a_gate() {
    let mock = MockModelServer::start().await;
    let host = TestHost::builder(&mock, "house-model-x")
        .extend(|b| b.gate(Arc::new(EchoBudget { max: 2 })))
        .build()
        .await;
    mock.push(MockReply::tool_calls(&[
        ("e1", "test_echo", json!({"text": "one"})),
        ("e2", "test_echo", json!({"text": "two"})),
    ]));
    mock.push(MockReply::tool_calls(&[(
        "e3",
        "test_echo",
        json!({"text": "three"}),
    )]));
    let turn = host.turn("gate", "echo three times").await;
    // The third echo was answered by the gate, and the turn ended with its halt.
    assert_eq!(turn.status, TurnStatus::Completed);
    let halt = turn.halt.expect("the gate's halt reaches TurnEnded");
    assert_eq!(halt.code, "echo_budget");
    assert_eq!(
        turn.final_text,
        "I stopped echoing: this turn's budget is spent."
    );
    assert_eq!(mock.requests().len(), 2, "no model call after the halt");
    let stored = host.messages("gate").await;
    let third = stored
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("e3"))
        .unwrap();
    let v: Value = serde_json::from_str(&third.text()).unwrap();
    assert_eq!(v["error"], "echo_budget");
    // A new turn starts with a fresh count.
    mock.push(MockReply::tool_calls(&[(
        "e4",
        "test_echo",
        json!({"text": "four"}),
    )]));
    mock.push(MockReply::text("ok"));
    let turn = host.turn("gate", "once more").await;
    assert!(turn.halt.is_none());
    assert_eq!(tool_result(&mock.requests()[3], "e4")["echo"], "four");
}

// (b) An outbound contributor: a block every model request carries at its end, never saved.

struct HouseRules;

impl Contributor for HouseRules {
    fn name(&self) -> &'static str {
        "house_rules"
    }

    fn contribute(&self, _view: &StepView<'_>, out: &mut Outbound) {
        out.blocks
            .push("<house_rules>Answer in one sentence.</house_rules>".into());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn how_to_add_a_contributor() {
    let mock = MockModelServer::start().await;
    let host = TestHost::builder(&mock, "house-model-x")
        .extend(|b| b.contributor(Arc::new(HouseRules)))
        .build()
        .await;
    mock.push(MockReply::text("Fine."));
    assert_eq!(
        host.turn("rules", "how are you").await.status,
        TurnStatus::Completed
    );
    let req = &mock.requests()[0];
    let last = req["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last["content"],
        "how are you\n\n<house_rules>Answer in one sentence.</house_rules>"
    );
    // Outbound only: the transcript keeps the user's words.
    assert_eq!(host.messages("rules").await[0].text(), "how are you");
}

// (c) A tool: an argument struct (its schema is generated), metadata for the gates, a handler.

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WordCountArgs {
    /// The text to count words in.
    text: String,
}

struct WordCount;

#[async_trait]
impl TypedTool for WordCount {
    type Args = WordCountArgs;
    const NAME: &'static str = "word_count";

    fn description(&self) -> String {
        "Counts the words of a text.".into()
    }

    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }

    async fn run(&self, _ctx: ToolContext, args: WordCountArgs) -> ToolOutput {
        ToolOutput::json(
            &json!({"success": true, "words": args.text.split_whitespace().count()}),
            mpa_protocol::Outcome::Succeeded,
        )
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn how_to_add_a_tool() {
    let mock = MockModelServer::start().await;
    let host = TestHost::builder(&mock, "house-model-x")
        .tool(mpa_core::tools::typed(WordCount))
        .build()
        .await;
    mock.push(MockReply::tool_calls(&[
        ("w1", "word_count", json!({"text": "a tale of two cities"})),
        ("w2", "word_count", json!({"txt": "typo"})),
    ]));
    mock.push(MockReply::text("five words"));
    assert_eq!(
        host.turn("tool", "count").await.status,
        TurnStatus::Completed
    );
    let reqs = mock.requests();
    let listed = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "word_count")
        .unwrap()
        .clone();
    assert_eq!(
        listed["function"]["parameters"]["required"],
        json!(["text"])
    );
    assert_eq!(tool_result(&reqs[1], "w1")["words"], 5);
    assert_eq!(tool_result(&reqs[1], "w2")["error"], "invalid_arguments");
}

// (d) A capability: it builds itself from the host's configuration (`Configure`), and has its
// tool, its prompt block, a per-session slot saved with the chat, and what it does when a
// session closes. In the product it is one line in `capability::standard`
// (`a.add::<Tallies>()?;`); a test registers it the same way after the standard ones with
// `AgentBuilder::configure::<Tallies>()`.

#[derive(Default)]
struct Tally(u64);

struct CountUp;

#[async_trait]
impl mpa_core::tools::JsonTool for CountUp {
    fn spec(&self) -> mpa_protocol::ToolSpec {
        mpa_protocol::ToolSpec {
            name: "count_up".into(),
            description: "Counts this conversation's tallies".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, ctx: ToolContext, _args: Value) -> ToolOutput {
        let n = ctx.session.with(|t: &mut Tally| {
            t.0 += 1;
            t.0
        });
        ToolOutput::json(
            &json!({"success": true, "count": n}),
            mpa_protocol::Outcome::Succeeded,
        )
    }
}

struct Tallies {
    /// From the host's configuration: where the capability would keep its files.
    home: std::path::PathBuf,
    /// Built on another capability, found by type.
    with_recall: bool,
    closed: AtomicUsize,
}

impl Configure for Tallies {
    fn configure(setup: &Setup<'_>) -> mpa_core::Result<Option<Self>> {
        Ok(setup.host.map(|cfg| Tallies {
            home: cfg.data_dir.join("tallies"),
            with_recall: setup.built.get::<Recall>().is_some(),
            closed: AtomicUsize::new(0),
        }))
    }
}

#[async_trait]
impl Capability for Tallies {
    fn name(&self) -> &'static str {
        "tallies"
    }

    fn tools(&self, tools: &mut ToolRegistry) {
        tools.register(mpa_core::tools::json_tool(CountUp));
    }

    fn prompt_blocks(&self, _actor: &Actor) -> Vec<String> {
        vec!["<tallies>Use count_up to count.</tallies>".into()]
    }

    fn open_session(&self, _s: SessionInfo<'_>, state: &SessionState, saved: Option<&Value>) {
        let n = saved.and_then(Value::as_u64).unwrap_or(0);
        state.put(Tally(n));
    }

    fn save(&self, state: &SessionState) -> Option<Value> {
        Some(json!(state.with(|t: &mut Tally| t.0)))
    }

    async fn close_session(&self, _s: SessionInfo<'_>, _state: &SessionState) {
        self.closed.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn how_to_add_a_capability() {
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let model = mpa_model::ModelConfig {
        base_url: mock.base_url.clone(),
        model: "house-model-x".into(),
        max_retries: 0,
        ..Default::default()
    };
    let cfg = mpa_core::HostConfig::new(dir.path().join("data"), mpa_core::AgentConfig::new(model));
    let host = mpa_core::Host::open_with(cfg, |b| b.configure::<Tallies>())
        .await
        .unwrap();
    let (agent, actor) = (host.agent(), host.local_actor("lin", false).await.unwrap());
    // Built from the host's configuration, after the standard capabilities, found by type.
    let tallies = agent.services().caps.get::<Tallies>().unwrap();
    assert_eq!(tallies.home, dir.path().join("data/tallies"));
    assert!(tallies.with_recall);

    mock.push(MockReply::tool_calls(&[("c1", "count_up", json!({}))]));
    mock.push(MockReply::text("one"));
    assert_eq!(
        run_turn(agent, &actor, "tally", "count").await.status,
        TurnStatus::Completed
    );
    let reqs = mock.requests();
    let system = reqs[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("<tallies>Use count_up to count.</tallies>"));
    assert_eq!(tool_result(&reqs[1], "c1")["count"], 1);
    let chat = agent.chat_for(&actor, "tally").await.unwrap();
    assert_eq!(chat.session_state["tallies"], 1);

    // Closing the session tells the capability; the slot comes back from the saved chat.
    agent.close_session("tally").await;
    assert_eq!(tallies.closed.load(Ordering::SeqCst), 1);
    mock.push(MockReply::tool_calls(&[("c2", "count_up", json!({}))]));
    mock.push(MockReply::text("two"));
    let turn = run_turn(agent, &actor, "tally", "again").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    assert!(!turn.events.iter().any(|e| matches!(e, Event::Error { .. })));
    assert_eq!(tool_result(&mock.requests()[3], "c2")["count"], 2);
}
