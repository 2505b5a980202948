//! The durable invocation ledger end to end (issue 14): real SQLite, the fake MoviePilot over real
//! HTTP, turns driven by the mock model server. Duplicate writes collapse to one request, a lost
//! receipt stays `unknown` and is answered from the record, a setting is verified by reading it
//! back, a changed call under the same id is refused, a ledger that cannot record refuses the
//! write, foreign receipts are indistinguishable from missing ones, and a turn's chat snapshot is
//! written after every step in its recovery form.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's panic is its failure report"
)]

use crate::common::host::{Gateway, demo_world, linked, open_host};
use mpa_core::Host;
use mpa_core::tools::moviepilot_api::READ_BACK_SOURCE;
use mpa_core::tools::{ToolContext, ToolMeta, ToolOutput, TypedTool};
use mpa_eval::{FakeConfig, FakeHandle, FakeMoviePilot, Fault};
use mpa_protocol::{Actor, EffectClass, Event, Message, Outcome, Role, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const SECRET: &str = "test-secret";
const MAGNET: &str = "magnet:?xt=urn:btih:0123456789abcdef0123456789abcdef01234567&dn=Three.Body";

struct Env {
    dir: tempfile::TempDir,
    host: Host,
    fake: FakeHandle,
    mock: MockModelServer,
    admin: Actor,
    alice: Actor,
    bob: Actor,
}

async fn env() -> Env {
    let fake = FakeMoviePilot::start(FakeConfig::new(SECRET), demo_world())
        .await
        .unwrap();
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let model = mpa_model::ModelConfig {
        base_url: mock.base_url.clone(),
        model: "gpt-4o".into(),
        ..Default::default()
    };
    let gateway = Gateway {
        url: fake.url(),
        secret: SECRET.into(),
        identity: Some(linked(
            SECRET,
            &[("admin", ("1", "admin")), ("alice", ("2", "alice"))],
        )),
    };
    let host = open_host(dir.path(), model, Some(gateway)).await;
    let admin = host.local_actor("admin", true).await.unwrap();
    let alice = host.local_actor("alice", false).await.unwrap();
    let bob = host.local_actor("bob", false).await.unwrap();
    Env {
        dir,
        host,
        fake,
        mock,
        admin,
        alice,
        bob,
    }
}

fn download_add() -> Value {
    json!({"operation_id": "download.add", "body": {
        "torrent_in": {"title": "Three Body S01", "enclosure": MAGNET},
        "media_source": "themoviedb", "media_id": "204541"}})
}

fn fault(v: Value) -> Fault {
    serde_json::from_value(v).unwrap()
}

impl Env {
    /// Runs one user turn to its end.
    async fn turn(&self, actor: &Actor, session: &str, text: &str) -> (TurnStatus, Vec<Event>) {
        let mut rx = self
            .host
            .agent()
            .submit(actor, session, "web", text.into(), vec![])
            .await
            .unwrap();
        let mut seen = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(ev) = rx.recv().await {
                if let Event::TurnEnded { status, .. } = ev {
                    return status;
                }
                seen.push(ev);
            }
            panic!("no TurnEnded")
        })
        .await
        .expect("the turn did not end");
        (ended, seen)
    }

    /// The tool messages of the saved chat, by call id.
    async fn tool_message(&self, actor: &Actor, session: &str, call_id: &str) -> Message {
        let chat = self.host.agent().chat_for(actor, session).await.unwrap();
        chat.agent_messages
            .into_iter()
            .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(call_id))
            .unwrap_or_else(|| panic!("no result for {call_id}"))
    }

    async fn tool(&self, actor: &Actor, session: &str, name: &str, args: Value) -> (Value, String) {
        let (out, _) = self
            .host
            .agent()
            .run_tool(actor, session, name, args)
            .await
            .unwrap();
        (serde_json::from_str(&out.content).unwrap(), out.content)
    }

    /// Requests the fake saw for one operation.
    fn sent(&self, operation: &str) -> usize {
        self.fake
            .ledger()
            .iter()
            .filter(|a| a.operation_id.as_deref() == Some(operation))
            .count()
    }

    fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.dir.path().join("data/agent.db")).unwrap()
    }
}

fn content(m: &Message) -> Value {
    serde_json::from_str(&m.text()).unwrap()
}

fn invocation_id(m: &Message) -> String {
    m.metadata["moviepilot_invocation_id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_identical_download_adds_in_one_response_send_one_post_and_share_the_invocation_id() {
    let e = env().await;
    e.mock.push(MockReply::tool_calls(&[
        ("call_a", "moviepilot_api", download_add()),
        ("call_b", "moviepilot_api", download_add()),
    ]));
    e.mock.push(MockReply::text("submitted"));
    let (status, _) = e.turn(&e.alice, "dup", "download Three Body S01").await;
    // The one POST succeeded; the duplicate answered while it ran ("still running; not
    // confirmed") says nothing of the write, so it makes the turn neither unknown nor waiting.
    assert_eq!(status, TurnStatus::Completed);
    assert_eq!(e.sent("download.add"), 1, "the fake saw exactly one POST");
    let a = e.tool_message(&e.alice, "dup", "call_a").await;
    let b = e.tool_message(&e.alice, "dup", "call_b").await;
    assert_eq!(invocation_id(&a), invocation_id(&b), "one identity");
    let (ran, answered) = if content(&a).get("replayed").is_some() {
        (content(&b), content(&a))
    } else {
        (content(&a), content(&b))
    };
    assert_eq!(ran["_tool_execution"]["invocation_id"], invocation_id(&a));
    assert_eq!(ran["_tool_execution"]["outcome"], "succeeded", "{ran}");
    assert_eq!(answered["replayed"], true, "{answered}");
    assert_eq!(answered["invocation_id"], invocation_id(&a));
    let msg = answered["message"].as_str().unwrap();
    assert!(
        msg.starts_with("existing execution record:") && msg.contains("not re-executed"),
        "{msg}"
    );

    // A new explicit request runs the write again (the fake answers it as a duplicate, as
    // MoviePilot would), under a new identity.
    e.mock.push(MockReply::tool_calls(&[(
        "call_c",
        "moviepilot_api",
        download_add(),
    )]));
    e.mock.push(MockReply::text("asked again"));
    e.turn(&e.alice, "dup", "download it again").await;
    assert_eq!(e.sent("download.add"), 2, "a later request executes again");
    let last = e.fake.ledger().into_iter().last().unwrap();
    assert!(last.duplicate_attempt, "the fake deduplicated it");
    let c = e.tool_message(&e.alice, "dup", "call_c").await;
    assert_ne!(invocation_id(&c), invocation_id(&a));
    assert!(content(&c).get("replayed").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_receipt_is_unknown_and_the_retry_in_the_same_request_is_answered_from_the_record() {
    let e = env().await;
    e.fake.add_fault(fault(
        json!({"operation": "download.add", "action": {"kind": "drop"}}),
    ));
    e.mock.push(MockReply::tool_calls(&[(
        "call_1",
        "moviepilot_api",
        download_add(),
    )]));
    e.mock.push(MockReply::tool_calls(&[(
        "call_2",
        "moviepilot_api",
        download_add(),
    )]));
    e.mock.push(MockReply::text(
        "the download may or may not have been added",
    ));
    e.turn(&e.alice, "lost", "download Three Body S01").await;
    assert_eq!(e.sent("download.add"), 1, "the retry was not sent");
    let first = e.tool_message(&e.alice, "lost", "call_1").await;
    assert_eq!(first.outcome, Some(Outcome::Unknown));
    assert_eq!(content(&first)["_tool_execution"]["outcome"], "unknown");
    let retry = e.tool_message(&e.alice, "lost", "call_2").await;
    assert_eq!(retry.outcome, Some(Outcome::Unknown));
    let r = content(&retry);
    assert_eq!(r["execution_outcome"], "unknown");
    assert_eq!(r["replayed"], true);
    assert_eq!(r["invocation_id"], invocation_id(&first));

    let (found, _) = e
        .tool(
            &e.alice,
            "lost",
            "get_tool_execution",
            json!({"invocation_id": invocation_id(&first)}),
        )
        .await;
    assert_eq!(found["success"], true);
    assert_eq!(found["execution_status"], "unknown");
    assert_eq!(found["tool_name"], "moviepilot_api");

    // Unresolved, it is never executed again — not even by a later request in the session.
    e.mock.push(MockReply::tool_calls(&[(
        "call_3",
        "moviepilot_api",
        download_add(),
    )]));
    e.mock.push(MockReply::text("checked"));
    e.turn(&e.alice, "lost", "try again").await;
    assert_eq!(e.sent("download.add"), 1);
    assert_eq!(
        content(&e.tool_message(&e.alice, "lost", "call_3").await)["replayed"],
        true
    );
}

fn setting_update(body: Value) -> Value {
    json!({"operation_id": "config.system.update", "body": body})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_setting_receipt_is_read_back_and_only_an_exact_match_becomes_succeeded() {
    let e = env().await;
    // The write lands, its reply is lost: the read-back sees the value → succeeded, reconciled.
    e.fake
        .add_fault(fault(json!({"operation": "config.system.update",
        "action": {"kind": "drop"}, "nth": 1})));
    let (v, _) = e
        .tool(
            &e.admin,
            "cfg",
            "moviepilot_api",
            setting_update(json!({"setting_key": "SUBSCRIBE_SEARCH", "value": false})),
        )
        .await;
    assert_eq!(v["execution_outcome"], "succeeded", "{v}");
    assert_eq!(v["reconciled"], true);
    assert_eq!(e.sent("config.system.get"), 1, "verified by one read");
    let read = e
        .fake
        .ledger()
        .into_iter()
        .find(|a| a.operation_id.as_deref() == Some("config.system.get"))
        .unwrap();
    assert_eq!(
        read.agent.source.as_deref(),
        Some(READ_BACK_SOURCE),
        "the host's own read is told apart from the model's"
    );
    let (rec, _) = e
        .tool(
            &e.admin,
            "cfg",
            "get_tool_execution",
            json!({"invocation_id": v["invocation_id"]}),
        )
        .await;
    assert_eq!(rec["execution_status"], "succeeded");
    assert_eq!(e.fake.snapshot().settings["SUBSCRIBE_SEARCH"], json!(false));

    // The connection drops before MoviePilot applied it: the read shows the old value → unknown.
    e.fake
        .add_fault(fault(json!({"operation": "config.system.update",
        "action": {"kind": "drop", "after_effect": false}, "nth": 1})));
    let (v, _) = e
        .tool(
            &e.admin,
            "cfg",
            "moviepilot_api",
            setting_update(json!({"setting_key": "SUBSCRIBE_SEARCH", "value": true})),
        )
        .await;
    assert_eq!(v["execution_outcome"], "unknown", "{v}");
    assert!(v.get("reconciled").is_none());
    assert_eq!(v["_tool_execution"]["outcome"], "unknown");
    assert_eq!(e.sent("config.system.get"), 2, "read, not confirmed");
    assert_eq!(e.fake.snapshot().settings["SUBSCRIBE_SEARCH"], json!(false));

    // A sensitive key, a merge and a list upsert are never verified by a read: unknown.
    let gets = e.sent("config.system.get");
    for body in [
        json!({"setting_key": "TMDB_API_KEY", "value": "new-key-value"}),
        json!({"setting_key": "AgentNotes", "operation": "merge_dict", "value": {"a": 1}}),
        json!({"setting_key": "MediaServers", "operation": "upsert_list_item",
               "value": {"name": "Jellyfin", "type": "jellyfin", "enabled": false}}),
    ] {
        e.fake
            .add_fault(fault(json!({"operation": "config.system.update",
            "action": {"kind": "drop"}, "nth": 1})));
        let (v, _) = e
            .tool(
                &e.admin,
                "cfg",
                "moviepilot_api",
                setting_update(body.clone()),
            )
            .await;
        assert_eq!(v["execution_outcome"], "unknown", "{body}: {v}");
        assert!(v.get("reconciled").is_none(), "{body}: {v}");
        let (rec, _) = e
            .tool(
                &e.admin,
                "cfg",
                "get_tool_execution",
                json!({"invocation_id": v["_tool_execution"]["invocation_id"]}),
            )
            .await;
        assert_eq!(rec["execution_status"], "unknown", "{body}");
    }
    assert_eq!(e.sent("config.system.get"), gets, "no read-back for these");
}

/// A write tool identified by its call id (like an external MCP tool): records every run.
struct Notes(Arc<std::sync::Mutex<Vec<String>>>);

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoteArgs {
    text: String,
}

#[async_trait::async_trait]
impl TypedTool for Notes {
    type Args = NoteArgs;
    const NAME: &'static str = "note_write";
    fn description(&self) -> String {
        "Writes a note to an external notebook.".into()
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::new(EffectClass::ExternalSideEffect)
    }
    async fn run(&self, _ctx: ToolContext, args: NoteArgs) -> ToolOutput {
        self.0.lock().unwrap().push(args.text);
        ToolOutput::json(&json!({"success": true}), Outcome::Succeeded)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_call_id_with_changed_arguments_is_failed_and_not_executed() {
    let mock = MockModelServer::start().await;
    let notes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let h = crate::common::host::TestHost::builder(&mock, "gpt-4o")
        .model(|m| m.max_retries = mpa_model::ModelConfig::default().max_retries)
        .user("kim")
        .diagnostic_tools(false)
        .tool(mpa_core::tools::typed(Notes(Arc::clone(&notes))))
        // One call at a time, so which of two clashing calls comes first is fixed.
        .config(|c| c.max_parallel_tools = 1)
        .build()
        .await;
    let (agent, kim) = (h.agent.clone(), h.actor.clone());
    let turn = |text: &'static str| {
        let (agent, kim) = (agent.clone(), kim.clone());
        async move {
            let mut rx = agent
                .submit(&kim, "notes", "cli", text.into(), vec![])
                .await
                .unwrap();
            while let Some(ev) = rx.recv().await {
                if matches!(ev, Event::TurnEnded { .. }) {
                    break;
                }
            }
            let chat = agent.chat_for(&kim, "notes").await.unwrap();
            chat.agent_messages
                .into_iter()
                .filter(|m| m.role == Role::Tool)
                .map(|m| content(&m))
                .collect::<Vec<Value>>()
        }
    };
    mock.push(MockReply::tool_calls(&[
        ("call_w", "note_write", json!({"text": "first"})),
        ("call_w", "note_write", json!({"text": "changed"})),
        ("call_same", "note_write", json!({"text": "twice"})),
        ("call_same", "note_write", json!({"text": "twice"})),
    ]));
    mock.push(MockReply::text("noted"));
    let results = turn("write the notes").await;
    assert_eq!(results.len(), 4, "{results:#?}");
    assert_eq!(results[0]["_tool_execution"]["outcome"], "succeeded");
    assert_eq!(results[1]["execution_outcome"], "failed");
    assert_eq!(results[1]["error"], "invocation_conflict");
    assert_eq!(
        results[1]["message"],
        "same call id with changed tool or arguments; not executed"
    );
    // The same call twice: run once, the other answered from the record.
    let replayed = results[2..]
        .iter()
        .filter(|r| r["replayed"] == true)
        .count();
    assert_eq!(replayed, 1, "{results:#?}");
    assert_eq!(*notes.lock().unwrap(), ["first", "twice"]);

    // Local model servers number calls per response: the same id in a later request is a new
    // call, and runs.
    mock.push(MockReply::tool_calls(&[(
        "call_w",
        "note_write",
        json!({"text": "next request"}),
    )]));
    mock.push(MockReply::text("noted too"));
    let results = turn("one more").await;
    assert_eq!(results[4]["_tool_execution"]["outcome"], "succeeded");
    assert_eq!(*notes.lock().unwrap(), ["first", "twice", "next request"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_ledger_that_cannot_record_the_write_refuses_to_run_it() {
    let e = env().await;
    // Another process holds the database's write lock past the busy timeout.
    let db = e.db();
    db.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let (v, _) = e
        .tool(&e.alice, "nodb", "moviepilot_api", download_add())
        .await;
    assert_eq!(v["execution_outcome"], "failed", "{v}");
    assert_eq!(v["error"], "ledger_unavailable");
    assert_eq!(
        v["message"],
        "cannot durably record this write; tool not executed"
    );
    assert_eq!(e.sent("download.add"), 0, "nothing was sent");
    db.execute_batch("ROLLBACK").unwrap();
    let (v, _) = e
        .tool(&e.alice, "nodb", "moviepilot_api", download_add())
        .await;
    assert_eq!(v["_tool_execution"]["outcome"], "succeeded", "{v}");
    assert_eq!(e.sent("download.add"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_users_or_sessions_invocation_id_is_byte_identical_to_a_missing_one() {
    let e = env().await;
    let (v, _) = e
        .tool(&e.alice, "mine", "moviepilot_api", download_add())
        .await;
    let id = v["_tool_execution"]["invocation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (own, _) = e
        .tool(
            &e.alice,
            "mine",
            "get_tool_execution",
            json!({"invocation_id": id}),
        )
        .await;
    assert_eq!(own["execution_status"], "succeeded");
    let lookup = |actor: &Actor, session: &str, id: &str| {
        let (actor, session, id) = (actor.clone(), session.to_string(), id.to_string());
        let agent = e.host.agent().clone();
        async move {
            let (out, outcome) = agent
                .run_tool(
                    &actor,
                    &session,
                    "get_tool_execution",
                    json!({"invocation_id": id}),
                )
                .await
                .unwrap();
            (out.content, outcome)
        }
    };
    let missing = lookup(&e.alice, "mine", "0123456789abcdef").await;
    let other_user = lookup(&e.bob, "mine", &id).await;
    let other_session = lookup(&e.alice, "elsewhere", &id).await;
    let admin = lookup(&e.admin, "mine", &id).await;
    assert_eq!(
        missing.0,
        r#"{"success":false,"error":"execution_not_found"}"#
    );
    for other in [&other_user, &other_session, &admin] {
        assert_eq!(other, &missing, "indistinguishable from a missing id");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_turn_keeps_a_recovery_snapshot_with_the_call_marked_result_unknown() {
    let e = env().await;
    // The fake holds the write: the turn is mid-call until the fake lets go.
    e.fake.add_fault(fault(json!({"operation": "download.add",
        "action": {"kind": "stall", "ms": 3000}})));
    e.mock.push(MockReply::tool_calls(&[(
        "call_plan",
        "update_plan",
        json!({"objective": "Download Three Body S01", "steps": [
            {"step": "Add the download", "status": "in_progress"},
            {"step": "Check the queue", "status": "pending"}]}),
    )]));
    e.mock.push(MockReply::text_and_tool_calls(
        "Adding it now.",
        &[("call_dl", "moviepilot_api", download_add())],
    ));
    e.mock.push(MockReply::text("added"));
    let mut rx = e
        .host
        .agent()
        .submit(
            &e.alice,
            "midturn",
            "web",
            "download Three Body S01".into(),
            vec![],
        )
        .await
        .unwrap();
    while let Some(ev) = rx.recv().await {
        if matches!(&ev, Event::ToolStarted { tool_id, .. } if tool_id == "call_dl") {
            break;
        }
    }
    // The write is in flight: the saved chat already holds every message up to the call.
    let chat = e.host.agent().chat_for(&e.alice, "midturn").await.unwrap();
    let m = &chat.agent_messages;
    let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::Tool,
            Role::Assistant
        ],
        "{m:#?}"
    );
    assert_eq!(m[0].text(), "download Three Body S01");
    assert_eq!(
        m[2].outcome,
        Some(Outcome::Succeeded),
        "the plan result arrived"
    );
    assert_eq!(m[3].text(), "Adding it now.");
    assert_eq!(m[4].tool_call_id.as_deref(), Some("call_dl"));
    assert_eq!(m[4].outcome, Some(Outcome::Unknown));
    assert!(m[4].text().contains("result unknown"), "{}", m[4].text());
    assert!(m[5].metadata.contains_key("moviepilot_recovery"));
    assert!(m[5].text().contains("get_tool_execution"));
    let plan = m[5]
        .metadata
        .get("moviepilot_task_plan")
        .expect("plan attached");
    assert_eq!(plan["objective"], "Download Three Body S01");
    let shown = chat.display_messages.as_array().unwrap();
    // The page shows the unknown line only if the turn is not running any more.
    assert!(
        shown
            .iter()
            .any(|d| d["role"] == "tool" && d["outcome"] == "unknown" && d["recovery"] == true),
        "{shown:#?}"
    );
    assert_eq!(shown.last().unwrap()["recovery"], true);
    // The turn then ends normally and the real snapshot replaces the recovery form.
    while let Some(ev) = rx.recv().await {
        if matches!(ev, Event::TurnEnded { .. }) {
            break;
        }
    }
    let dl = e.tool_message(&e.alice, "midturn", "call_dl").await;
    assert_eq!(dl.outcome, Some(Outcome::Succeeded));
    let chat = e.host.agent().chat_for(&e.alice, "midturn").await.unwrap();
    assert!(
        !chat
            .agent_messages
            .iter()
            .any(|m| m.metadata.contains_key("moviepilot_recovery"))
    );
    assert_eq!(chat.agent_messages.last().unwrap().text(), "added");
}

/// The ledger row of an invocation as stored: (status, updated_at).
fn row(e: &Env, invocation_id: &str) -> Option<(String, String)> {
    use rusqlite::OptionalExtension;
    e.db()
        .query_row(
            "SELECT status, updated_at FROM agent_invocations WHERE invocation_id = ?1",
            [invocation_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .unwrap()
}

/// One settled and one open (`unknown`) receipt in `session`: their invocation ids.
async fn settled_and_open(e: &Env, session: &str) -> (String, String) {
    let (ok, _) = e
        .tool(&e.alice, session, "moviepilot_api", download_add())
        .await;
    assert_eq!(ok["_tool_execution"]["outcome"], "succeeded", "{ok}");
    // Another download, its answer lost.
    e.fake.add_fault(fault(
        json!({"operation": "download.add", "action": {"kind": "drop"}, "nth": 1}),
    ));
    let season_two = json!({"operation_id": "download.add", "body": {
        "torrent_in": {"title": "Three Body S02",
            "enclosure": MAGNET.replace("0123456789abcdef01234567", "fedcba9876543210fedcba98")},
        "media_source": "themoviedb", "media_id": "204541"}});
    let (lost, _) = e
        .tool(&e.alice, session, "moviepilot_api", season_two)
        .await;
    assert_eq!(lost["_tool_execution"]["outcome"], "unknown", "{lost}");
    (
        ok["_tool_execution"]["invocation_id"]
            .as_str()
            .unwrap()
            .to_string(),
        lost["_tool_execution"]["invocation_id"]
            .as_str()
            .unwrap()
            .to_string(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn receipts_were_never_deleted_with_their_session_now_settled_ones_go_and_open_ones_stay() {
    let e = env().await;
    // A chat to delete: one turn, then the writes in the same session.
    e.mock.push(MockReply::text("hello"));
    e.turn(&e.alice, "gone", "hi").await;
    let (settled, open) = settled_and_open(&e, "gone").await;
    let (kept, _) = e
        .tool(&e.alice, "kept", "moviepilot_api", download_add())
        .await;
    let kept = kept["_tool_execution"]["invocation_id"]
        .as_str()
        .unwrap()
        .to_string();

    e.host
        .agent()
        .delete_session(&e.alice, "gone")
        .await
        .unwrap();
    assert_eq!(
        row(&e, &settled),
        None,
        "the settled receipt went with its chat"
    );
    assert_eq!(row(&e, &open).unwrap().0, "unknown", "the open one stays");
    // (MoviePilot answers the repeated download as a duplicate: a settled `failed` receipt.)
    assert!(row(&e, &kept).is_some(), "another session's stays");
    let (found, _) = e
        .tool(
            &e.alice,
            "gone",
            "get_tool_execution",
            json!({"invocation_id": open}),
        )
        .await;
    assert_eq!(found["execution_status"], "unknown", "{found}");
}

#[tokio::test(flavor = "multi_thread")]
async fn retention_expires_settled_receipts_past_the_window_and_never_open_ones() {
    let e = env().await;
    let (old_settled, old_open) = settled_and_open(&e, "old").await;
    let (new_settled, _) = e
        .tool(&e.alice, "new", "moviepilot_api", download_add())
        .await;
    let new_settled = new_settled["_tool_execution"]["invocation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let long_ago = (chrono::Utc::now() - chrono::Duration::days(40))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    e.db()
        .execute(
            "UPDATE agent_invocations SET updated_at = ?1 WHERE session_id LIKE '%old'",
            [&long_ago],
        )
        .unwrap();

    // 0 days keeps everything.
    let report = e.host.agent().retention_pass(0).await;
    assert_eq!(report.receipts_removed, 0);
    assert!(row(&e, &old_settled).is_some());

    let report = e.host.agent().retention_pass(30).await;
    assert_eq!(report.receipts_removed, 1);
    assert_eq!(row(&e, &old_settled), None, "settled and 40 days old");
    assert_eq!(
        row(&e, &old_open).unwrap().0,
        "unknown",
        "open rows never expire"
    );
    assert!(row(&e, &new_settled).is_some(), "inside the window");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_duplicate_of_a_write_still_running_was_pending_and_success_now_unknown() {
    let e = env().await;
    e.fake.add_fault(fault(json!({"operation": "download.add",
        "action": {"kind": "stall", "ms": 3000}, "nth": 1})));
    let agent = e.host.agent().clone();
    let alice = e.alice.clone();
    let first = tokio::spawn(async move {
        agent
            .run_tool(&alice, "twice", "moviepilot_api", download_add())
            .await
            .unwrap()
    });
    // The first call holds its claim while MoviePilot stalls.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let running: i64 = e
            .db()
            .query_row(
                "SELECT count(*) FROM agent_invocations WHERE status = 'running'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        if running == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the write never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (dup, _) = e
        .tool(&e.alice, "twice", "moviepilot_api", download_add())
        .await;
    assert_eq!(dup["execution_outcome"], "unknown", "{dup}");
    assert_eq!(dup["success"], false, "{dup}");
    assert_eq!(dup["replayed"], true);
    let msg = dup["message"].as_str().unwrap();
    assert!(
        msg.contains("the first call is still running; not confirmed"),
        "{msg}"
    );
    let (out, outcome) = first.await.unwrap();
    assert_eq!(outcome, Outcome::Succeeded, "{}", out.content);
    assert_eq!(e.sent("download.add"), 1, "the duplicate was not sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn settings_with_a_credential_word_inside_the_key_were_read_back_now_they_stay_unknown() {
    let e = env().await;
    for key in ["TRACKER_COOKIE_2", "PT_PASSKEY_MAIN"] {
        e.fake
            .add_fault(fault(json!({"operation": "config.system.update",
            "action": {"kind": "drop"}, "nth": 1})));
        let gets = e.sent("config.system.get");
        let (v, _) = e
            .tool(
                &e.admin,
                "creds",
                "moviepilot_api",
                setting_update(json!({"setting_key": key, "value": "abc123"})),
            )
            .await;
        assert_eq!(v["execution_outcome"], "unknown", "{key}: {v}");
        assert!(v.get("reconciled").is_none(), "{key}: {v}");
        assert_eq!(e.sent("config.system.get"), gets, "{key} was read back");
    }
    // A key with no credential word is still verified by reading it back.
    e.fake
        .add_fault(fault(json!({"operation": "config.system.update",
        "action": {"kind": "drop"}, "nth": 1})));
    let (v, _) = e
        .tool(
            &e.admin,
            "creds",
            "moviepilot_api",
            setting_update(json!({"setting_key": "SUBSCRIBE_SEARCH_INTERVAL", "value": 24})),
        )
        .await;
    assert_eq!(v["execution_outcome"], "succeeded", "{v}");
    assert_eq!(v["reconciled"], true);
}
