//! The large-result store behind the one call path (issue 17): a result over the cap is kept in
//! the session's memory and read on with `read_tool_result` by Unicode character offset.

use async_trait::async_trait;
use mpa_core::tools::gate::Gates;
use mpa_core::tools::invoke::{Invoker, invoke};
use mpa_core::tools::policy::Origin;
use mpa_core::tools::read_tool_result::ResultStore;
use mpa_core::tools::registry::Tools;
use mpa_core::tools::{JsonTool, SessionState, ToolContext, ToolMeta, ToolOutput};
use mpa_core::{Capabilities, RegistryOptions, default_registry};
use mpa_protocol::{Actor, Outcome, ToolCall, ToolSpec, UserId};
use serde_json::{Value, json};
use std::sync::Arc;

/// Returns `{"size": n}` characters of numbered lines mixing Chinese and ASCII.
struct BigResult;

pub fn big_text(chars: usize) -> String {
    let mut s = String::with_capacity(chars * 2);
    let mut i = 0usize;
    let mut n = 0usize;
    while n < chars {
        let line = format!("第{i}条 订阅《流浪地球》 season={i} ok\n");
        for c in line.chars() {
            if n == chars {
                break;
            }
            s.push(c);
            n += 1;
        }
        i += 1;
    }
    s
}

#[async_trait]
impl JsonTool for BigResult {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "big_result".into(),
            description: "returns a large text".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, _ctx: ToolContext, args: Value) -> ToolOutput {
        let size = args["size"].as_u64().unwrap_or(0) as usize;
        ToolOutput::classified(big_text(size), false)
    }
}

struct Env {
    registry: Tools,
}

fn actor(id: &str) -> Actor {
    Actor {
        user_id: UserId(id.into()),
        user_name: id.into(),
        is_admin: false,
    }
}

fn session() -> Arc<SessionState> {
    Arc::new(SessionState::new())
}

impl Env {
    fn new() -> Self {
        let Ok(mut registry) =
            default_registry(&RegistryOptions::default(), Capabilities::default())
        else {
            panic!("the standard tools build without a host configuration");
        };
        registry.register(mpa_core::tools::json_tool(BigResult));
        Env {
            registry: registry.into(),
        }
    }

    async fn call(
        &self,
        actor: &Actor,
        session: &Arc<SessionState>,
        tool: &str,
        args: Value,
    ) -> (Value, Option<String>, Outcome) {
        let mut ctx = ToolContext::detached(actor.clone(), "s", "c");
        ctx.request_id = "r".into();
        ctx.session = Arc::clone(session);
        let call = ToolCall {
            id: "c".into(),
            name: tool.into(),
            arguments: args.to_string(),
        };
        let gates = Gates::standard();
        let inv = Invoker {
            tools: &self.registry,
            gates: &gates,
            timeout: None,
            ledger: None,
            max_result_chars: mpa_core::result_cap::DEFAULT_TOOL_RESULT_MAX_CHARS,
        };
        let done = invoke(inv, ctx, Origin::Turn, &call, 1).await;
        (
            serde_json::from_str(&done.output.content)
                .unwrap_or(Value::String(done.output.content.clone())),
            done.full_content,
            done.output.outcome,
        )
    }
}

#[tokio::test]
async fn a_900_kb_result_pages_to_its_last_character_exactly() {
    let env = Env::new();
    let (me, s) = (actor("u1"), session());
    // ~900 KB of UTF-8 (Chinese is 3 bytes a character).
    let size = 560_000;
    let original = big_text(size);
    assert!(original.len() > 900_000, "{}", original.len());
    let (preview, full, outcome) = env.call(&me, &s, "big_result", json!({"size": size})).await;
    assert_eq!(outcome, Outcome::Succeeded);
    assert_eq!(
        full.as_deref(),
        Some(original.as_str()),
        "evidence keeps it whole"
    );
    assert_eq!(preview["tool_result_truncated"], true);
    assert_eq!(preview["read_tool"], "read_tool_result");
    assert_eq!(preview["expires_in_seconds"], 900);
    assert_eq!(preview["offset_unit"], "unicode_characters");
    assert_eq!(preview["total_chars"], size);
    assert!(preview.get("result_unavailable").is_none());
    let id = preview["result_id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32);
    let mut text: String = preview["content_preview"].as_str().unwrap().to_string();
    let mut offset = preview["next_offset"].as_u64().unwrap();
    assert_eq!(offset as usize, text.chars().count());
    let mut pages = 0;
    // An odd page size puts boundaries inside Chinese runs.
    loop {
        let (page, full, _) = env
            .call(
                &me,
                &s,
                "read_tool_result",
                json!({"result_id": id, "offset": offset, "limit": 15_997}),
            )
            .await;
        assert_eq!(full, None, "read_tool_result is never archived");
        assert_eq!(page["success"], true, "{page}");
        assert_eq!(page["offset"], offset);
        assert_eq!(page["total_chars"], size);
        text.push_str(page["content"].as_str().unwrap());
        pages += 1;
        match page["next_offset"].as_u64() {
            Some(n) => offset = n,
            None => break,
        }
    }
    assert!(pages > 20);
    assert_eq!(text, original);
    // Past the end is its own error; exactly the end is an empty last page.
    let (past, _, _) = env
        .call(
            &me,
            &s,
            "read_tool_result",
            json!({"result_id": id, "offset": size + 1}),
        )
        .await;
    assert_eq!(past["error"], "offset_out_of_range");
    assert_eq!(past["total_chars"], size);
    let (end, _, _) = env
        .call(
            &me,
            &s,
            "read_tool_result",
            json!({"result_id": id, "offset": size}),
        )
        .await;
    assert_eq!(end["content"], "");
    assert_eq!(end["next_offset"], Value::Null);

    // Pattern mode: the matching lines, each with the offset it starts at.
    let (found, _, _) = env
        .call(
            &me,
            &s,
            "read_tool_result",
            json!({"result_id": id, "pattern": "第12345条", "offset": 0}),
        )
        .await;
    assert_eq!(found["success"], true, "{found}");
    assert_eq!(found["match_count"], 1);
    let m = &found["matches"][0];
    assert!(m["text"].as_str().unwrap().starts_with("第12345条 订阅"));
    let at = m["offset"].as_u64().unwrap() as usize;
    let line_start: String = original.chars().skip(at).take(9).collect();
    assert_eq!(line_start, "第12345条 订");
    // Case-insensitive, limited by `limit`, and resumable.
    let (many, _, _) = env
        .call(
            &me,
            &s,
            "read_tool_result",
            json!({"result_id": id, "pattern": "OK", "limit": 100}),
        )
        .await;
    assert!(many["match_count"].as_u64().unwrap() >= 2);
    assert!(many["next_offset"].as_u64().is_some());
}

#[tokio::test]
async fn the_ninth_result_evicts_the_oldest_and_foreign_ids_look_expired() {
    let env = Env::new();
    let (me, s) = (actor("u1"), session());
    let mut ids = Vec::new();
    for _ in 0..9 {
        let (p, _, _) = env
            .call(&me, &s, "big_result", json!({"size": 70_000}))
            .await;
        ids.push(p["result_id"].as_str().unwrap().to_string());
    }
    assert_eq!(s.with(|r: &mut ResultStore| r.len()), 8);
    let read = |who: Actor, sess: Arc<SessionState>, id: String| {
        let env = &env;
        async move {
            env.call(&who, &sess, "read_tool_result", json!({"result_id": id}))
                .await
                .0
        }
    };
    let evicted = read(me.clone(), Arc::clone(&s), ids[0].clone()).await;
    assert_eq!(evicted["success"], false);
    assert_eq!(evicted["error"], "result_unavailable");
    let newest = read(me.clone(), Arc::clone(&s), ids[8].clone()).await;
    assert_eq!(newest["success"], true);
    assert!(read(me.clone(), Arc::clone(&s), ids[1].clone()).await["success"] == true);
    // Another session, another user, an unknown id, a malformed id: the same answer, word for
    // word, as an evicted (or expired) one.
    let other_session = read(me.clone(), session(), ids[8].clone()).await;
    let other_user = read(actor("u2"), Arc::clone(&s), ids[8].clone()).await;
    let unknown = read(me.clone(), Arc::clone(&s), "0".repeat(32)).await;
    let malformed = read(me.clone(), Arc::clone(&s), "short".into()).await;
    for v in [&other_session, &other_user, &unknown, &malformed] {
        assert_eq!(v, &evicted);
    }
    // An admin's result is not readable by the same user after demotion.
    let admin = Actor {
        is_admin: true,
        ..actor("boss")
    };
    let (p, _, _) = env
        .call(&admin, &s, "big_result", json!({"size": 70_000}))
        .await;
    let id = p["result_id"].as_str().unwrap().to_string();
    assert_eq!(
        read(admin.clone(), Arc::clone(&s), id.clone()).await["success"],
        true
    );
    assert_eq!(read(actor("boss"), Arc::clone(&s), id).await, evicted);
}

#[tokio::test]
async fn a_result_too_large_to_keep_says_so() {
    let env = Env::new();
    let (me, s) = (actor("u1"), session());
    // > 1 MiB of UTF-8.
    let (p, full, _) = env
        .call(&me, &s, "big_result", json!({"size": 700_000}))
        .await;
    assert!(full.unwrap().len() > 1_048_576);
    assert_eq!(p["result_unavailable"], "result_too_large");
    assert_eq!(p["result_limit_bytes"], 1_048_576);
    assert!(p.get("result_id").is_none());
    assert!(p["message"].as_str().unwrap().contains("narrow the query"));
    assert!(s.with(|r: &mut ResultStore| r.is_empty()));
    // Under the cap nothing is kept or changed.
    let (small, full, _) = env.call(&me, &s, "big_result", json!({"size": 100})).await;
    assert!(full.is_none());
    assert!(small.is_string());
}

/// Regression (issue 24, item 8): a 200 KB `pattern` came back whole in the answer (`"pattern":
/// …`), an uncapped result that overflowed the window. A pattern is at most 200 characters; a
/// longer one is refused naming only its length, and nothing of it is echoed.
#[tokio::test]
async fn read_tool_result_never_echoes_a_long_pattern() {
    let env = Env::new();
    let (me, s) = (actor("u1"), session());
    let (preview, _, _) = env
        .call(&me, &s, "big_result", json!({"size": 70_000}))
        .await;
    let id = preview["result_id"].as_str().unwrap().to_string();
    let huge = "订阅ab".repeat(50_000);
    let (refused, _, outcome) = env
        .call(
            &me,
            &s,
            "read_tool_result",
            json!({"result_id": id, "pattern": huge}),
        )
        .await;
    assert_eq!(outcome, Outcome::Failed);
    assert_eq!(refused["error"], "invalid_arguments", "{refused}");
    let text = refused.to_string();
    assert!(text.len() < 1_000, "a short answer: {} bytes", text.len());
    assert!(
        !text.contains("订阅ab订阅ab"),
        "the pattern is not echoed: {text}"
    );
    assert!(text.contains("200"), "{text}");
    // 200 characters are still a search, echoed as sent.
    let edge = format!("第12345条{}", " ".repeat(193));
    let (found, _, _) = env
        .call(
            &me,
            &s,
            "read_tool_result",
            json!({"result_id": id, "pattern": "第1234条"}),
        )
        .await;
    assert_eq!(found["success"], true, "{found}");
    assert_eq!(found["pattern"], "第1234条");
    let (edge_answer, _, _) = env
        .call(
            &me,
            &s,
            "read_tool_result",
            json!({"result_id": id, "pattern": edge}),
        )
        .await;
    assert_eq!(edge.chars().count(), 200);
    assert_eq!(edge_answer["success"], true, "{edge_answer}");
    assert_eq!(edge_answer["match_count"], 0);
}
