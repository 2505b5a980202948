//! Read-only subagents (issue 30; spec runtime.md §8, §5.6): the policy table a child's calls
//! meet, children as nested loops of a real turn against the mock model and the fake
//! MoviePilot, limits, waiting, cancelling and the controller's lifecycle.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::{demo_world, linked, mock_model};
use crate::tool_moviepilot_api::minimal_args;
use async_trait::async_trait;
use mpa_core::Host;
use mpa_core::tools::policy::Origin;
use mpa_core::tools::{JsonTool, ToolContext, ToolMeta, ToolOutput, json_tool};
use mpa_eval::{FakeConfig, FakeHandle, FakeMoviePilot, Fault};
use mpa_protocol::{Actor, AgentOrigin, EffectClass, Event, Outcome, ToolSpec, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const SECRET: &str = "subagent-secret";

/// Runs `calls` (`[{tool, args}]`) one after the other through the one call path with origin
/// `subagent`, as a child's loop would, and answers their outputs.
struct AsChild;

#[async_trait]
impl JsonTool for AsChild {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "as_child".into(),
            description: "test probe".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, ctx: ToolContext, args: Value) -> ToolOutput {
        let mut outs = Vec::new();
        for c in args["calls"].as_array().unwrap() {
            let name = c["tool"].as_str().unwrap();
            let inv = ctx
                .agent
                .call_tool(&ctx, Origin::Subagent, name, c["args"].clone())
                .await
                .unwrap();
            outs.push(json!({"tool": name, "content": inv.output.content,
                "error": inv.output.error.as_deref()}));
        }
        ToolOutput::json(&json!({"outputs": outs}), Outcome::Succeeded)
    }
}

/// An external server's tool that claims to read.
struct ExternalRead;

#[async_trait]
impl JsonTool for ExternalRead {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ext_lookup".into(),
            description: "external lookup".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read().external()
    }
    async fn call(&self, _ctx: ToolContext, _args: Value) -> ToolOutput {
        ToolOutput::classified("looked up".into(), false)
    }
}

/// A read that holds until `target` calls are inside at once (or a deadline), counting the
/// most that ever were: children start it first thing.
struct Hold {
    inside: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    target: usize,
}

#[async_trait]
impl JsonTool for Hold {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "hold".into(),
            description: "waits for company".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, _ctx: ToolContext, args: Value) -> ToolOutput {
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        if args["forever"] == true {
            std::future::pending::<()>().await;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        // Once `target` were inside together, nobody waits any more.
        while self.most.load(Ordering::SeqCst) < self.target
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.inside.fetch_sub(1, Ordering::SeqCst);
        ToolOutput::classified(json!({"held": true}).to_string(), false)
    }
}

struct Env {
    _dir: tempfile::TempDir,
    host: Host,
    fake: FakeHandle,
    mock: MockModelServer,
    admin: Actor,
    most: Arc<AtomicUsize>,
}

async fn env_with(target: usize, grace: Option<Duration>, faults: Vec<Fault>) -> Env {
    env_gated(target, grace, faults, None).await
}

async fn env_gated(
    target: usize,
    grace: Option<Duration>,
    faults: Vec<Fault>,
    gate: Option<Arc<dyn mpa_core::tools::gate::Gate>>,
) -> Env {
    let fake = FakeMoviePilot::start(FakeConfig::new(SECRET), demo_world())
        .await
        .unwrap();
    fake.set_faults(faults);
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = mpa_core::AgentConfig::new(mock_model(&mock));
    if let Some(g) = grace {
        agent.subagent_cancel_grace = g;
    }
    let mut cfg = mpa_core::HostConfig::new(dir.path().join("data"), agent);
    cfg.moviepilot = Some(mpa_core::MoviePilotHostConfig {
        config: mpa_core::moviepilot::MoviePilotConfig {
            url: fake.url(),
            secret_key: Some(SECRET.into()),
            auth: mpa_core::moviepilot::AuthMode::Local,
        },
        identity: Some(linked(SECRET, &[("admin", ("1", "admin"))])),
        account_clock: None,
    });
    let (inside, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let hold = Hold {
        inside,
        most: Arc::clone(&most),
        target,
    };
    let host = Host::open_with(cfg, move |b| {
        let b = b
            .tool(json_tool(AsChild))
            .tool(json_tool(ExternalRead))
            .tool(json_tool(hold));
        match gate {
            Some(g) => b.gate(g),
            None => b,
        }
    })
    .await
    .unwrap();
    let admin = host.local_actor("admin", true).await.unwrap();
    Env {
        _dir: dir,
        host,
        fake,
        mock,
        admin,
        most,
    }
}

async fn env() -> Env {
    env_with(1, None, Vec::new()).await
}

struct Turn {
    status: TurnStatus,
    final_text: String,
    events: Vec<Event>,
}

impl Env {
    async fn turn(&self, session: &str, text: &str) -> Turn {
        let mut rx = self
            .host
            .agent()
            .submit(&self.admin, session, "web", text.into(), vec![])
            .await
            .unwrap();
        let mut events = Vec::new();
        while let Some(ev) = rx.recv().await {
            if let Event::TurnEnded {
                status, final_text, ..
            } = ev
            {
                return Turn {
                    status,
                    final_text,
                    events,
                };
            }
            events.push(ev);
        }
        panic!("no TurnEnded")
    }

    async fn as_child(&self, calls: Value) -> Vec<Value> {
        let (out, _) = self
            .host
            .agent()
            .run_tool(&self.admin, "s1", "as_child", json!({"calls": calls}))
            .await
            .unwrap();
        let v: Value = serde_json::from_str(&out.content).unwrap();
        v["outputs"].as_array().unwrap().clone()
    }

    fn requests(&self) -> usize {
        self.fake.ledger().len()
    }
}

fn error_of(out: &Value) -> Option<String> {
    out["error"].as_str().map(str::to_string)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_may_call_exactly_what_the_read_only_policy_table_allows() {
    let e = env().await;
    // Every MoviePilot operation of the catalogue, as an administrator's child: exactly the
    // safe reads reach the fake; everything else is refused before anything is sent.
    let mut by_effect = std::collections::BTreeMap::<&str, (usize, usize)>::new();
    for op in mpa_gateway::catalogue().operations() {
        let (args, _) = minimal_args(op);
        let before = e.requests();
        let out = &e
            .as_child(json!([{"tool": "moviepilot_api", "args": args}]))
            .await[0];
        let sent = e.requests() - before;
        let refused = error_of(out).as_deref() == Some("subagent_read_only");
        let counts = by_effect.entry(op.effect.as_str()).or_default();
        if op.effect == EffectClass::SafeRead {
            assert!(!refused, "{}: {out}", op.id);
            assert_eq!(sent, 1, "{}", op.id);
            counts.0 += 1;
        } else {
            assert!(refused, "{} ({}): {out}", op.id, op.effect);
            assert_eq!(sent, 0, "{}", op.id);
            let msg: Value = serde_json::from_str(out["content"].as_str().unwrap()).unwrap();
            assert!(
                msg["message"].as_str().unwrap().contains("main agent"),
                "{msg}"
            );
            counts.1 += 1;
        }
    }
    // The catalogue has safe reads and several kinds of non-safe operations; each was seen.
    assert!(by_effect["safe_read"].0 > 0);
    for effect in [
        "reversible_write",
        "destructive_write",
        "external_side_effect",
    ] {
        assert!(
            by_effect.get(effect).is_some_and(|c| c.1 > 0),
            "{by_effect:?}"
        );
    }

    // download.add as an administrator's child: denied, nothing reached the fake.
    let before = e.requests();
    let out = &e
        .as_child(json!([{"tool": "moviepilot_api", "args": {"operation_id": "download.add",
            "body": {"torrent_url": "magnet:?xt=urn:btih:abcdefabcdefabcdefabcdefabcdefabcdefabcd"}}}]))
        .await[0];
    assert_eq!(
        error_of(out).as_deref(),
        Some("subagent_read_only"),
        "{out}"
    );
    assert_eq!(e.requests(), before);

    // A safe read whose arguments fail the contract: told how to retry.
    let out = &e
        .as_child(
            json!([{"tool": "moviepilot_api", "args": {"operation_id": "subscription.list",
            "query": {"no_such_field": 1}}}]),
        )
        .await[0];
    let v: Value = serde_json::from_str(out["content"].as_str().unwrap()).unwrap();
    assert_eq!(v["error"], "subagent_read_only");
    assert_eq!(v["operation_id"], "subscription.list");
    assert_eq!(v["input_contract"]["operation_id"], "subscription.list");
    assert_eq!(e.requests(), before);

    // A safe read asking for secret values.
    let safe_with_secrets = mpa_gateway::catalogue()
        .operations()
        .iter()
        .find(|op| op.effect == EffectClass::SafeRead && op.query_field("show_secrets").is_some());
    if let Some(op) = safe_with_secrets {
        let (mut args, _) = minimal_args(op);
        args["query"]["show_secrets"] = json!(true);
        let out = &e
            .as_child(json!([{"tool": "moviepilot_api", "args": args}]))
            .await[0];
        assert_eq!(
            error_of(out).as_deref(),
            Some("subagent_read_only"),
            "{out}"
        );
        assert_eq!(e.requests(), before);
    }

    // Tools and actions.
    let rows: Vec<(Value, Option<&str>)> = vec![
        (
            json!({"tool": "execute_command", "args": {"action": "run", "command": "echo hi"}}),
            Some("subagent_read_only"),
        ),
        (
            json!({"tool": "execute_command", "args": {"action": "start", "command": "echo hi"}}),
            Some("subagent_read_only"),
        ),
        (
            json!({"tool": "execute_command", "args": {"action": "write", "session_id": "term_x",
            "input_text": "x"}}),
            Some("terminal_access_denied"),
        ),
        (
            json!({"tool": "execute_command", "args": {"action": "kill", "session_id": "term_x"}}),
            Some("terminal_access_denied"),
        ),
        // Allowed by the policy; the child's own scope holds no such session.
        (
            json!({"tool": "execute_command", "args": {"action": "read", "session_id": "term_x"}}),
            Some("terminal_access_denied"),
        ),
        (
            json!({"tool": "execute_command", "args": {"action": "wait", "session_id": "term_x"}}),
            Some("terminal_access_denied"),
        ),
        (
            json!({"tool": "memory", "args": {"action": "add", "target": "memory",
            "content": "x"}}),
            Some("subagent_read_only"),
        ),
        (
            json!({"tool": "skill_manage", "args": {"ops": []}}),
            Some("subagent_read_only"),
        ),
        (json!({"tool": "skills_list", "args": {}}), None),
        (
            json!({"tool": "ext_lookup", "args": {}}),
            Some("subagent_read_only"),
        ),
        (
            json!({"tool": "task", "args": {"description": "nest"}}),
            Some("subagent_read_only"),
        ),
        (
            json!({"tool": "subagent_task", "args": {"action": "status"}}),
            Some("subagent_read_only"),
        ),
    ];
    for (row, want) in rows {
        let out = &e.as_child(json!([row.clone()])).await[0];
        let content: Value =
            serde_json::from_str(out["content"].as_str().unwrap()).unwrap_or(Value::Null);
        let got = error_of(out).or_else(|| content["code"].as_str().map(str::to_string));
        match want {
            Some(code) => assert_eq!(got.as_deref(), Some(code), "{row}: {out}"),
            None => assert_ne!(got.as_deref(), Some("subagent_read_only"), "{row}: {out}"),
        }
    }
}

/// What a scripted model sees of one request.
struct Req<'a>(&'a Value);

impl Req<'_> {
    fn messages(&self) -> &Vec<Value> {
        self.0["messages"].as_array().unwrap()
    }
    /// A child's request (its own system prompt).
    fn is_child(&self) -> bool {
        self.messages()[0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("You are a read-only subagent"))
    }
    /// The first user message (a child's task).
    fn task(&self) -> String {
        self.messages()
            .iter()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string()
    }
    /// Model answers so far since the last user message (this turn's steps).
    fn step(&self) -> usize {
        self.messages()
            .iter()
            .rev()
            .take_while(|m| m["role"] != "user")
            .filter(|m| m["role"] == "assistant")
            .count()
    }
    fn last_user(&self) -> String {
        mpa_test_support::last_user_text(self.0)
    }
    fn result(&self, call_id: &str) -> Value {
        let m = self
            .messages()
            .iter()
            .find(|m| m["tool_call_id"] == call_id)
            .unwrap_or_else(|| panic!("no result for {call_id}"));
        serde_json::from_str(m["content"].as_str().unwrap()).unwrap_or(Value::Null)
    }
    fn to_string_contains(&self, needle: &str) -> bool {
        self.0.to_string().contains(needle)
    }
    fn tools(&self) -> Vec<String> {
        self.0["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_parents_child_cannot_add_a_download_and_cannot_nest() {
    let e = env().await;
    e.mock.set_responder(|req| {
        let r = Req(req);
        match (r.is_child(), r.step()) {
            (false, 0) => MockReply::tool_calls(&[(
                "t1",
                "task",
                json!({"description": "Add the torrent magnet:?xt=urn:btih:abcdefabcdefabcdefabcdefabcdefabcdefabcd and list subscriptions"}),
            )]),
            (true, 0) => MockReply::tool_calls(&[
                ("c1", "moviepilot_api", json!({"operation_id": "download.add",
                    "body": {"torrent_url": "magnet:?xt=urn:btih:abcdefabcdefabcdefabcdefabcdefabcdefabcd"}})),
                ("c2", "moviepilot_api", json!({"operation_id": "subscription.list"})),
                ("c3", "task", json!({"description": "nested"})),
            ]),
            (true, _) => {
                let add = r.result("c1");
                let nest = r.result("c3");
                MockReply::text(&format!(
                    "download: {}; nesting: {}; subscriptions read: {}",
                    add["error"].as_str().unwrap_or("?"),
                    nest["error"].as_str().unwrap_or("?"),
                    r.result("c2")["success"]
                ))
            }
            (false, _) => {
                let t = r.result("t1");
                MockReply::text(&format!("report: {}", t["result"].as_str().unwrap_or("none")))
            }
        }
    });
    let turn = e.turn("s-admin", "add that torrent via a helper").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(
        turn.final_text,
        "report: download: subagent_read_only; nesting: subagent_read_only; subscriptions read: true"
    );
    // Nothing but the read reached MoviePilot, marked as the subagent's by the host.
    let ledger = e.fake.ledger();
    assert!(
        ledger
            .iter()
            .all(|a| a.operation_id.as_deref() != Some("download.add"))
    );
    let read = ledger
        .iter()
        .find(|a| a.operation_id.as_deref() == Some("subscription.list"))
        .unwrap();
    assert_eq!(read.agent.source.as_deref(), Some("subagent"));
    // The child was never offered the subagent tools, nor any write.
    let reqs = e.mock.requests();
    let child = reqs.iter().find(|r| Req(r).is_child()).unwrap();
    let tools = Req(child).tools();
    assert!(tools.contains(&"moviepilot_api".to_string()), "{tools:?}");
    assert!(tools.contains(&"skills_list".to_string()), "{tools:?}");
    for absent in [
        "task",
        "subagent_task",
        "memory",
        "skill_manage",
        "ext_lookup",
    ] {
        assert!(!tools.contains(&absent.to_string()), "{absent}: {tools:?}");
    }
    // Its events reached the stream tagged, never bare.
    assert!(turn.events.iter().any(|ev| matches!(ev,
        Event::Nested { origin: AgentOrigin::Subagent, event, .. }
            if matches!(&**event, Event::ToolStarted { name, .. } if name == "moviepilot_api"))));
    assert!(
        !turn
            .events
            .iter()
            .any(|ev| matches!(ev, Event::ToolStarted { name, .. } if name == "moviepilot_api"))
    );
    // Its transcript is evidence of its own, kept out of discovery by default.
    let db = e
        .host
        .data_dir()
        .join("agent/runtime/history/users")
        .join(mpa_redact::UserKey::for_user(&e.admin.user_id).as_str())
        .join("state.db");
    let conn = rusqlite::Connection::open(db).unwrap();
    let (id, parent, count): (String, String, i64) = conn
        .query_row(
            "SELECT id, parent_session_id, message_count FROM sessions WHERE source = 'subagent'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert!(id.starts_with("subagent-general-purpose-subagent-"), "{id}");
    assert_eq!(parent, "s-admin");
    // Its task, its calls, their three results and its answer.
    assert_eq!(count, 6);
}

/// The task ids of a `subagent_task` answer.
fn task_ids(v: &Value) -> Vec<String> {
    v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_children_run_at_most_four_at_once_and_the_parent_cites_their_results() {
    // Each child holds until four are inside at once: with six children, the fifth and sixth
    // can only run once a place is free, so the most ever inside is exactly four.
    let e = env_with(4, None, Vec::new()).await;
    let topics = ["subs", "downloads", "sites", "paths", "users", "plugins"];
    e.mock.set_responder(move |req| {
        let r = Req(req);
        if r.is_child() {
            let topic = r.task();
            return match r.step() {
                0 => MockReply::tool_calls(&[("h1", "hold", json!({}))]),
                _ => MockReply::text(&format!("{topic}: all fine")),
            };
        }
        match r.step() {
            0 => MockReply::tool_calls(&[(
                "s1",
                "subagent_task",
                json!({"action": "start", "tasks": topics.iter()
                    .map(|t| json!({"description": t})).collect::<Vec<_>>()}),
            )]),
            1 => MockReply::tool_calls(&[(
                "w1",
                "subagent_task",
                json!({"action": "wait", "task_ids": task_ids(&r.result("s1")),
                    "timeout_ms": 300000}),
            )]),
            _ => {
                let waited = r.result("w1");
                let results: Vec<String> = waited["tasks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| {
                        format!(
                            "{}={}",
                            t["status"].as_str().unwrap(),
                            t["result"].as_str().unwrap_or("-")
                        )
                    })
                    .collect();
                MockReply::text(&format!("combined: {}", results.join("; ")))
            }
        }
    });
    let turn = e.turn("s-par", "check everything").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    let expected: Vec<String> = topics
        .iter()
        .map(|t| format!("completed={t}: all fine"))
        .collect();
    assert_eq!(
        turn.final_text,
        format!("combined: {}", expected.join("; "))
    );
    assert_eq!(e.most.load(Ordering::SeqCst), 4);
    // The user's stream shows one line per controller call, the children's own events tagged.
    let lines: Vec<&str> = turn
        .events
        .iter()
        .filter_map(|ev| match ev {
            Event::ToolFinished { name, message, .. } if name == "subagent_task" => {
                Some(message.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(lines[1], "called 6 subagents (6 completed)", "{lines:?}");
    let nested_agents: std::collections::BTreeSet<&str> = turn
        .events
        .iter()
        .filter_map(|ev| match ev {
            Event::Nested { agent_id, .. } => Some(agent_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(nested_agents.len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wait_any_returns_on_the_first_and_the_turn_end_cancels_the_rest() {
    let e = env().await;
    e.mock.set_responder(|req| {
        let r = Req(req);
        if r.is_child() {
            let slow = r.task().contains("slow");
            return match r.step() {
                0 if slow => MockReply::tool_calls(&[("h1", "hold", json!({"forever": true}))]),
                _ => MockReply::text("quick answer"),
            };
        }
        if r.last_user().contains("again") {
            return match r.step() {
                0 => MockReply::tool_calls(&[(
                    "r1",
                    "subagent_task",
                    json!({"action": "run", "description": "quick again"}),
                )]),
                _ => MockReply::text(&format!(
                    "second turn: {}",
                    r.result("r1")["tasks"][0]["result"].as_str().unwrap_or("-")
                )),
            };
        }
        match r.step() {
            0 => MockReply::tool_calls(&[(
                "s1",
                "subagent_task",
                json!({"tasks": [{"description": "slow check"}, {"description": "quick check"}]}),
            )]),
            1 => MockReply::tool_calls(&[(
                "w1",
                "subagent_task",
                json!({"action": "wait", "wait_mode": "any", "timeout_ms": 300000}),
            )]),
            _ => {
                let w = r.result("w1");
                let statuses: Vec<&str> = w["tasks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["status"].as_str().unwrap())
                    .collect();
                MockReply::text(&format!("{} {}", w["wait_mode"], statuses.join(",")))
            }
        }
    });
    let turn = e.turn("s-any", "two checks").await;
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(turn.final_text, "\"any\" running,completed");
    // The turn's end cancelled the slow child within the grace period: the controller takes
    // new work on the next turn.
    let next = e.turn("s-any", "again please").await;
    assert_eq!(next.final_text, "second turn: quick answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelling_a_child_blocked_in_a_stalled_read_ends_it_within_grace() {
    // MoviePilot stalls the list for calls the host marks as a subagent's.
    let stall: Fault = serde_json::from_value(json!({
        "operation": "subscription.list",
        "when": {"headers": {"x-moviepilot-agent-source": "subagent"}},
        "action": {"kind": "stall"}
    }))
    .unwrap();
    let e = env_with(1, None, vec![stall]).await;
    let stalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = Arc::clone(&stalled);
    e.mock.set_responder(move |req| {
        let r = Req(req);
        if r.is_child() {
            return match r.step() {
                0 if r.task().contains("sweep") => MockReply::tool_calls(&[(
                    "c1",
                    "moviepilot_api",
                    json!({"operation_id": "subscription.list"}),
                )]),
                _ => MockReply::text("nothing stuck"),
            };
        }
        if r.last_user().contains("again") {
            return match r.step() {
                0 => MockReply::tool_calls(&[(
                    "r1",
                    "subagent_task",
                    json!({"action": "run", "description": "quick look"}),
                )]),
                _ => MockReply::text(&format!(
                    "again: {}",
                    r.result("r1")["tasks"][0]["status"].as_str().unwrap()
                )),
            };
        }
        let last = r.messages().last().unwrap();
        let last_id = last["tool_call_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match (r.step(), last_id.as_str()) {
            (0, _) => MockReply::tool_calls(&[(
                "s1",
                "subagent_task",
                json!({"action": "start", "description": "sweep the subscriptions"}),
            )]),
            (_, "x1") => {
                let c = r.result("x1");
                MockReply::text(&format!(
                    "cancel: {} pending={}",
                    c["tasks"][0]["status"].as_str().unwrap(),
                    c.get("cancel_pending_task_ids").is_some()
                ))
            }
            // Polls until the child's read is inside MoviePilot, then cancels it.
            (_, _) if seen.load(Ordering::SeqCst) => MockReply::tool_calls(&[(
                "x1",
                "subagent_task",
                json!({"action": "cancel", "task_id": task_ids(&r.result("s1"))[0]}),
            )]),
            (n, _) => MockReply::tool_calls(&[(
                &format!("p{n}"),
                "subagent_task",
                json!({"action": "wait", "timeout_ms": 20}),
            )]),
        }
    });
    let poll = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::time::Instant::now() < deadline {
            let inside = e.fake.ledger().iter().any(|a| {
                a.operation_id.as_deref() == Some("subscription.list")
                    && a.agent.source.as_deref() == Some("subagent")
            });
            if inside {
                stalled.store(true, Ordering::SeqCst);
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let (turn, ()) = tokio::join!(e.turn("s-cancel", "sweep via a helper"), poll);
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(turn.final_text, "cancel: cancelled pending=false");
    // The child's read in flight ended honestly: its result is unknown, not a success.
    let interrupted = turn.events.iter().any(|ev| match ev {
        Event::Nested { event, .. } => matches!(&**event,
            Event::ToolFinished { name, outcome: Outcome::Unknown, .. } if name == "moviepilot_api"),
        _ => false,
    });
    assert!(interrupted, "{:?}", turn.events);
    // The controller converged: the next turn starts a child again.
    let next = e.turn("s-cancel", "again").await;
    assert_eq!(next.final_text, "again: completed");
}

/// Holds a subagent's `hold {stubborn:true}` call inside the gate chain, on its thread, until
/// released: a child that cannot notice its cancellation.
struct Stubborn {
    inside: Arc<std::sync::atomic::AtomicBool>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl mpa_core::tools::gate::Gate for Stubborn {
    fn name(&self) -> &'static str {
        "stubborn"
    }
    fn check(&self, call: &mpa_core::tools::gate::CallFacts<'_>) -> mpa_core::tools::gate::Verdict {
        if call.origin == Origin::Subagent && call.args.is_some_and(|a| a["stubborn"] == true) {
            self.inside.store(true, Ordering::SeqCst);
            let _ = self
                .release
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(60));
        }
        mpa_core::tools::gate::Verdict::Allow
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_child_that_ignores_cancellation_seals_the_controller_until_it_ends() {
    let inside = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (release, rx) = std::sync::mpsc::channel();
    let gate = Stubborn {
        inside: Arc::clone(&inside),
        release: std::sync::Mutex::new(rx),
    };
    let e = env_gated(
        1,
        Some(Duration::from_millis(200)),
        Vec::new(),
        Some(Arc::new(gate)),
    )
    .await;
    let seen = Arc::clone(&inside);
    e.mock.set_responder(move |req| {
        let r = Req(req);
        if r.is_child() {
            return match r.step() {
                0 if r.task().contains("stubborn") => {
                    MockReply::tool_calls(&[("c1", "hold", json!({"stubborn": true}))])
                }
                _ => MockReply::text("child done"),
            };
        }
        let user = r.last_user();
        let step = r.step();
        if user.contains("second") {
            return match step {
                0 => MockReply::tool_calls(&[(
                    "s2",
                    "subagent_task",
                    json!({"description": "another look"}),
                )]),
                _ => MockReply::text(&format!(
                    "second: {} / {}",
                    r.result("s2")["error"].as_str().unwrap_or("started"),
                    r.result("s2")["message"].as_str().unwrap_or_default()
                )),
            };
        }
        if user.contains("third") {
            return match step {
                // Waits for the stuck child to end, then starts again.
                0 => MockReply::tool_calls(&[(
                    "w3",
                    "subagent_task",
                    json!({"action": "wait", "timeout_ms": 300000}),
                )]),
                1 => MockReply::tool_calls(&[(
                    "r3",
                    "subagent_task",
                    json!({"action": "run", "description": "another look"}),
                )]),
                _ => MockReply::text(&format!(
                    "third: {} then {}",
                    r.result("w3")["tasks"][0]["status"].as_str().unwrap(),
                    r.result("r3")["tasks"][0]["status"].as_str().unwrap()
                )),
            };
        }
        match step {
            0 => MockReply::tool_calls(&[(
                "s1",
                "subagent_task",
                json!({"description": "a stubborn check"}),
            )]),
            n if !seen.load(Ordering::SeqCst) => MockReply::tool_calls(&[(
                &format!("p{n}"),
                "subagent_task",
                json!({"action": "wait", "timeout_ms": 20}),
            )]),
            _ => MockReply::text("first turn over"),
        }
    });
    let first = e.turn("s-seal", "first").await;
    assert_eq!(first.final_text, "first turn over");
    // The turn's end could not stop the child: the controller is sealed and says why.
    let second = e.turn("s-seal", "second").await;
    assert!(
        second
            .final_text
            .starts_with("second: subagent_controller_sealed / the subagent controller is sealed"),
        "{}",
        second.final_text
    );
    // Once the child has ended, the controller takes tasks again.
    release.send(()).unwrap();
    let third = e.turn("s-seal", "third").await;
    assert_eq!(third.final_text, "third: cancelled then completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_child_reads_a_granted_terminal_and_nothing_more() {
    let e = env().await;
    let command = "printf 'MARK_READY\\n'; read x; printf 'MARK_DONE\\n'";
    e.mock.set_responder(move |req| {
        let r = Req(req);
        let sid = |r: &Req<'_>| {
            r.messages()
                .iter()
                .filter_map(|m| m["content"].as_str())
                .find_map(|c| {
                    let at = c.find("term_")?;
                    Some(
                        c[at..]
                            .chars()
                            .take_while(|ch| ch.is_ascii_alphanumeric() || *ch == '_' || *ch == '-')
                            .collect::<String>(),
                    )
                })
                .unwrap()
        };
        if r.is_child() {
            let s = sid(&r);
            if r.task().contains("marker") {
                return match r.step() {
                    0 => MockReply::tool_calls(&[
                        (
                            "c1",
                            "execute_command",
                            json!({"action": "wait", "session_id": s, "timeout_ms": 30000}),
                        ),
                        (
                            "c2",
                            "execute_command",
                            json!({"action": "write", "session_id": s, "input_text": "x\n"}),
                        ),
                        (
                            "c3",
                            "execute_command",
                            json!({"action": "kill", "session_id": s}),
                        ),
                    ]),
                    _ => MockReply::text(&format!(
                        "saw={} write={} kill={}",
                        r.result("c1").to_string().contains("MARK_READY"),
                        r.result("c2")["code"].as_str().unwrap_or("?"),
                        r.result("c3")["code"].as_str().unwrap_or("?"),
                    )),
                };
            }
            return match r.step() {
                0 => MockReply::tool_calls(&[(
                    "d1",
                    "execute_command",
                    json!({"action": "read", "session_id": s}),
                )]),
                _ => MockReply::text(&format!(
                    "unshared={}",
                    r.result("d1")["code"].as_str().unwrap_or("?")
                )),
            };
        }
        let step = r.step();
        if step == 0 {
            return MockReply::tool_calls(&[(
                "p0",
                "execute_command",
                json!({"action": "start", "command": command, "use_pty": false}),
            )]);
        }
        let s = r.result("p0")["session_id"].as_str().unwrap().to_string();
        match step {
            1 => MockReply::tool_calls(&[(
                "p1",
                "task",
                json!({"description": "read the marker of the shared terminal",
                    "terminal_sessions": [{"session_id": s, "actions": ["read", "wait"]}]}),
            )]),
            2 => MockReply::tool_calls(&[(
                "p2",
                "task",
                json!({"description": format!("read session {s} for me")}),
            )]),
            3 => MockReply::tool_calls(&[(
                "p3",
                "execute_command",
                json!({"action": "write", "session_id": s, "input_text": "go\n"}),
            )]),
            n => {
                let last = r.messages().last().unwrap();
                let prev: Value =
                    serde_json::from_str(last["content"].as_str().unwrap()).unwrap_or(Value::Null);
                if n > 4 && !prev["exit_code"].is_null() {
                    return MockReply::text(&format!(
                        "first: {}; second: {}; exit: {}; done: {}",
                        r.result("p1")["result"].as_str().unwrap_or("-"),
                        r.result("p2")["result"].as_str().unwrap_or("-"),
                        prev["exit_code"],
                        r.to_string_contains("MARK_DONE")
                    ));
                }
                MockReply::tool_calls(&[(
                    &format!("w{n}"),
                    "execute_command",
                    json!({"action": "wait", "session_id": s, "timeout_ms": 30000}),
                )])
            }
        }
    });
    let turn = e.turn("s-term", "share the terminal").await;
    assert_eq!(turn.status, TurnStatus::Completed, "{}", turn.final_text);
    assert_eq!(
        turn.final_text,
        "first: saw=true write=terminal_access_denied kill=terminal_access_denied; \
         second: unshared=terminal_access_denied; exit: 0; done: true"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pipeline_feeds_each_step_the_earlier_results_and_stops_at_a_failure() {
    let e = env().await;
    e.mock.set_responder(|req| {
        let r = Req(req);
        if r.is_child() {
            let task = r.task();
            if task.contains("step two") {
                // The earlier result arrives as private context before the task.
                let context = task.starts_with("<pipeline_context>")
                    && task.contains("[step 1 · subagent-")
                    && task.contains("found ids 7 and 9");
                return MockReply::text(&format!("used context: {context}"));
            }
            if task.contains("step three") {
                return MockReply::text("");
            }
            return MockReply::text("found ids 7 and 9");
        }
        match r.step() {
            0 => MockReply::tool_calls(&[(
                "p1",
                "subagent_task",
                json!({"action": "pipeline", "timeout_ms": 60000, "tasks": [
                    {"description": "step one: list"}, {"description": "step two: check"},
                    {"description": "step three: empty"}, {"description": "step four: never"}]}),
            )]),
            _ => {
                let p = r.result("p1");
                let tasks = p["tasks"].as_array().unwrap();
                MockReply::text(&format!(
                    "{} | {} | {} | {}",
                    p["success"],
                    tasks.len(),
                    tasks[1]["result"].as_str().unwrap_or("-"),
                    p["message"].as_str().unwrap_or("-")
                ))
            }
        }
    });
    let turn = e.turn("s-pipe", "pipeline").await;
    assert_eq!(
        turn.final_text,
        "false | 3 | used context: true | step 3 ended failed; the pipeline stopped"
    );
    // A pipeline needs a positive per-step timeout; nothing starts without one.
    let (out, _) = e
        .host
        .agent()
        .run_tool(
            &e.admin,
            "s-pipe2",
            "subagent_task",
            json!({"action": "pipeline", "timeout_ms": 0, "tasks": [{"description": "x"}]}),
        )
        .await
        .unwrap();
    let v: Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(v["error"], "invalid_arguments", "{v}");
    // Grants beside a batch are refused: they belong in each task entry.
    let (out, _) = e
        .host
        .agent()
        .run_tool(
            &e.admin,
            "s-pipe2",
            "subagent_task",
            json!({"tasks": [{"description": "x"}],
                "terminal_sessions": [{"session_id": "term_1"}]}),
        )
        .await
        .unwrap();
    let v: Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(v["error"], "invalid_arguments", "{v}");
}
