//! Legacy importers: copy evidence out of a MoviePilot installation (its per-user `state.db`
//! files and the `agentchat.agent_messages` recovery snapshots in its main database) or out of a
//! Hermes `state.db` into this host's per-user stores.
//!
//! Public API: [`import_hermes`], [`MoviePilotSource`] + [`import_moviepilot`],
//! [`legacy_import_state`], [`ImportSummary`], [`ImportProgress`], [`legacy_identity`].
//!
//! Invariants:
//! - Every imported row is `provenance = legacy_snapshot`. A source timestamp is kept as is;
//!   a source without one gives `ts: None`, so the store dates the row from the session (never
//!   from the import run).
//! - Resumable: a cursor (last source row id per source) is saved atomically after each page
//!   (each snapshot record) has been appended, never before. A killed run re-reads at most one
//!   page, and the store's `(session_id, message_uid)` uniqueness turns that into duplicates.
//! - Idempotent: message ids are derived from the source (Hermes row id, MoviePilot
//!   `message_uid`, LangChain id or MoviePilot's own legacy identity), so a re-run — even with
//!   the cursor files deleted — inserts nothing new.
//! - Source databases are opened read-only and never written.
//! - Cursor files: `<history>/users/<key>/import-hermes-cursor.json` (per user) and
//!   `<history>/import-moviepilot-cursor.json` (one MoviePilot import spans many users). While
//!   one of them says `complete: false`, [`legacy_import_state`] reports the import unfinished.
//!
//! Source reads are short synchronous page reads on the calling task; every write goes through
//! [`HistoryHub`] (validation, redaction, its blocking pool).

use crate::error::{HistoryError, Result, io_err};
use crate::{CapturedMessage, HistoryHub, Provenance, Role, SessionMeta, store};
use mpa_protocol::UserKey;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Source rows read per page (state.db messages).
const PAGE_ROWS: i64 = 500;
/// Snapshot records read per page (each is one whole conversation).
const SNAPSHOT_PAGE: i64 = 20;
/// Prefix Hermes puts before JSON-encoded (list/dict) content.
const HERMES_JSON_SENTINEL: &str = "\u{0}json:";
const HERMES_CURSOR: &str = "import-hermes-cursor.json";
const MOVIEPILOT_CURSOR: &str = "import-moviepilot-cursor.json";

/// Shown with `legacy_import{complete:false}` while an import is unfinished.
pub const LEGACY_INCOMPLETE_NOTE: &str = "A legacy history import is unfinished: misses are \
inconclusive while incomplete. Only surviving legacy records can be imported; messages \
discarded earlier are unavailable.";

/// What one import run did. `skipped` maps a reason to a count of source messages (or, for
/// `unmapped_user_dir`, of directories).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImportSummary {
    pub source: String,
    /// Distinct users written to.
    pub users: usize,
    /// Distinct sessions that received at least one message in this run (new or duplicate).
    pub sessions: usize,
    pub messages_imported: usize,
    pub duplicates: usize,
    pub skipped: BTreeMap<String, usize>,
    /// True when every source was drained.
    pub complete: bool,
}

impl ImportSummary {
    fn skip(&mut self, reason: &str, n: usize) {
        if n > 0 {
            *self.skipped.entry(reason.to_owned()).or_default() += n;
        }
    }

    pub fn skipped_total(&self) -> usize {
        self.skipped.values().sum()
    }
}

/// Progress in source rows (state.db messages plus snapshot records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportProgress {
    pub done: u64,
    pub total: u64,
    pub imported: u64,
}

// ---------------------------------------------------------------------------------------------
// Cursor files

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct CursorFile {
    version: u32,
    /// False from the start of a run until every source of that run is drained.
    complete: bool,
    updated_at: String,
    #[serde(default)]
    sources: BTreeMap<String, SourceCursor>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SourceCursor {
    last_id: i64,
    complete: bool,
}

fn history_root(data_dir: &Path) -> PathBuf {
    data_dir.join("agent").join("runtime").join("history")
}

fn load_cursor(path: &Path) -> Result<CursorFile> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            HistoryError::InvalidInput(format!(
                "import cursor {} is unreadable ({e}); delete it to restart the import \
                 (re-importing is idempotent)",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(CursorFile {
            version: 1,
            ..CursorFile::default()
        }),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// Write-to-temp, fsync, rename: a crash leaves either the old or the new cursor, never a torn one.
fn save_cursor(path: &Path, cursor: &mut CursorFile) -> Result<()> {
    use std::io::Write as _;
    cursor.version = 1;
    cursor.updated_at = chrono::Utc::now().to_rfc3339();
    let bytes = serde_json::to_vec_pretty(cursor)
        .map_err(|e| HistoryError::InvalidInput(format!("cannot encode import cursor: {e}")))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    ensure_private_dir(dir)?;
    let tmp = path.with_extension("json.tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp).map_err(io_err(&tmp))?;
    f.write_all(&bytes).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io_err(path))?;
    Ok(())
}

fn ensure_private_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        b.mode(0o700);
    }
    b.create(dir).map_err(io_err(dir))
}

/// `{complete:false, note}` while an import that can affect `user` is unfinished (a cursor file
/// present and not complete, or unreadable); `None` when there is nothing to report.
pub fn legacy_import_state(data_dir: &Path, user: &UserKey) -> Option<Value> {
    let mut files = vec![history_root(data_dir).join(MOVIEPILOT_CURSOR)];
    let user_dir = store::users_root(data_dir).join(user.as_str());
    if let Ok(entries) = std::fs::read_dir(&user_dir) {
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("import-") && name.ends_with("-cursor.json") {
                files.push(e.path());
            }
        }
    }
    let unfinished = files.iter().filter(|p| p.is_file()).any(|p| {
        std::fs::read(p)
            .ok()
            .and_then(|b| serde_json::from_slice::<CursorFile>(&b).ok())
            .is_none_or(|c| !c.complete)
    });
    unfinished.then(|| serde_json::json!({"complete": false, "note": LEGACY_INCOMPLETE_NOTE}))
}

// ---------------------------------------------------------------------------------------------
// Reading source databases

fn open_source(path: &Path) -> Result<Connection> {
    if !path.is_file() {
        return Err(HistoryError::InvalidInput(format!(
            "{} does not exist or is not a file",
            path.display()
        )));
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    // Fails here, not mid-import, when the file is not a database.
    conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })
    .map_err(|e| {
        HistoryError::InvalidInput(format!(
            "{} is not a readable SQLite database: {e}",
            path.display()
        ))
    })?;
    Ok(conn)
}

fn columns(conn: &Connection, table: &str) -> Result<HashSet<String>> {
    let mut st = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names = st
        .query_map([table], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<HashSet<_>>>()?;
    Ok(names)
}

fn text(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
    }
}

fn real(v: ValueRef<'_>) -> Option<f64> {
    let f = match v {
        ValueRef::Integer(i) => i as f64,
        ValueRef::Real(f) => f,
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok()?,
        _ => return None,
    };
    (f.is_finite() && f > 0.0).then_some(f)
}

fn epoch_to_dt(f: f64) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp_micros((f * 1e6).round() as i64)
}

/// Parse a MoviePilot time string: RFC 3339, or a naive `YYYY-MM-DD HH:MM:SS[.f]` which
/// MoviePilot writes in its local time zone (taken to be this machine's).
fn parse_mp_time(s: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&chrono::Utc));
    }
    for fmt in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
        if let Ok(n) = chrono::NaiveDateTime::parse_from_str(s, fmt) {
            use chrono::TimeZone as _;
            return chrono::Local
                .from_local_datetime(&n)
                .earliest()
                .map(|t| t.with_timezone(&chrono::Utc));
        }
    }
    None
}

/// Which dialect of `sessions`/`messages` a state.db speaks (they differ in message identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Hermes,
    MoviePilot,
}

/// One message row of a source state.db, joined with its session.
struct SrcRow {
    id: i64,
    session_id: String,
    uid: String,
    role: String,
    content: String,
    tool_call_id: String,
    tool_name: String,
    tool_calls: String,
    ts: Option<f64>,
    active: bool,
    compacted: bool,
    hidden: bool,
    source: String,
    title: String,
    model: String,
    parent: String,
    started: Option<f64>,
    end_reason: String,
}

/// A page reader over `messages ⟕ sessions` that adapts to the columns the file really has
/// (old Hermes schemas lack `active`, `compacted`, `display_kind`, …).
struct StateDbReader {
    conn: Connection,
    sql: String,
}

impl StateDbReader {
    fn open(path: &Path, dialect: Dialect) -> Result<Self> {
        let conn = open_source(path)?;
        let m = columns(&conn, "messages")?;
        let s = columns(&conn, "sessions")?;
        let kind = match dialect {
            Dialect::Hermes => "Hermes",
            Dialect::MoviePilot => "MoviePilot",
        };
        for need in ["id", "session_id", "role", "content"] {
            if !m.contains(need) {
                return Err(HistoryError::InvalidInput(format!(
                    "{} is not a {kind} state.db: table messages has no column {need}",
                    path.display()
                )));
            }
        }
        if dialect == Dialect::MoviePilot && !m.contains("message_uid") {
            return Err(HistoryError::InvalidInput(format!(
                "{} is not a MoviePilot state.db: table messages has no column message_uid",
                path.display()
            )));
        }
        let mc = |c: &str, dflt: &str| {
            if m.contains(c) {
                format!("m.{c}")
            } else {
                dflt.to_owned()
            }
        };
        let sc = |c: &str, dflt: &str| {
            if s.contains(c) {
                format!("s.{c}")
            } else {
                dflt.to_owned()
            }
        };
        let uid = match dialect {
            Dialect::Hermes => "'hermes:' || m.id".to_owned(),
            Dialect::MoviePilot => "m.message_uid".to_owned(),
        };
        let hidden = if m.contains("display_kind") {
            "COALESCE(m.display_kind = 'hidden', 0)".to_owned()
        } else {
            "0".to_owned()
        };
        let join = if s.contains("id") {
            "LEFT JOIN sessions s ON s.id = m.session_id"
        } else {
            ""
        };
        let sc = |c: &str, d: &str| {
            if join.is_empty() {
                d.to_owned()
            } else {
                sc(c, d)
            }
        };
        let sql = format!(
            "SELECT m.id, m.session_id, {uid}, m.role, m.content, {}, {}, {}, {}, {}, {}, {hidden},
                    {}, {}, {}, {}, {}, {}
             FROM messages m {join} WHERE m.id > ?1 ORDER BY m.id LIMIT ?2",
            mc("tool_call_id", "''"),
            mc("tool_name", "''"),
            mc("tool_calls", "''"),
            mc("timestamp", "NULL"),
            mc("active", "1"),
            mc("compacted", "0"),
            sc("source", "''"),
            sc("title", "''"),
            sc("model", "''"),
            sc("parent_session_id", "''"),
            sc("started_at", "NULL"),
            sc("end_reason", "''"),
        );
        Ok(Self { conn, sql })
    }

    fn remaining(&self, after: i64) -> Result<u64> {
        let n: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM messages WHERE id > ?1",
            [after],
            |r| r.get(0),
        )?;
        Ok(n.max(0) as u64)
    }

    fn page(&self, after: i64) -> Result<Vec<SrcRow>> {
        let mut st = self.conn.prepare(&self.sql)?;
        let rows = st.query_map([after, PAGE_ROWS], |r| {
            let flag = |i: usize| -> rusqlite::Result<bool> {
                Ok(match r.get_ref(i)? {
                    ValueRef::Integer(v) => v != 0,
                    ValueRef::Real(v) => v != 0.0,
                    ValueRef::Null => false,
                    _ => true,
                })
            };
            Ok(SrcRow {
                id: r.get(0)?,
                session_id: text(r.get_ref(1)?),
                uid: text(r.get_ref(2)?),
                role: text(r.get_ref(3)?),
                content: text(r.get_ref(4)?),
                tool_call_id: text(r.get_ref(5)?),
                tool_name: text(r.get_ref(6)?),
                tool_calls: text(r.get_ref(7)?),
                ts: real(r.get_ref(8)?),
                active: flag(9)?,
                compacted: flag(10)?,
                hidden: flag(11)?,
                source: text(r.get_ref(12)?),
                title: text(r.get_ref(13)?),
                model: text(r.get_ref(14)?),
                parent: text(r.get_ref(15)?),
                started: real(r.get_ref(16)?),
                end_reason: text(r.get_ref(17)?),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn tombstones(&self) -> Result<HashSet<String>> {
        if columns(&self.conn, "deleted_sessions")?.contains("id") {
            let mut st = self.conn.prepare("SELECT id FROM deleted_sessions")?;
            let ids = st
                .query_map([], |r| Ok(text(r.get_ref(0)?)))?
                .collect::<rusqlite::Result<HashSet<_>>>()?;
            return Ok(ids);
        }
        Ok(HashSet::new())
    }
}

fn non_empty(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

/// Text of Hermes content: plain, or the sentinel-prefixed JSON of a list/dict.
fn hermes_content(raw: String) -> String {
    match raw.strip_prefix(HERMES_JSON_SENTINEL) {
        Some(json) => match serde_json::from_str::<Value>(json) {
            Ok(v) => content_text(&v),
            Err(_) => json.to_owned(),
        },
        None => raw,
    }
}

/// Keep text only: strings as they are, text blocks of a list joined by newlines (images and
/// other binary blocks are dropped).
fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Array(items) => items
            .iter()
            .filter_map(|b| match b {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("text") => {
                    Some(o.get("text").map(content_text).unwrap_or_default())
                }
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// Message ids longer than the store accepts are replaced by a stable digest of themselves.
fn bounded_uid(uid: String) -> String {
    if uid.chars().count() <= store::MAX_SESSION_ID_CHARS {
        uid
    } else {
        format!(
            "legacy-long:{}",
            hex::encode(Sha256::digest(uid.as_bytes()))
        )
    }
}

/// A converted source row, or the reason it is skipped.
struct Converted {
    session: SessionMeta,
    end_reason: String,
    message: CapturedMessage,
    compacted: bool,
}

fn convert_row(row: SrcRow, dialect: Dialect) -> std::result::Result<Converted, String> {
    let role =
        store::evidence_role(row.role.trim()).ok_or_else(|| format!("role_{}", row.role.trim()))?;
    if row.hidden {
        return Err("hidden_display_row".into());
    }
    if !row.active && !row.compacted {
        return Err("rewound".into());
    }
    if row.session_id.trim().is_empty()
        || row.session_id.chars().count() > store::MAX_SESSION_ID_CHARS
    {
        return Err("invalid_session_id".into());
    }
    if row.uid.trim().is_empty() {
        return Err("missing_message_id".into());
    }
    let content = match dialect {
        Dialect::Hermes => hermes_content(row.content),
        Dialect::MoviePilot => row.content,
    };
    let tool_calls = non_empty(&row.tool_calls)
        .map(|t| serde_json::from_str::<Value>(&t).unwrap_or(Value::String(t)))
        .filter(|v| !matches!(v, Value::Array(a) if a.is_empty()));
    let parent =
        non_empty(&row.parent).filter(|p| p.chars().count() <= store::MAX_SESSION_ID_CHARS);
    Ok(Converted {
        session: SessionMeta {
            session_id: row.session_id,
            source: row.source.trim().to_owned(),
            title: non_empty(&row.title),
            parent_session_id: parent,
            model: non_empty(&row.model),
            started_at: row.started.and_then(epoch_to_dt),
        },
        end_reason: row.end_reason.trim().to_owned(),
        message: CapturedMessage {
            message_uid: bounded_uid(row.uid),
            role,
            content,
            tool_name: non_empty(&row.tool_name),
            tool_call_id: non_empty(&row.tool_call_id),
            tool_calls,
            ts: row.ts.and_then(epoch_to_dt),
            provenance: Provenance::LegacySnapshot,
        },
        compacted: !row.active && row.compacted,
    })
}

/// Per-run bookkeeping shared by all sources.
#[derive(Default)]
struct RunState {
    summary: ImportSummary,
    sessions: HashSet<(String, String)>,
    users: HashSet<String>,
    ended: HashSet<(String, String)>,
    done: u64,
    total: u64,
}

impl RunState {
    fn progress(&self) -> ImportProgress {
        ImportProgress {
            done: self.done,
            total: self.total,
            imported: self.summary.messages_imported as u64,
        }
    }

    fn finish(mut self, complete: bool) -> ImportSummary {
        self.summary.sessions = self.sessions.len();
        self.summary.users = self.users.len();
        self.summary.complete = complete;
        self.summary
    }
}

/// Group messages into per-session batches of at most [`store::MAX_BATCH`] (source order kept)
/// and append them in one transaction; account for the outcome.
async fn append_grouped(
    hub: &HistoryHub,
    user: &UserKey,
    items: Vec<(SessionMeta, CapturedMessage)>,
    run: &mut RunState,
) -> Result<()> {
    let mut batches: Vec<(SessionMeta, Vec<CapturedMessage>)> = Vec::new();
    for (meta, msg) in items {
        match batches.last_mut() {
            Some((m, msgs)) if m.session_id == meta.session_id && msgs.len() < store::MAX_BATCH => {
                msgs.push(msg)
            }
            _ => batches.push((meta, vec![msg])),
        }
    }
    if batches.is_empty() {
        return Ok(());
    }
    let sizes: Vec<(String, usize)> = batches
        .iter()
        .map(|(m, v)| (m.session_id.clone(), v.len()))
        .collect();
    let reports = hub.append_many(user, batches).await?;
    for ((sid, n), r) in sizes.into_iter().zip(reports) {
        if r.tombstoned {
            run.summary.skip("tombstoned_session", n);
            continue;
        }
        run.summary.messages_imported += r.inserted;
        run.summary.duplicates += r.duplicates;
        run.sessions.insert((user.as_str().to_owned(), sid));
        run.users.insert(user.as_str().to_owned());
    }
    Ok(())
}

/// Drain one state.db from `cursor` into `user`, saving the cursor after every page.
#[expect(
    clippy::too_many_arguments,
    reason = "each argument is a distinct part of the call"
)]
async fn import_state_db(
    hub: &HistoryHub,
    user: &UserKey,
    reader: &StateDbReader,
    dialect: Dialect,
    source_key: &str,
    cursor_path: &Path,
    cursor: &mut CursorFile,
    run: &mut RunState,
    progress: &mut dyn FnMut(ImportProgress),
) -> Result<()> {
    loop {
        let after = cursor
            .sources
            .get(source_key)
            .map(|c| c.last_id)
            .unwrap_or(0);
        let rows = reader.page(after)?;
        let Some(last) = rows.last().map(|r| r.id) else {
            break;
        };
        let n = rows.len() as u64;
        let mut items = Vec::with_capacity(rows.len());
        let mut compacted: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut ends: Vec<(String, String)> = Vec::new();
        for row in rows {
            match convert_row(row, dialect) {
                Ok(c) => {
                    if c.compacted {
                        compacted
                            .entry(c.session.session_id.clone())
                            .or_default()
                            .push(c.message.message_uid.clone());
                    }
                    if !c.end_reason.is_empty()
                        && run
                            .ended
                            .insert((user.as_str().to_owned(), c.session.session_id.clone()))
                    {
                        ends.push((c.session.session_id.clone(), c.end_reason.clone()));
                    }
                    items.push((c.session, c.message));
                }
                Err(reason) => run.summary.skip(&reason, 1),
            }
        }
        append_grouped(hub, user, items, run).await?;
        for (sid, uids) in compacted {
            hub.mark_compacted(user, &sid, uids).await?;
        }
        for (sid, reason) in ends {
            hub.end_session(user, &sid, &reason).await?;
        }
        let entry = cursor.sources.entry(source_key.to_owned()).or_default();
        entry.last_id = last;
        save_cursor(cursor_path, cursor)?;
        run.done += n;
        progress(run.progress());
    }
    cursor
        .sources
        .entry(source_key.to_owned())
        .or_default()
        .complete = true;
    Ok(())
}

fn canonical_key(path: &Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

fn mark_started(cursor: &mut CursorFile, keys: &[String]) {
    cursor.complete = false;
    for k in keys {
        cursor.sources.entry(k.clone()).or_default().complete = false;
    }
}

// ---------------------------------------------------------------------------------------------
// Hermes

/// Import a Hermes `state.db` (tables `sessions` and `messages`) into `user`'s history.
/// Resumes from `users/<key>/import-hermes-cursor.json`; `system`/`session_meta` rows, hidden
/// display rows and rewound rows are skipped (with reasons); compacted rows stay searchable
/// archives; sessions' end reasons are carried over.
pub async fn import_hermes(
    hub: &HistoryHub,
    state_db: &Path,
    user: &UserKey,
    progress: &mut dyn FnMut(ImportProgress),
) -> Result<ImportSummary> {
    store::check_user_key(user)?;
    let reader = StateDbReader::open(state_db, Dialect::Hermes)?;
    // Opening the store creates the user's private directory the cursor lives in.
    hub.status(user).await?;
    let cursor_path = store::users_root(&hub.config().data_dir)
        .join(user.as_str())
        .join(HERMES_CURSOR);
    let mut cursor = load_cursor(&cursor_path)?;
    let key = canonical_key(state_db);
    mark_started(&mut cursor, std::slice::from_ref(&key));
    save_cursor(&cursor_path, &mut cursor)?;
    let after = cursor.sources.get(&key).map(|c| c.last_id).unwrap_or(0);
    let mut run = RunState {
        total: reader.remaining(after)?,
        ..RunState::default()
    };
    run.summary.source = "hermes".into();
    progress(run.progress());
    import_state_db(
        hub,
        user,
        &reader,
        Dialect::Hermes,
        &key,
        &cursor_path,
        &mut cursor,
        &mut run,
        progress,
    )
    .await?;
    cursor.complete = cursor.sources.values().all(|c| c.complete);
    save_cursor(&cursor_path, &mut cursor)?;
    Ok(run.finish(true))
}

// ---------------------------------------------------------------------------------------------
// MoviePilot

/// MoviePilot's per-user directory key: SHA-256 hex of the trimmed user id.
fn mp_user_key(id: &str) -> String {
    hex::encode(Sha256::digest(id.trim().as_bytes()))
}

fn is_internal(id: &str) -> bool {
    let t = id.trim();
    t.is_empty() || t.eq_ignore_ascii_case("system")
}

/// A MoviePilot installation opened for import: which per-user state.db belongs to which user
/// name, and where the snapshots are.
#[derive(Debug)]
pub struct MoviePilotSource {
    config_dir: PathBuf,
    main_db: Option<PathBuf>,
    /// (MoviePilot directory key, state.db path, resolved user name if known).
    user_dbs: Vec<(String, PathBuf, Option<String>)>,
    /// MoviePilot user id (trimmed) → user name.
    names: HashMap<String, String>,
}

impl MoviePilotSource {
    /// Inspect `config_dir`: `user.db` (tables `user` and `agentchat`) and
    /// `agent/runtime/history/users/<sha256(user id)>/state.db`. A state.db whose key matches
    /// no user id or name known to `user.db` is reported as `unmapped_user_dir` at import.
    pub fn open(config_dir: &Path) -> Result<Self> {
        let main = config_dir.join("user.db");
        let main_db = main.is_file().then_some(main);
        let mut names: HashMap<String, String> = HashMap::new();
        if let Some(db) = &main_db {
            let conn = open_source(db)?;
            if columns(&conn, "user")?.is_superset(&["id", "name"].map(String::from).into()) {
                let mut st = conn.prepare("SELECT id, name FROM \"user\" ORDER BY id")?;
                let rows = st.query_map([], |r| Ok((text(r.get_ref(0)?), text(r.get_ref(1)?))))?;
                for row in rows {
                    let (id, name) = row?;
                    let (id, name) = (id.trim().to_owned(), name.trim().to_owned());
                    if name.is_empty() {
                        continue;
                    }
                    if !id.is_empty() {
                        names.entry(id).or_insert_with(|| name.clone());
                    }
                    names.entry(name.clone()).or_insert(name);
                }
            }
            let ac = columns(&conn, "agentchat")?;
            if ac.contains("user_id") {
                let uname = if ac.contains("username") {
                    "username"
                } else {
                    "''"
                };
                let sql = format!("SELECT DISTINCT user_id, {uname} FROM agentchat");
                let mut st = conn.prepare(&sql)?;
                let rows = st.query_map([], |r| Ok((text(r.get_ref(0)?), text(r.get_ref(1)?))))?;
                for row in rows {
                    let (id, uname) = row?;
                    let (id, uname) = (id.trim().to_owned(), uname.trim().to_owned());
                    if is_internal(&id) {
                        continue;
                    }
                    let name = if uname.is_empty() { id.clone() } else { uname };
                    names.entry(id).or_insert(name);
                }
            }
        }
        let by_key: HashMap<String, String> = names
            .iter()
            .map(|(id, name)| (mp_user_key(id), name.clone()))
            .collect();
        let users_dir = history_root(config_dir).join("users");
        let mut user_dbs = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&users_dir) {
            for e in entries.flatten() {
                let key = e.file_name().to_string_lossy().into_owned();
                let db = e.path().join("state.db");
                let well_formed = key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit());
                if well_formed && db.is_file() {
                    let name = by_key.get(&key.to_ascii_lowercase()).cloned();
                    user_dbs.push((key, db, name));
                }
            }
        }
        user_dbs.sort();
        if main_db.is_none() && user_dbs.is_empty() {
            return Err(HistoryError::InvalidInput(format!(
                "no MoviePilot data under {}: neither user.db nor \
                 agent/runtime/history/users/<key>/state.db exists",
                config_dir.display()
            )));
        }
        Ok(Self {
            config_dir: config_dir.to_path_buf(),
            main_db,
            user_dbs,
            names,
        })
    }

    /// Every user name this import may write to; resolve each to a [`UserKey`] (e.g. create
    /// local users by name) and pass the map to [`import_moviepilot`].
    pub fn user_names(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .user_dbs
            .iter()
            .filter_map(|(_, _, n)| n.clone())
            .chain(self.names.values().cloned())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Per-user state.db files found, with the user name each maps to (`None`: unmapped).
    pub fn user_databases(&self) -> Vec<(PathBuf, Option<String>)> {
        self.user_dbs
            .iter()
            .map(|(_, p, n)| (p.clone(), n.clone()))
            .collect()
    }

    fn name_for(&self, user_id: &str, username: &str) -> Option<String> {
        if !user_id.trim().is_empty() {
            if is_internal(user_id) {
                return None;
            }
            return self.names.get(user_id.trim()).cloned();
        }
        non_empty(username)
    }
}

/// One `agentchat` row.
struct SnapshotRecord {
    id: i64,
    session_id: String,
    user_id: String,
    username: String,
    channel: String,
    title: String,
    messages: String,
    created_at: String,
    updated_at: String,
}

fn snapshot_page(
    conn: &Connection,
    cols: &HashSet<String>,
    after: i64,
) -> Result<Vec<SnapshotRecord>> {
    let c = |name: &str| {
        if cols.contains(name) {
            name.to_owned()
        } else {
            "''".to_owned()
        }
    };
    let sql = format!(
        "SELECT id, {}, {}, {}, {}, {}, {}, {}, {} FROM agentchat WHERE id > ?1 ORDER BY id LIMIT ?2",
        c("session_id"),
        c("user_id"),
        c("username"),
        c("channel"),
        c("title"),
        c("agent_messages"),
        c("created_at"),
        c("updated_at"),
    );
    let mut st = conn.prepare(&sql)?;
    let rows = st.query_map([after, SNAPSHOT_PAGE], |r| {
        Ok(SnapshotRecord {
            id: r.get(0)?,
            session_id: text(r.get_ref(1)?),
            user_id: text(r.get_ref(2)?),
            username: text(r.get_ref(3)?),
            channel: text(r.get_ref(4)?),
            title: text(r.get_ref(5)?),
            messages: text(r.get_ref(6)?),
            created_at: text(r.get_ref(7)?),
            updated_at: text(r.get_ref(8)?),
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Python's `json.dumps(v, ensure_ascii=False, sort_keys=True)` with default separators, so
/// our legacy identities equal the ones MoviePilot computed (spec §6.1).
fn py_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (_, Some(u), _) => out.push_str(&u.to_string()),
            (_, _, Some(f)) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 => {
                out.push_str(&format!("{f:.1}"))
            }
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => py_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_str(k, out);
                out.push_str(": ");
                if let Some(v) = map.get(k) {
                    py_json(v, out);
                }
            }
            out.push('}');
        }
    }
}

fn py_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// MoviePilot's identity for a snapshot message without an id: `legacy:` + SHA-256 of the
/// Python JSON of `[session_id, position, type, content]` (sorted keys, non-ASCII kept).
pub fn legacy_identity(session_id: &str, position: usize, kind: &str, content: &Value) -> String {
    let arr = Value::Array(vec![
        Value::String(session_id.to_owned()),
        Value::from(position as u64),
        Value::String(kind.to_owned()),
        content.clone(),
    ]);
    let mut s = String::new();
    py_json(&arr, &mut s);
    format!("legacy:{}", hex::encode(Sha256::digest(s.as_bytes())))
}

/// Convert one LangChain message dict (`{type, data:{…}}` as `messages_to_dict` writes it, or
/// the flat form) into evidence, or the reason it is skipped.
fn convert_lc(
    session_id: &str,
    position: usize,
    raw: &Value,
) -> std::result::Result<CapturedMessage, String> {
    let outer = raw.as_object().ok_or("invalid_snapshot_message")?;
    let data = outer
        .get("data")
        .and_then(Value::as_object)
        .unwrap_or(outer);
    let kind = outer
        .get("type")
        .or_else(|| data.get("type"))
        .and_then(Value::as_str)
        .ok_or("invalid_snapshot_message")?;
    let role = match kind {
        "human" => Role::User,
        "ai" => Role::Assistant,
        "tool" => Role::Tool,
        other => return Err(format!("role_{other}")),
    };
    let kwargs = data.get("additional_kwargs").and_then(Value::as_object);
    if kwargs
        .and_then(|k| k.get("lc_source"))
        .and_then(Value::as_str)
        == Some("summarization")
    {
        return Err("synthetic_summary".into());
    }
    let content = data
        .get("content")
        .cloned()
        .unwrap_or(Value::String(String::new()));
    let uid = match data.get("id").and_then(Value::as_str).and_then(non_empty) {
        Some(id) => bounded_uid(id),
        None => legacy_identity(session_id, position, kind, &content),
    };
    let non_empty_list = |v: Option<&Value>| {
        v.filter(|v| matches!(v, Value::Array(a) if !a.is_empty()))
            .cloned()
    };
    let tool_calls = if role == Role::Assistant {
        non_empty_list(data.get("tool_calls"))
            .or_else(|| non_empty_list(kwargs.and_then(|k| k.get("tool_calls"))))
    } else {
        None
    };
    let str_field = |k: &str| data.get(k).and_then(Value::as_str).and_then(non_empty);
    Ok(CapturedMessage {
        message_uid: uid,
        role,
        content: content_text(&content),
        tool_name: str_field("name"),
        tool_call_id: if role == Role::Tool {
            str_field("tool_call_id")
        } else {
            None
        },
        tool_calls,
        ts: None,
        provenance: Provenance::LegacySnapshot,
    })
}

/// Import a MoviePilot installation: first every mapped per-user `state.db` (exact
/// timestamps), then the `agentchat.agent_messages` snapshots (no per-message timestamps, so
/// `ts: None`), paged by primary key. `users` maps the names of
/// [`MoviePilotSource::user_names`] to our user keys; unresolved names are skipped with a
/// reason. Messages MoviePilot already migrated from a snapshot into its state.db dedupe by
/// id. Snapshots of sessions deleted in MoviePilot's state.db are not resurrected.
pub async fn import_moviepilot(
    hub: &HistoryHub,
    src: &MoviePilotSource,
    users: &HashMap<String, UserKey>,
    progress: &mut dyn FnMut(ImportProgress),
) -> Result<ImportSummary> {
    for key in users.values() {
        store::check_user_key(key)?;
    }
    let root = history_root(&hub.config().data_dir);
    ensure_private_dir(&root)?;
    let cursor_path = root.join(MOVIEPILOT_CURSOR);
    let mut cursor = load_cursor(&cursor_path)?;
    let base = canonical_key(&src.config_dir);
    let snap_key = format!("{base}::user.db#agentchat");
    let db_key = |k: &str| format!("{base}::state.db/{k}");

    let mut run = RunState::default();
    run.summary.source = "moviepilot".into();
    let mut readers = Vec::new();
    let mut keys = Vec::new();
    // (our user key, session id) pairs deleted in MoviePilot: their snapshots stay dead.
    let mut deleted: HashSet<(String, String)> = HashSet::new();
    for (mp_key, path, name) in &src.user_dbs {
        let target = name.as_ref().and_then(|n| users.get(n));
        let Some(target) = target else {
            run.summary.skip("unmapped_user_dir", 1);
            continue;
        };
        let reader = StateDbReader::open(path, Dialect::MoviePilot)?;
        for sid in reader.tombstones()? {
            deleted.insert((target.as_str().to_owned(), sid));
        }
        let k = db_key(mp_key);
        let after = cursor.sources.get(&k).map(|c| c.last_id).unwrap_or(0);
        run.total += reader.remaining(after)?;
        keys.push(k.clone());
        readers.push((target.clone(), reader, k));
    }
    let main = match &src.main_db {
        Some(db) => {
            let conn = open_source(db)?;
            let cols = columns(&conn, "agentchat")?;
            if cols.contains("id") {
                let after = cursor
                    .sources
                    .get(&snap_key)
                    .map(|c| c.last_id)
                    .unwrap_or(0);
                let n: i64 = conn.query_row(
                    "SELECT COUNT(*) FROM agentchat WHERE id > ?1",
                    [after],
                    |r| r.get(0),
                )?;
                run.total += n.max(0) as u64;
                keys.push(snap_key.clone());
                Some((conn, cols))
            } else {
                None
            }
        }
        None => None,
    };
    mark_started(&mut cursor, &keys);
    save_cursor(&cursor_path, &mut cursor)?;
    progress(run.progress());

    for (target, reader, k) in &readers {
        import_state_db(
            hub,
            target,
            reader,
            Dialect::MoviePilot,
            k,
            &cursor_path,
            &mut cursor,
            &mut run,
            progress,
        )
        .await?;
        save_cursor(&cursor_path, &mut cursor)?;
    }

    if let Some((conn, cols)) = &main {
        loop {
            let after = cursor
                .sources
                .get(&snap_key)
                .map(|c| c.last_id)
                .unwrap_or(0);
            let records = snapshot_page(conn, cols, after)?;
            if records.is_empty() {
                break;
            }
            for rec in records {
                import_snapshot(hub, src, users, &deleted, &rec, &mut run).await?;
                cursor.sources.entry(snap_key.clone()).or_default().last_id = rec.id;
                save_cursor(&cursor_path, &mut cursor)?;
                run.done += 1;
                progress(run.progress());
            }
        }
        cursor.sources.entry(snap_key.clone()).or_default().complete = true;
    }
    cursor.complete = cursor.sources.values().all(|c| c.complete);
    save_cursor(&cursor_path, &mut cursor)?;
    Ok(run.finish(true))
}

async fn import_snapshot(
    hub: &HistoryHub,
    src: &MoviePilotSource,
    users: &HashMap<String, UserKey>,
    deleted: &HashSet<(String, String)>,
    rec: &SnapshotRecord,
    run: &mut RunState,
) -> Result<()> {
    let parsed: Vec<Value> = match serde_json::from_str::<Value>(&rec.messages) {
        Ok(Value::Array(a)) => a,
        Ok(Value::Null) => Vec::new(),
        _ if rec.messages.trim().is_empty() => Vec::new(),
        _ => {
            run.summary.skip("invalid_snapshot_json", 1);
            return Ok(());
        }
    };
    let n = parsed.len();
    if is_internal(&rec.user_id) && rec.username.trim().is_empty() {
        run.summary.skip("internal_or_missing_user", n);
        return Ok(());
    }
    let Some(key) = src
        .name_for(&rec.user_id, &rec.username)
        .and_then(|name| users.get(&name))
    else {
        run.summary.skip("unmapped_user", n);
        return Ok(());
    };
    let sid = rec.session_id.trim();
    if sid.is_empty() || sid.chars().count() > store::MAX_SESSION_ID_CHARS {
        run.summary.skip("invalid_session_id", n);
        return Ok(());
    }
    if deleted.contains(&(key.as_str().to_owned(), sid.to_owned())) {
        run.summary.skip("deleted_in_source", n);
        return Ok(());
    }
    let meta = SessionMeta {
        session_id: sid.to_owned(),
        source: non_empty(&rec.channel)
            .map(|c| c.to_ascii_lowercase())
            .unwrap_or_else(|| "chat".into()),
        title: non_empty(&rec.title),
        parent_session_id: None,
        model: None,
        started_at: parse_mp_time(&rec.created_at).or_else(|| parse_mp_time(&rec.updated_at)),
    };
    let mut items = Vec::with_capacity(n);
    for (position, raw) in parsed.iter().enumerate() {
        match convert_lc(sid, position, raw) {
            Ok(m) => items.push((meta.clone(), m)),
            Err(reason) => run.summary.skip(&reason, 1),
        }
    }
    append_grouped(hub, key, items, run).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_json_matches_json_dumps() {
        // Expected strings are what CPython's json.dumps(..., ensure_ascii=False,
        // sort_keys=True) prints for the same values.
        let v = serde_json::json!(["s1", 0, "human", [{"type": "text", "text": "hé\n\"x\""}, {"b": 1.0, "a": null}]]);
        let mut s = String::new();
        py_json(&v, &mut s);
        assert_eq!(
            s,
            r#"["s1", 0, "human", [{"text": "hé\n\"x\"", "type": "text"}, {"a": null, "b": 1.0}]]"#
        );
        let mut c = String::new();
        py_str("\u{1}\u{8}", &mut c);
        assert_eq!(c, r#""\u0001\b""#);
    }

    #[test]
    fn hermes_sentinel_content_keeps_text_blocks() {
        let raw = format!(
            "{HERMES_JSON_SENTINEL}{}",
            r#"[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]"#
        );
        assert_eq!(hermes_content(raw), "a\nb");
        assert_eq!(hermes_content("plain".into()), "plain");
    }

    #[test]
    fn naive_mp_time_is_local() {
        assert!(parse_mp_time("2026-03-15 09:24:37").is_some());
        assert_eq!(
            parse_mp_time("2026-03-15T09:24:37Z").map(|t| t.timestamp()),
            Some(1_773_566_677)
        );
        assert!(parse_mp_time("yesterday").is_none());
    }
}
