//! Regression (issue 24, item 8): a model that called a tool that does not exist was told every
//! registered tool, admin-only ones included, whoever the caller was. The answer now lists only
//! the tools the caller may use.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use crate::common::host::TestHost;
use mpa_core::capability::Terminals;
use mpa_core::{Agent, Capabilities};
use mpa_protocol::{Actor, Event, TurnStatus};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};

async fn turn(agent: &Agent, actor: &Actor, session: &str) -> TurnStatus {
    let mut rx = agent
        .submit(actor, session, "test", "do it".into(), vec![])
        .await
        .unwrap();
    while let Some(ev) = rx.recv().await {
        if let Event::TurnEnded { status, .. } = ev {
            return status;
        }
    }
    panic!("no TurnEnded");
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_tool_lists_only_tools_the_caller_may_use() {
    let mock = MockModelServer::start().await;
    let host = TestHost::builder(&mock, "gpt-4o")
        .user("kim")
        .diagnostic_tools(false)
        .caps(|data| {
            Capabilities::default().with(Terminals::new(mpa_exec::Processes::new(
                mpa_exec::ExecConfig::new(data.to_path_buf(), data.join("spill")),
            )))
        })
        .build()
        .await;
    let (agent, kim) = (&host.agent, host.actor.clone());
    let root = host.store.ensure_local_user("root").await.unwrap();
    let root = Actor {
        user_id: root.id,
        user_name: root.name,
        is_admin: true,
    };
    for actor in [kim, root] {
        let is_admin = actor.is_admin;
        let n = mock.request_count();
        mock.push(MockReply::tool_calls(&[(
            "c1",
            "run_shell",
            json!({"cmd": "ls"}),
        )]));
        mock.push(MockReply::text("there is no such tool"));
        assert_eq!(
            turn(agent, &actor, &format!("s-{is_admin}")).await,
            TurnStatus::Completed
        );
        let req = &mock.requests()[n + 1];
        let result = req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["tool_call_id"] == "c1")
            .and_then(|m| m["content"].as_str())
            .unwrap()
            .to_owned();
        let v: Value = serde_json::from_str(&result).unwrap();
        assert_eq!(v["error"], "unknown_tool", "{result}");
        assert!(result.contains("update_plan"), "{result}");
        // execute_command is admin-only: named to the admin, never to anyone else.
        assert_eq!(
            result.contains("execute_command"),
            is_admin,
            "admin={is_admin}: {result}"
        );
    }
}
