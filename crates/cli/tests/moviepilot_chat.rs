//! `mpagent chat` end to end against the fake MoviePilot over real HTTP, scripted by the mock
//! model, with `MPA_AUTH=local` and `MOVIEPILOT_SECRET_KEY`: accounts linked with `mpagent user
//! add --moviepilot-user` / `user link` act as their MoviePilot user, an unlinked one gets
//! `moviepilot_not_linked`. "订阅《三体》" searches, finds no subscription, adds exactly one and
//! cites its id; the same request again finds it and adds nothing. A lost `download.add` receipt
//! is `unknown` with the verify note while the fake holds one download; a `scheduler.run` is
//! `pending`, and the turn stays honest about both.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use common::{Run, demo_world as world};
use mpa_eval::{FakeConfig, FakeHandle, FakeMoviePilot, Fault};
use mpa_test_support::{MockModelServer, MockReply};
use serde_json::{Value, json};
use tokio::process::Command;

use crate::common;

const SECRET: &str = "fake-moviepilot-secret-for-chat-tests";

struct Env {
    _dir: tempfile::TempDir,
    data: std::path::PathBuf,
    mock: MockModelServer,
    fake: FakeHandle,
}

impl Env {
    async fn start() -> Env {
        let fake = FakeMoviePilot::start(FakeConfig::new(SECRET), world())
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        Env {
            data: dir.path().join("data"),
            _dir: dir,
            mock: MockModelServer::start().await,
            fake,
        }
    }

    fn cmd(&self) -> Command {
        let mut c = common::mpagent(&self.data, &self.mock);
        c.env("MOVIEPILOT_URL", self.fake.url())
            .env("MOVIEPILOT_SECRET_KEY", SECRET)
            .env("MPA_AUTH", "local");
        c
    }

    async fn run(&self, args: &[&str]) -> Run {
        let mut c = self.cmd();
        c.args(args);
        common::run(c).await
    }

    /// `mpagent user add NAME [--admin] --no-password --moviepilot-user ID`, which must work.
    async fn linked_user(&self, name: &str, admin: bool, mp_id: &str) -> Run {
        let mut args = vec![
            "user",
            "add",
            name,
            "--no-password",
            "--moviepilot-user",
            mp_id,
        ];
        if admin {
            args.push("--admin");
        }
        let r = self.run(&args).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        r
    }

    /// One turn as `user`; returns the JSON events.
    async fn chat(&self, user: &str, text: &str) -> Vec<Value> {
        self.chat_in(user, None, text).await
    }

    /// One turn as `user`, in `session` (default: a new one).
    async fn chat_in(&self, user: &str, session: Option<&str>, text: &str) -> Vec<Value> {
        self.chat_exiting(user, session, text, 0).await
    }

    /// One turn as `user` whose `mpagent chat` exits with `code`; returns the JSON events.
    async fn chat_exiting(
        &self,
        user: &str,
        session: Option<&str>,
        text: &str,
        code: i32,
    ) -> Vec<Value> {
        let mut args = vec!["chat", "--user", user, "--output", "jsonl"];
        if let Some(s) = session {
            args.extend(["--session", s]);
        }
        args.push(text);
        let r = self.run(&args).await;
        assert_eq!(r.code, code, "{}", r.stderr);
        r.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The result of tool call `id` as the model was shown it.
    fn tool_result(&self, id: &str) -> Value {
        for req in self.mock.requests().iter().rev() {
            for m in req["messages"].as_array().into_iter().flatten() {
                if m["role"] == "tool" && m["tool_call_id"] == id {
                    return serde_json::from_str(m["content"].as_str().unwrap()).unwrap();
                }
            }
        }
        panic!("the model never saw the result of {id}");
    }

    /// The result of tool call `id` in the chat snapshot of `session`.
    fn saved_result(&self, session: &str, id: &str) -> Value {
        let c = rusqlite::Connection::open(self.data.join("agent.db")).unwrap();
        let text: String = c
            .query_row(
                "SELECT agent_messages FROM chats WHERE session_id = ?1",
                [session],
                |r| r.get(0),
            )
            .unwrap();
        let messages: Vec<Value> = serde_json::from_str(&text).unwrap();
        let m = messages
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .unwrap_or_else(|| panic!("no result of {id} in {text}"));
        serde_json::from_str(m["content"].as_str().unwrap()).unwrap()
    }

    fn operations(&self) -> Vec<String> {
        self.fake
            .ledger()
            .iter()
            .filter_map(|a| a.operation_id.clone())
            .collect()
    }
}

fn call(id: &str, args: Value) -> MockReply {
    MockReply::tool_calls(&[(id, "moviepilot_api", args)])
}

fn finished(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_finished")
        .map(|e| {
            (
                e["tool_id"].as_str().unwrap().to_string(),
                e["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn turn_end(events: &[Value]) -> (String, String) {
    let e = events.last().unwrap();
    assert_eq!(e["type"], "turn_ended", "{events:?}");
    (
        e["status"].as_str().unwrap().to_string(),
        e["final_text"].as_str().unwrap().to_string(),
    )
}

const SANTI: &str = "204541";

fn find_args() -> Value {
    json!({"operation_id": "subscription.find", "path_params": {"media_id": SANTI},
           "query": {"media_source": "themoviedb", "season": 1}})
}

/// Claims of success a reply about an unfinished or unknown write must not make.
const SUCCESS_WORDS: [&str; 6] = [
    "成功",
    "已添加",
    "已完成",
    "succeeded",
    "successfully",
    "done",
];

#[tokio::test(flavor = "multi_thread")]
async fn linked_accounts_act_as_their_moviepilot_user_and_unlinked_ones_are_told() {
    let e = Env::start().await;
    let r = e.linked_user("admin", true, "1").await;
    assert!(
        r.stdout.contains("admin acts as MoviePilot user 1"),
        "{}",
        r.stdout
    );
    assert_eq!(
        e.run(&["user", "add", "alice", "--no-password"]).await.code,
        0
    );
    assert_eq!(
        e.run(&["user", "add", "bob", "--no-password"]).await.code,
        0
    );
    // Not a MoviePilot id; an id already linked elsewhere; neither leaves an account behind.
    let bad = e
        .run(&[
            "user",
            "add",
            "carol",
            "--no-password",
            "--moviepilot-user",
            "carol",
        ])
        .await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("numeric user id"), "{}", bad.stderr);
    let taken = e
        .run(&[
            "user",
            "add",
            "dave",
            "--no-password",
            "--moviepilot-user",
            "1",
        ])
        .await;
    assert_ne!(taken.code, 0, "{}", taken.stdout);
    let r = e.run(&["user", "link", "alice", "2"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let list = e.run(&["user", "list"]).await.stdout;
    let rows: Vec<Vec<&str>> = list
        .lines()
        .map(|l| l.split('\t').skip(1).collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["admin", "admin", "moviepilot:1"],
            vec!["alice", "user", "moviepilot:2"],
            vec!["bob", "user"],
        ]
    );

    // Each linked account's call is made as its own MoviePilot user, with no rights added.
    let args = r#"{"operation_id": "subscription.list"}"#;
    for (user, id, superuser) in [("alice", 2, false), ("admin", 1, true)] {
        let r = e
            .run(&["tool", "moviepilot_api", "--user", user, "--args", args])
            .await;
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        let a = e.fake.ledger().pop().unwrap();
        let u = a.user.unwrap();
        assert_eq!(
            (u.id, u.super_user, a.status),
            (id, superuser, Some(200)),
            "{user}"
        );
    }
    let sent = e.fake.ledger().len();
    let r = e
        .run(&["tool", "moviepilot_api", "--user", "bob", "--args", args])
        .await;
    assert_eq!(r.code, 1);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v,
        json!({"success": false, "error": "moviepilot_not_linked", "operation_id": "subscription.list",
               "message": "this account is not linked to a MoviePilot user; an administrator can link it with `mpagent user link` / 此账户尚未关联 MoviePilot 用户; nothing was sent"})
    );
    assert_eq!(e.fake.ledger().len(), sent, "nothing was sent for bob");
    // Unlinked again, alice is told too.
    assert_eq!(e.run(&["user", "unlink", "alice"]).await.code, 0);
    let r = e
        .run(&["tool", "moviepilot_api", "--user", "alice", "--args", args])
        .await;
    assert!(r.stdout.contains("moviepilot_not_linked"), "{}", r.stdout);
    assert_eq!(e.fake.ledger().len(), sent);
}

#[tokio::test(flavor = "multi_thread")]
async fn subscribing_to_santi_adds_exactly_one_and_asking_again_adds_none() {
    let e = Env::start().await;
    e.linked_user("admin", true, "1").await;
    let before = e.fake.snapshot().subscriptions.len();
    // The id the fake will give the new subscription (one more than the highest seeded).
    let new_id = e
        .fake
        .snapshot()
        .subscriptions
        .iter()
        .filter_map(|s| s["id"].as_i64())
        .max()
        .unwrap()
        + 1;
    let answer = format!("已订阅《三体》第 1 季，订阅编号 {new_id}，已读回确认。");
    e.mock.push(call(
        "c_search",
        json!({"operation_id": "media.search", "query": {"title": "三体"}}),
    ));
    e.mock.push(call("c_find", find_args()));
    e.mock.push(call(
        "c_add",
        json!({"operation_id": "subscription.add",
               "body": {"name": "三体", "media_source": "themoviedb", "media_id": SANTI, "season": 1}}),
    ));
    e.mock.push(MockReply::text(&answer));
    let events = e.chat("admin", "订阅《三体》").await;

    assert_eq!(
        e.operations(),
        ["media.search", "subscription.find", "subscription.add"]
    );
    let found = e.tool_result("c_search");
    assert!(
        found["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["media_id"] == SANTI && m["media_source"] == "themoviedb"),
        "{found}"
    );
    assert_eq!(
        e.tool_result("c_find")["data"],
        json!({}),
        "no subscription yet"
    );
    let added = e.tool_result("c_add");
    assert_eq!(added["success"], true, "{added}");
    assert_eq!(added["data"]["id"], new_id);
    assert_eq!(added["_tool_execution"]["outcome"], "succeeded");
    let subs = e.fake.snapshot().subscriptions;
    assert_eq!(subs.len(), before + 1, "exactly one new subscription");
    let created = subs.last().unwrap();
    assert_eq!(
        (&created["id"], &created["media_id"], &created["season"]),
        (&json!(new_id), &json!(SANTI), &json!(1))
    );
    let (status, text) = turn_end(&events);
    assert_eq!(status, "completed");
    assert!(text.contains(&format!("订阅编号 {new_id}")), "{text}");
    assert_eq!(
        finished(&events),
        [
            ("c_search".to_string(), "succeeded".to_string()),
            ("c_find".into(), "succeeded".into()),
            ("c_add".into(), "succeeded".into())
        ]
    );

    // The same request again: the find hits, nothing is added.
    e.mock.push(call("c_find2", find_args()));
    e.mock.push(MockReply::text(&format!(
        "《三体》已经订阅过了（订阅编号 {new_id}），没有重复添加。"
    )));
    let events = e.chat("admin", "订阅《三体》").await;
    let hit = e.tool_result("c_find2");
    assert_eq!(hit["data"]["id"], new_id, "{hit}");
    assert_eq!(
        e.operations(),
        [
            "media.search",
            "subscription.find",
            "subscription.add",
            "subscription.find"
        ]
    );
    assert_eq!(e.fake.snapshot().subscriptions.len(), before + 1);
    assert!(turn_end(&events).1.contains(&new_id.to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_download_receipt_is_unknown_and_the_reply_never_claims_success() {
    let e = Env::start().await;
    e.linked_user("alice", false, "2").await;
    // The fake applies the download, then closes the connection without an answer.
    e.fake.add_fault(
        serde_json::from_value::<Fault>(json!({"operation": "download.add",
            "action": {"kind": "drop", "after_effect": true}, "nth": 1}))
        .unwrap(),
    );
    let downloads = e.fake.snapshot().downloads.len();
    let enclosure =
        "magnet:?xt=urn:btih:5a3afb23aafab76a20a4e88241e946e4ddde3e56&dn=Three-Body.S01.2023.2160p";
    e.mock.push(call(
        "c_dl",
        json!({"operation_id": "download.add",
               "body": {"torrent_in": {"title": "Three-Body.S01.2023.2160p.WEB-DL.H265", "enclosure": enclosure},
                        "media_source": "themoviedb", "media_id": SANTI}}),
    ));
    e.mock.push(MockReply::text(
        "下载请求已发出，但没有收到 MoviePilot 的回执，结果未知。我会先查看下载任务，确认之前不会重复提交。",
    ));
    // Not known to have succeeded: `mpagent chat` exits 1, as for a failure.
    let events = e.chat_exiting("alice", None, "下载三体 2160p", 1).await;

    let result = e.tool_result("c_dl");
    assert_eq!(result["success"], false, "{result}");
    assert_eq!(result["execution_outcome"], "unknown");
    assert_eq!(result["error"], "operation_unavailable");
    let note = result["message"].as_str().unwrap();
    assert!(
        note.contains("may already have taken effect; verify read-only before retrying"),
        "{note}"
    );
    assert_eq!(result["_tool_execution"]["outcome"], "unknown");
    assert_eq!(
        finished(&events),
        [("c_dl".to_string(), "unknown".to_string())]
    );
    assert_eq!(
        e.fake.snapshot().downloads.len(),
        downloads + 1,
        "the download landed"
    );
    assert_eq!(e.operations(), ["download.add"], "sent once, never retried");
    // The model answered, but its only write may or may not have happened: the host says so.
    let (status, text) = turn_end(&events);
    assert_eq!(status, "unknown");
    for word in SUCCESS_WORDS {
        assert!(
            !text.contains(word),
            "the reply claims success ({word}): {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_started_scheduler_job_is_pending_and_the_turn_says_so() {
    let e = Env::start().await;
    e.linked_user("admin", true, "1").await;
    e.mock
        .push(call("c_jobs", json!({"operation_id": "scheduler.list"})));
    e.mock.push(call(
        "c_run",
        json!({"operation_id": "scheduler.run", "query": {"jobid": "transfer"}}),
    ));
    e.mock.push(MockReply::text(
        "“下载文件整理”任务已启动，目前还在进行中；它是否整理了文件要稍后查看任务状态才能确定。",
    ));
    let events = e.chat("admin", "运行一下下载文件整理").await;

    assert_eq!(e.operations(), ["scheduler.list", "scheduler.run"]);
    let run = e.tool_result("c_run");
    assert_eq!(run["_tool_execution"]["outcome"], "pending", "{run}");
    assert_eq!(
        finished(&events),
        [
            ("c_jobs".to_string(), "succeeded".to_string()),
            ("c_run".into(), "pending".into())
        ]
    );
    // The model answered, the job it started is still running: the turn is waiting, and the
    // answer says started, not succeeded.
    let (status, text) = turn_end(&events);
    assert_eq!(status, "waiting");
    assert!(text.contains("已启动") && text.contains("进行中"), "{text}");
    for word in SUCCESS_WORDS {
        assert!(
            !text.contains(word),
            "the reply claims success ({word}): {text}"
        );
    }
    // The business rules were in the prompt that model call was made with.
    let system = e.mock.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        system.contains("<moviepilot_rules>")
            && system.contains("a started or created scheduled job is not yet a successful run"),
        "{system}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn moviepilot_sign_in_needs_a_moviepilot_url() {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await;
    let mut c = common::mpagent(&dir.path().join("data"), &mock);
    c.env("MPA_AUTH", "moviepilot").args(["user", "list"]);
    let out = c.output().await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("set MOVIEPILOT_URL"), "{err}");
}

/// Spec §11.4: a response asking for secret values runs none of its calls and the host asks;
/// `确认` from the same user runs that one read and shows its values to the user only — never
/// to the model, the chat snapshot or the evidence — and answers once; `取消` sends nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_secret_read_waits_for_confirmation_and_its_values_reach_only_the_user() {
    let e = Env::start().await;
    e.linked_user("admin", true, "1").await;
    let secret_args = json!({"operation_id": "config.system.get",
        "query": {"setting_key": "TMDB_API_KEY", "include_values": true, "show_secrets": true}});
    e.mock.push(MockReply::tool_calls(&[
        ("c_secret", "moviepilot_api", secret_args.clone()),
        (
            "c_other",
            "moviepilot_api",
            json!({"operation_id": "subscription.list"}),
        ),
    ]));
    let events = e
        .chat_in("admin", Some("s-secret"), "看看 TMDB 的 API key")
        .await;
    assert_eq!(
        finished(&events),
        [
            ("c_secret".to_string(), "failed".to_string()),
            ("c_other".into(), "failed".into())
        ]
    );
    assert_eq!(
        e.saved_result("s-secret", "c_secret")["error"],
        "secret_read_confirmation_required"
    );
    assert!(
        e.saved_result("s-secret", "c_other")["message"]
            .as_str()
            .unwrap()
            .starts_with("paused, nothing executed")
    );
    let (status, question) = turn_end(&events);
    assert_eq!(status, "completed");
    assert!(
        question.contains("确认") && question.contains("取消"),
        "{question}"
    );
    assert!(e.operations().is_empty(), "nothing was sent");
    assert_eq!(e.mock.request_count(), 1, "the host asked, not the model");

    // 确认: the host runs the read itself; the value goes to the protected channel only.
    let events = e.chat_in("admin", Some("s-secret"), "确认").await;
    assert_eq!(e.mock.request_count(), 1, "the model saw nothing of it");
    let protected: Vec<&Value> = events
        .iter()
        .filter(|ev| ev["type"] == "protected")
        .collect();
    assert_eq!(protected.len(), 1, "{events:?}");
    assert!(
        protected[0]["content"]
            .as_str()
            .unwrap()
            .contains("demo-tmdb-key"),
        "{protected:?}"
    );
    assert_eq!(e.operations(), ["config.system.get"]);
    let (status, reply) = turn_end(&events);
    assert_eq!(status, "completed");
    assert!(!reply.contains("demo-tmdb-key"), "{reply}");
    // The value is in no file of the data directory (snapshot, evidence, logs).
    let mut stack = vec![e.data.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                assert!(
                    !bytes.windows(13).any(|w| w == b"demo-tmdb-key"),
                    "the secret is in {}",
                    p.display()
                );
            }
        }
    }

    // The question was answered once: another 确认 is an ordinary message for the model.
    e.mock.push(MockReply::text("没有待确认的操作。"));
    let events = e.chat_in("admin", Some("s-secret"), "确认").await;
    assert_eq!(e.mock.request_count(), 2);
    assert!(events.iter().all(|ev| ev["type"] != "protected"));
    assert_eq!(e.operations(), ["config.system.get"]);

    // 取消: nothing is sent.
    e.mock.push(call("c_secret2", secret_args));
    e.chat_in("admin", Some("s-secret"), "再看一次 TMDB key")
        .await;
    let events = e.chat_in("admin", Some("s-secret"), "取消").await;
    assert!(
        turn_end(&events)
            .1
            .contains("Cancelled; nothing was executed")
    );
    assert_eq!(
        e.operations(),
        ["config.system.get"],
        "nothing more was sent"
    );
}

/// `user add dave --moviepilot-user 2` with user 2 linked to carol said "user name "MoviePilot
/// user 2" is already taken" (and could leave dave behind); now it names the real conflict and
/// creates nothing, and `user link` names it too.
#[tokio::test(flavor = "multi_thread")]
async fn user_add_with_a_linked_moviepilot_user_named_a_wrong_conflict_now_names_the_account() {
    let e = Env::start().await;
    e.linked_user("carol", false, "2").await;
    let taken = e
        .run(&[
            "user",
            "add",
            "dave",
            "--no-password",
            "--moviepilot-user",
            "2",
        ])
        .await;
    assert_ne!(taken.code, 0, "{}", taken.stdout);
    assert!(
        taken
            .stderr
            .contains("user dave not created: MoviePilot user 2 is already linked to carol"),
        "{}",
        taken.stderr
    );
    assert_eq!(
        taken.stderr.matches("already linked").count(),
        1,
        "said once: {}",
        taken.stderr
    );
    let list = e.run(&["user", "list"]).await.stdout;
    assert!(!list.contains("dave"), "{list}");

    assert_eq!(
        e.run(&["user", "add", "erin", "--no-password"]).await.code,
        0
    );
    let r = e.run(&["user", "link", "erin", "2"]).await;
    assert_ne!(r.code, 0);
    assert!(
        r.stderr
            .contains("MoviePilot user 2 is already linked to carol"),
        "{}",
        r.stderr
    );
}
