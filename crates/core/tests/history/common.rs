use chrono::{DateTime, TimeZone, Utc};
use mpa_history::{
    CapturedMessage, History, HistoryConfig, Provenance, Role, SearchContext, SessionMeta,
};
use mpa_protocol::UserId;
use mpa_redact::UserKey;
use serde_json::{Value, json};

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

    pub async fn search(&self, u: &UserKey, current: Option<&str>, args: Value) -> Value {
        let ctx = SearchContext {
            current_session_id: current.map(str::to_owned),
        };
        self.hub.session_search(u, &ctx, args).await
    }

    pub fn sql_i64(&self, u: &UserKey, sql: &str) -> i64 {
        let conn = rusqlite::Connection::open(self.hub.db_path(u)).unwrap();
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    }
}

pub fn session_ids(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {v}"))
        .iter()
        .map(|r| r["session_id"].as_str().unwrap().to_owned())
        .collect()
}

pub fn discover(q: &str) -> Value {
    json!({"query": q, "limit": 10})
}

/// `session_search` as the model calls it, on a bare [`History`] (what the tests called before
/// the tool moved to core).
pub trait SessionSearchExt {
    async fn session_search(&self, u: &UserKey, ctx: &SearchContext, args: Value) -> Value;
}

impl SessionSearchExt for History {
    async fn session_search(&self, u: &UserKey, ctx: &SearchContext, args: Value) -> Value {
        mpa_core::history::search_json(self, u, ctx.current_session_id.clone(), args).await
    }
}

/// The `legacy_import` payload of an unfinished import, `None` when none is pending.
pub fn legacy_import_state(data_dir: &std::path::Path, u: &UserKey) -> Option<Value> {
    mpa_history::legacy::legacy_import_pending(data_dir, u).then(|| {
        json!({"complete": false, "note": mpa_core::tools::session_search::LEGACY_INCOMPLETE_NOTE})
    })
}
