//! Recall over one user's evidence (spec §10, §15.6): the typed read API the host's
//! `session_search` tool is built on. Five requests — discover across sessions, search inside one
//! session, read a session, scroll around a message, browse recent sessions — each answered with
//! plain data (sessions, messages cut at their display caps, snippets, counts). How the host turns
//! that into a tool result is not this crate's business.
//!
//! Visibility rules applied to every request: hidden sources (`kanban`, `subagent`, `tool`) never
//! appear; rewound rows (`active=0, compacted=0`) are never shown; rows still in the current
//! session lineage's live context are not shown unless they were compacted out or the session
//! left the context (spec §7.3).

mod browse;
mod discover;
mod messages;
mod read;
mod sessions;

use crate::IndexStatus;
use crate::error::Result;
use crate::search::IndexCaps;
pub use crate::search::{GapScan, Sort};
use rusqlite::Connection;
use sessions::Sessions;

/// Sessions returned by discover and browse when the caller does not say.
pub const DEFAULT_LIMIT: usize = 3;
pub const MAX_LIMIT: usize = 10;
/// Messages on each side of a scroll anchor.
pub const DEFAULT_WINDOW: usize = 5;
pub const MAX_WINDOW: usize = 20;
/// Sessions a discover may exclude (each with its whole lineage).
pub const MAX_EXCLUDES: usize = 20;
/// Display caps (characters): they bound what is returned, never what is stored.
pub const BOOKEND_CAP: usize = 1200;
pub const WINDOW_CAP: usize = 4000;
pub const READ_CAP: usize = 2000;
/// A read returns the first `READ_HEAD` and the last `READ_TAIL` visible messages.
pub const READ_HEAD: usize = 20;
pub const READ_TAIL: usize = 10;
/// Characters of the first message a browse entry carries.
pub const BROWSE_TEXT_CHARS: usize = 400;
/// Matches returned by a search inside one session.
pub const IN_SESSION_MAX: usize = 20;

/// A role a search may match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchRole {
    User,
    Assistant,
    Tool,
}

impl SearchRole {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchRole::User => "user",
            SearchRole::Assistant => "assistant",
            SearchRole::Tool => "tool",
        }
    }

    /// The default: conversational rows only (tool bodies are searched on request).
    pub const DEFAULT: [SearchRole; 2] = [SearchRole::User, SearchRole::Assistant];
}

fn role_names(roles: &[SearchRole]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for r in roles {
        if !out.contains(&r.as_str()) {
            out.push(r.as_str());
        }
    }
    if out.is_empty() {
        out = SearchRole::DEFAULT.iter().map(|r| r.as_str()).collect();
    }
    out
}

/// How much context a discover loads per hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Detail {
    /// The top hit with its context, the others compact.
    #[default]
    Adaptive,
    /// Context for every hit.
    Full,
    /// Metadata and snippet only.
    Index,
}

impl Detail {
    pub fn as_str(self) -> &'static str {
        match self {
            Detail::Adaptive => "adaptive",
            Detail::Full => "full",
            Detail::Index => "index",
        }
    }
}

/// Find past sessions matching `query` (one result per lineage).
#[derive(Debug, Clone)]
pub struct DiscoverRequest {
    pub query: String,
    /// 1..=[`MAX_LIMIT`] (clamped).
    pub limit: usize,
    pub sort: Sort,
    pub detail: Detail,
    /// Empty: [`SearchRole::DEFAULT`].
    pub roles: Vec<SearchRole>,
    /// Session start time bounds (epoch seconds): `after` inclusive, `before` exclusive.
    pub after: Option<f64>,
    pub before: Option<f64>,
    /// Sessions already seen; their whole lineage is excluded.
    pub exclude_session_ids: Vec<String>,
}

impl DiscoverRequest {
    pub fn new(query: impl Into<String>) -> Self {
        Self {
            query: query.into(),
            limit: DEFAULT_LIMIT,
            sort: Sort::Relevance,
            detail: Detail::Adaptive,
            roles: Vec::new(),
            after: None,
            before: None,
            exclude_session_ids: Vec::new(),
        }
    }
}

/// One recall request.
#[derive(Debug, Clone)]
pub enum SearchRequest {
    Discover(DiscoverRequest),
    /// Search inside one session, compacted rows included.
    InSession {
        session_id: String,
        query: String,
        roles: Vec<SearchRole>,
        sort: Sort,
    },
    /// The first [`READ_HEAD`] and last [`READ_TAIL`] visible messages of a session.
    Read {
        session_id: String,
    },
    /// `window` visible messages on each side of `around_message_id` (rebound within the lineage).
    Scroll {
        session_id: String,
        around_message_id: i64,
        window: usize,
    },
    /// Recently active sessions.
    Browse {
        limit: usize,
    },
}

impl SearchRequest {
    /// The request's search terms, if it has any (discover and search inside one session).
    pub fn query(&self) -> Option<&str> {
        match self {
            SearchRequest::Discover(d) => Some(&d.query),
            SearchRequest::InSession { query, .. } => Some(query),
            SearchRequest::Read { .. }
            | SearchRequest::Scroll { .. }
            | SearchRequest::Browse { .. } => None,
        }
    }
}

/// A request that named something not in the caller's visible history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    SessionNotFound,
    AnchorNotInHistory,
    AnchorNotInSession,
}

impl Miss {
    pub fn code(self) -> &'static str {
        match self {
            Miss::SessionNotFound => "session_not_found",
            Miss::AnchorNotInHistory => "anchor_not_in_history",
            Miss::AnchorNotInSession => "anchor_not_in_session",
        }
    }
}

/// One `sessions` row.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    pub id: String,
    pub source: String,
    pub title: String,
    pub model: String,
    pub started_at: f64,
    pub last_active: f64,
    /// Empty when the session has no parent.
    pub parent_session_id: String,
    pub end_reason: String,
    pub message_count: i64,
}

/// One message as shown: `content` is cut at the request's display cap.
#[derive(Debug, Clone, PartialEq)]
pub struct ShownMessage {
    pub id: i64,
    pub role: String,
    pub content: String,
    pub timestamp: f64,
    pub tool_name: Option<String>,
    /// Parsed JSON when the stored text is JSON, else the text itself.
    pub tool_calls: Option<serde_json::Value>,
    pub tool_call_id: Option<String>,
    pub provenance: String,
    /// The message the window is centred on.
    pub anchor: bool,
    /// The full length in characters when `content` was cut at the display cap.
    pub original_chars: Option<i64>,
}

/// Visible messages around an anchor.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageWindow {
    pub messages: Vec<ShownMessage>,
    pub returned_before: usize,
    pub returned_after: usize,
    /// Every visible message before/after the anchor in its session.
    pub total_before: i64,
    pub total_after: i64,
}

/// How much of a discover hit was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitDetail {
    Full,
    Compact,
    Index,
}

impl HitDetail {
    pub fn as_str(self) -> &'static str {
        match self {
            HitDetail::Full => "full",
            HitDetail::Compact => "compact",
            HitDetail::Index => "index",
        }
    }
}

/// What matched in a discover hit.
#[derive(Debug, Clone, PartialEq)]
pub enum Snippet {
    /// The session's title matched the query (this title).
    Title(String),
    /// Text around the match (`>>>`/`<<<` mark the terms on index routes).
    Text(String),
}

/// The context loaded for a full or compact hit.
#[derive(Debug, Clone, PartialEq)]
pub struct HitContext {
    /// First and last messages of the session outside the window (full only).
    pub bookend_start: Vec<ShownMessage>,
    /// The window around the match (full) or the matching message alone (compact).
    pub messages: Vec<ShownMessage>,
    pub bookend_end: Vec<ShownMessage>,
    pub messages_before: i64,
    pub messages_after: i64,
    pub returned_before: usize,
    pub returned_after: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiscoverHit {
    pub session_id: String,
    /// The hit session's start time.
    pub started_at: f64,
    /// Source, model and title of the lineage root.
    pub source: String,
    pub model: String,
    pub title: String,
    /// `user`, `assistant`, `tool`, or `session_title` for a title match.
    pub matched_role: String,
    pub match_message_id: i64,
    pub snippet: Snippet,
    pub detail: HitDetail,
    /// `None` for [`HitDetail::Index`].
    pub context: Option<HitContext>,
    /// The lineage root when it is not the hit session itself.
    pub lineage_root: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiscoverResult {
    pub query: String,
    pub detail: Detail,
    pub hits: Vec<DiscoverHit>,
    /// The route that answered (`fts5`, `fts5_or`, `cjk`, `trigram`, `like`, `empty`).
    pub search_path: &'static str,
    /// Candidate rows a discover considers at most, and whether this one reached it.
    pub candidate_limit: usize,
    pub candidate_limit_reached: bool,
    pub gap_scan: Option<GapScan>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InSessionMatch {
    pub message_id: i64,
    pub role: String,
    pub timestamp: f64,
    pub active: bool,
    pub compacted: bool,
    pub snippet: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InSessionResult {
    pub session_id: String,
    pub query: String,
    pub matches: Vec<InSessionMatch>,
    pub search_path: &'static str,
    pub gap_scan: Option<GapScan>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReadResult {
    pub session: SessionInfo,
    /// Every visible message of the session.
    pub message_count: i64,
    /// Whether the middle was left out.
    pub truncated: bool,
    pub messages: Vec<ShownMessage>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScrollResult {
    /// The session that owns the anchor.
    pub session_id: String,
    /// The session the caller named (same lineage; differs when the anchor was rebound).
    pub requested_session_id: String,
    pub around_message_id: i64,
    pub window_radius: usize,
    pub window: MessageWindow,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BrowseEntry {
    pub session_id: String,
    pub title: String,
    pub source: String,
    pub started_at: f64,
    pub last_active: f64,
    pub message_count: i64,
    /// The first [`BROWSE_TEXT_CHARS`] characters of the first user message (else of the first
    /// visible message).
    pub first_text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SearchOutcome {
    Discover(DiscoverResult),
    InSession(InSessionResult),
    Read(ReadResult),
    Scroll(ScrollResult),
    Browse(Vec<BrowseEntry>),
    Miss(Miss),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SearchResponse {
    pub outcome: SearchOutcome,
    pub index_status: IndexStatus,
    /// A legacy import is unfinished: older evidence may still be missing.
    pub legacy_import_pending: bool,
}

/// Run one request against one user's database (inside a read snapshot).
pub(crate) fn run(
    conn: &Connection,
    current_session_id: Option<&str>,
    req: &SearchRequest,
    lists: Option<(&crate::rank::SharedLists, u64)>,
    budget: &crate::budget::Budget,
) -> Result<(SearchOutcome, IndexStatus)> {
    let states = crate::backfill::states(conn)?;
    let caps = IndexCaps {
        fts: states[0],
        trigram: states[1],
        cjk: states[2],
        lists,
        budget,
    };
    let mut sessions = Sessions::new(conn);
    let current_root = match current_session_id.filter(|s| !s.is_empty()) {
        Some(cur) => Some(sessions.root(cur)?),
        None => None,
    };
    let current_root = current_root.as_deref();
    let outcome = match req {
        SearchRequest::Discover(d) => {
            discover::discover(conn, &mut sessions, current_root, d, caps)?
        }
        SearchRequest::InSession {
            session_id,
            query,
            roles,
            sort,
        } => discover::in_session(conn, &mut sessions, session_id, query, roles, *sort, caps)?,
        SearchRequest::Read { session_id } => read::read(conn, &mut sessions, session_id)?,
        SearchRequest::Scroll {
            session_id,
            around_message_id,
            window,
        } => read::scroll(
            conn,
            &mut sessions,
            current_root,
            session_id,
            *around_message_id,
            (*window).clamp(1, MAX_WINDOW),
        )?,
        SearchRequest::Browse { limit } => SearchOutcome::Browse(browse::browse(
            conn,
            current_session_id.unwrap_or_default(),
            (*limit).clamp(1, MAX_LIMIT),
        )?),
    };
    Ok((outcome, IndexStatus::of(states)))
}
