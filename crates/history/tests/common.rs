//! What the history tests share: a [`History`] on a temporary data directory, message and
//! session builders, and the typed recall requests with their results unwrapped (a test that
//! expects a discover and gets a miss fails with the outcome in its message).
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a panic is the failure report"
)]

use chrono::{DateTime, TimeZone, Utc};
use mpa_history::recall::{
    BrowseEntry, DiscoverRequest, DiscoverResult, InSessionResult, Miss, ReadResult, ScrollResult,
    SearchOutcome, SearchRole,
};
use mpa_history::{
    CapturedMessage, History, HistoryConfig, Provenance, Result, Role, SearchContext,
    SearchRequest, SearchResponse, SessionMeta,
};
use mpa_protocol::UserId;
use mpa_redact::UserKey;

pub struct Env {
    pub dir: tempfile::TempDir,
    pub hub: History,
}

pub fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let hub = History::new(HistoryConfig::new(dir.path()));
    Env { dir, hub }
}

pub fn user(name: &str) -> UserKey {
    UserKey::for_user(&UserId(name.to_owned()))
}

pub fn ts(secs: f64) -> DateTime<Utc> {
    Utc.timestamp_micros((secs * 1e6) as i64).unwrap()
}

pub fn msg(uid: &str, role: Role, content: &str, at: f64) -> CapturedMessage {
    CapturedMessage {
        message_uid: uid.to_owned(),
        role,
        content: content.to_owned(),
        tool_name: None,
        tool_call_id: None,
        tool_calls: None,
        ts: Some(ts(at)),
        provenance: Provenance::Observed,
    }
}

pub fn meta(id: &str, source: &str) -> SessionMeta {
    SessionMeta {
        session_id: id.to_owned(),
        source: source.to_owned(),
        ..Default::default()
    }
}

/// A discover for `query` returning up to 10 sessions.
pub fn q(query: &str) -> DiscoverRequest {
    DiscoverRequest {
        limit: 10,
        ..DiscoverRequest::new(query)
    }
}

/// The host context of a search: the current session, if any.
pub fn current(session: Option<&str>) -> SearchContext {
    SearchContext {
        current_session_id: session.map(str::to_owned),
        ..Default::default()
    }
}

pub fn read_req(session_id: &str) -> SearchRequest {
    SearchRequest::Read {
        session_id: session_id.to_owned(),
    }
}

pub fn scroll_req(session_id: &str, around: i64, window: usize) -> SearchRequest {
    SearchRequest::Scroll {
        session_id: session_id.to_owned(),
        around_message_id: around,
        window,
    }
}

pub fn in_session_req(session_id: &str, query: &str) -> SearchRequest {
    SearchRequest::InSession {
        session_id: session_id.to_owned(),
        query: query.to_owned(),
        roles: Vec::new(),
        sort: mpa_history::recall::Sort::Relevance,
    }
}

/// Roles for a request (`SearchRole::DEFAULT` when empty).
pub fn roles(names: &[&str]) -> Vec<SearchRole> {
    names
        .iter()
        .map(|r| match *r {
            "user" => SearchRole::User,
            "assistant" => SearchRole::Assistant,
            "tool" => SearchRole::Tool,
            other => panic!("no role {other}"),
        })
        .collect()
}

/// The typed outcome, unwrapped to the shape a test expects.
pub trait OutcomeExt {
    fn discover(self) -> DiscoverResult;
    fn read(self) -> ReadResult;
    fn scroll(self) -> ScrollResult;
    fn browse(self) -> Vec<BrowseEntry>;
    fn in_session(self) -> InSessionResult;
    fn miss(self) -> Miss;
}

impl OutcomeExt for SearchOutcome {
    fn discover(self) -> DiscoverResult {
        match self {
            SearchOutcome::Discover(d) => d,
            other => panic!("not a discover: {other:?}"),
        }
    }
    fn read(self) -> ReadResult {
        match self {
            SearchOutcome::Read(r) => r,
            other => panic!("not a read: {other:?}"),
        }
    }
    fn scroll(self) -> ScrollResult {
        match self {
            SearchOutcome::Scroll(s) => s,
            other => panic!("not a scroll: {other:?}"),
        }
    }
    fn browse(self) -> Vec<BrowseEntry> {
        match self {
            SearchOutcome::Browse(b) => b,
            other => panic!("not a browse: {other:?}"),
        }
    }
    fn in_session(self) -> InSessionResult {
        match self {
            SearchOutcome::InSession(s) => s,
            other => panic!("not a search inside a session: {other:?}"),
        }
    }
    fn miss(self) -> Miss {
        match self {
            SearchOutcome::Miss(m) => m,
            other => panic!("not a miss: {other:?}"),
        }
    }
}

impl Env {
    /// Append alternating user/assistant messages `texts` to session `id` starting at time `t0`.
    pub async fn session(&self, u: &UserKey, m: SessionMeta, texts: &[&str], t0: f64) -> Vec<i64> {
        let sid = m.session_id.clone();
        let msgs: Vec<CapturedMessage> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let role = if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                msg(&format!("{sid}-{i}"), role, t, t0 + i as f64)
            })
            .collect();
        for chunk in msgs.chunks(100) {
            self.hub.append(u, m.clone(), chunk.to_vec()).await.unwrap();
        }
        self.ids(u, &sid)
    }

    /// Message ids of a session in order (straight from the file, as a test oracle).
    pub fn ids(&self, u: &UserKey, sid: &str) -> Vec<i64> {
        let conn = rusqlite::Connection::open(self.hub.db_path(u)).unwrap();
        let mut st = conn
            .prepare("SELECT id FROM messages WHERE session_id = ?1 ORDER BY id")
            .unwrap();
        st.query_map([sid], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    }

    pub fn sql_i64(&self, u: &UserKey, sql: &str) -> i64 {
        let conn = rusqlite::Connection::open(self.hub.db_path(u)).unwrap();
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    /// One recall request as `current` session's host would make it.
    pub async fn try_run(
        &self,
        u: &UserKey,
        current_session: Option<&str>,
        req: SearchRequest,
    ) -> Result<SearchResponse> {
        self.hub.search(u, &current(current_session), req).await
    }

    pub async fn run(
        &self,
        u: &UserKey,
        current_session: Option<&str>,
        req: SearchRequest,
    ) -> SearchResponse {
        self.try_run(u, current_session, req).await.unwrap()
    }

    pub async fn discover(
        &self,
        u: &UserKey,
        current_session: Option<&str>,
        req: DiscoverRequest,
    ) -> DiscoverResult {
        self.run(u, current_session, SearchRequest::Discover(req))
            .await
            .outcome
            .discover()
    }

    /// `discover(q(query))`.
    pub async fn find(
        &self,
        u: &UserKey,
        current_session: Option<&str>,
        query: &str,
    ) -> DiscoverResult {
        self.discover(u, current_session, q(query)).await
    }

    pub async fn read(&self, u: &UserKey, session_id: &str) -> ReadResult {
        self.run(u, None, read_req(session_id)).await.outcome.read()
    }

    pub async fn browse(
        &self,
        u: &UserKey,
        current_session: Option<&str>,
        limit: usize,
    ) -> Vec<BrowseEntry> {
        self.run(u, current_session, SearchRequest::Browse { limit })
            .await
            .outcome
            .browse()
    }
}

pub fn session_ids(d: &DiscoverResult) -> Vec<String> {
    d.hits.iter().map(|h| h.session_id.clone()).collect()
}

pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Every message text of a read (contents and tool calls), for "is it shown anywhere" checks.
pub fn shown_text(r: &ReadResult) -> String {
    r.messages
        .iter()
        .map(|m| {
            format!(
                "{} {} {}",
                m.content,
                m.tool_name.as_deref().unwrap_or(""),
                m.tool_calls
                    .as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
