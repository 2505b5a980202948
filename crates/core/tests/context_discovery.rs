//! Tool discovery (issue 17, spec runtime.md §3): `LLM_MAX_TOOLS` selects the first call's
//! tools, `search_tools` discovers more, the next call carries those that fit its budget.

use crate::common::host::{Gateway, TestHost, open_host, run_turn};
use crate::common::tool_names;
use async_trait::async_trait;
use mpa_core::Agent;
use mpa_core::tools::{JsonTool, ToolContext, ToolMeta, ToolOutput};
use mpa_protocol::{Actor, Event, ToolSpec, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};

struct Plain {
    name: &'static str,
    description: String,
}

#[async_trait]
impl JsonTool for Plain {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.into(),
            description: self.description.clone(),
            parameters: json!({"type": "object"}),
        }
    }
    fn meta(&self) -> ToolMeta {
        ToolMeta::read()
    }
    async fn call(&self, _ctx: ToolContext, _args: Value) -> ToolOutput {
        ToolOutput::classified("ok".into(), false)
    }
}

const ALWAYS_ON: [&str; 4] = [
    "get_tool_execution",
    "read_tool_result",
    "search_tools",
    "update_plan",
];

async fn agent(mock: &MockModelServer, max_tools: u32) -> (tempfile::TempDir, Agent, Actor) {
    let mut host =
        TestHost::builder(mock, "house-model-x").config(move |c| c.max_tools = max_tools);
    for (name, description) in [
        (
            "transfer_files",
            "Organize downloaded files into the library".to_string(),
        ),
        (
            "x_download_add",
            "Start a download from a torrent".to_string(),
        ),
        ("x_download_queue", "Show the downloader queue".to_string()),
        // A schema far over the 4096-token discovery budget.
        (
            "x_download_bulk",
            format!(
                "Bulk download. {}",
                "Every option explained at length. ".repeat(1200)
            ),
        ),
    ] {
        host = host.tool(mpa_core::tools::json_tool(Plain { name, description }));
    }
    let h = host.build().await;
    (h.dir, h.agent, h.actor)
}

async fn turn(agent: &Agent, actor: &Actor, text: &str) -> (TurnStatus, Vec<Event>) {
    let t = run_turn(agent, actor, "d", text).await;
    (t.status, t.events)
}

#[tokio::test]
async fn llm_max_tools_4_then_search_tools_enables_what_fits() {
    let mock = MockModelServer::start().await;
    mock.push(MockReply::tool_calls(&[(
        "s1",
        "search_tools",
        json!({"search": "下载", "limit": 8}),
    )]));
    mock.push(MockReply::text("found them"));
    mock.push(MockReply::text("next request"));
    let (_d, agent, actor) = agent(&mock, 4).await;
    let (status, events) = turn(&agent, &actor, "整理 my files please").await;
    assert_eq!(status, TurnStatus::Completed);
    let reqs = mock.requests();
    let first = tool_names(&reqs[0]);
    let selected: Vec<&String> = first
        .iter()
        .filter(|n| !ALWAYS_ON.contains(&n.as_str()))
        .collect();
    assert_eq!(selected.len(), 4, "{first:?}");
    assert!(
        first.contains("transfer_files"),
        "整理 → transfer: {first:?}"
    );
    for a in ALWAYS_ON {
        assert!(first.contains(a), "{a} always on");
    }
    assert!(!first.contains("x_download_add"));

    // The search result lists the candidates, pending the budget check.
    let msgs = reqs[1]["messages"].as_array().unwrap();
    // The last message carries the availability notice after its own text.
    let content = msgs.iter().find(|m| m["role"] == "tool").unwrap()["content"]
        .as_str()
        .unwrap();
    let result: Value = serde_json::Deserializer::from_str(content)
        .into_iter::<Value>()
        .next()
        .unwrap()
        .unwrap();
    let found: Vec<&str> = result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        found.contains(&"x_download_add") && found.contains(&"x_download_bulk"),
        "{found:?}"
    );
    assert!(
        result["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "pending_budget_check" || t["status"] == "already_selected")
    );

    // The next call carries what fits; the budget report and the notice say exactly which.
    let second = tool_names(&reqs[1]);
    assert!(
        second.contains("x_download_add") && second.contains("x_download_queue"),
        "{second:?}"
    );
    assert!(!second.contains("x_download_bulk"));
    let report = events
        .iter()
        .filter_map(|e| match e {
            Event::Budget { budget } => budget.tool_discovery.clone(),
            _ => None,
        })
        .next()
        .unwrap();
    assert_eq!(report["x_download_add"], "enabled");
    assert_eq!(report["x_download_queue"], "enabled");
    assert_eq!(report["x_download_bulk"], "schema_budget_exceeded");
    let last = msgs.last().unwrap()["content"].as_str().unwrap();
    assert!(last.contains("<tool_discovery_availability>"), "{last}");
    assert!(last.contains("schema_budget_exceeded"));

    // Discovery state lives for one user request: the next one starts from its own selection.
    turn(&agent, &actor, "hello").await;
    let third = tool_names(&mock.requests()[2]);
    assert!(!third.contains("x_download_add") && !third.contains("x_download_queue"));
    assert_eq!(
        third
            .iter()
            .filter(|n| !ALWAYS_ON.contains(&n.as_str()))
            .count(),
        4
    );
}

#[tokio::test]
async fn without_llm_max_tools_every_tool_is_offered_and_search_tools_is_not() {
    let mock = MockModelServer::start().await;
    mock.push(MockReply::text("hi"));
    let (_d, agent, actor) = agent(&mock, 0).await;
    turn(&agent, &actor, "hello").await;
    let names = tool_names(&mock.requests()[0]);
    assert!(names.contains("x_download_bulk") && names.contains("test_echo"));
    assert!(!names.contains("search_tools"));
}

#[tokio::test]
async fn gateway_operations_are_discoverable() {
    use mpa_core::tools::search_tools::{catalogue_for, rank};
    let dir = tempfile::tempdir().unwrap();
    let gateway = Gateway {
        url: "http://127.0.0.1:9".into(),
        secret: "k".into(),
        identity: None,
    };
    let host = open_host(dir.path(), mpa_model::ModelConfig::default(), Some(gateway)).await;
    let admin = host.local_actor("admin", true).await.unwrap();
    let catalogue = catalogue_for(&host.agent().services().tools.view(), &admin);
    let top = rank(&catalogue, "订阅");
    assert_eq!(top[0].0.name, "moviepilot_api");
    // Through the tool, as the model calls it: the matching operation ids.
    let mut ctx = mpa_core::tools::ToolContext::detached(admin.clone(), "g", "c");
    ctx.request_id = "r".into();
    ctx.session.put(mpa_core::tools::search_tools::Discovery {
        enabled: true,
        catalogue,
        baseline: vec![],
        discovered: vec![],
    });
    let call = mpa_protocol::ToolCall {
        id: "c".into(),
        name: "search_tools".into(),
        arguments: json!({"search": "订阅"}).to_string(),
    };
    let out = mpa_core::tools::invoke::invoke(
        host.agent().services().invoker(),
        ctx.clone(),
        mpa_core::tools::policy::Origin::Turn,
        &call,
        1,
    )
    .await;
    let v: Value = serde_json::from_str(&out.output.content).unwrap();
    let api = &v["tools"][0];
    assert_eq!(api["name"], "moviepilot_api", "{v}");
    let ops: Vec<&str> = api["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    assert!(
        ops.iter().all(|o| o.starts_with("subscription.")),
        "{ops:?}"
    );
    assert!(ops.contains(&"subscription.list"), "{ops:?}");
    assert_eq!(
        ctx.session
            .with(|d: &mut mpa_core::tools::search_tools::Discovery| d.discovered.last().cloned())
            .unwrap(),
        "moviepilot_api"
    );
}
