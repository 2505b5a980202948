//! Reading source `state.db` files (Hermes and MoviePilot share the layout, in two dialects):
//! paged rows, content and timestamp conversion, and appending them grouped by session.

use super::*;

pub(crate) fn open_source(path: &Path) -> Result<Connection> {
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

pub(crate) fn columns(conn: &Connection, table: &str) -> Result<HashSet<String>> {
    let mut st = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names = st
        .query_map([table], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<HashSet<_>>>()?;
    Ok(names)
}

pub(crate) fn text(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
    }
}

pub(crate) fn real(v: ValueRef<'_>) -> Option<f64> {
    let f = match v {
        ValueRef::Integer(i) => i as f64,
        ValueRef::Real(f) => f,
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok()?,
        _ => return None,
    };
    (f.is_finite() && f > 0.0).then_some(f)
}

pub(crate) fn epoch_to_dt(f: f64) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp_micros((f * 1e6).round() as i64)
}

/// Parse a MoviePilot time string: RFC 3339, or a naive `YYYY-MM-DD HH:MM:SS[.f]` which
/// MoviePilot writes in its local time zone (taken to be this machine's).
pub fn parse_mp_time(s: &str) -> Option<chrono::DateTime<chrono::Utc>> {
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
pub(crate) enum Dialect {
    Hermes,
    MoviePilot,
}

/// One message row of a source state.db, joined with its session.
pub(crate) struct SrcRow {
    pub(crate) id: i64,
    pub(crate) session_id: String,
    pub(crate) uid: String,
    pub(crate) role: String,
    pub(crate) content: String,
    pub(crate) tool_call_id: String,
    pub(crate) tool_name: String,
    pub(crate) tool_calls: String,
    pub(crate) ts: Option<f64>,
    pub(crate) active: bool,
    pub(crate) compacted: bool,
    pub(crate) hidden: bool,
    pub(crate) source: String,
    pub(crate) title: String,
    pub(crate) model: String,
    pub(crate) parent: String,
    pub(crate) started: Option<f64>,
    pub(crate) end_reason: String,
}

/// A page reader over `messages ⟕ sessions` that adapts to the columns the file really has
/// (old Hermes schemas lack `active`, `compacted`, `display_kind`, …).
pub(crate) struct StateDbReader {
    pub(crate) conn: Connection,
    pub(crate) sql: String,
}

impl StateDbReader {
    pub(crate) fn open(path: &Path, dialect: Dialect) -> Result<Self> {
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

    pub(crate) fn remaining(&self, after: i64) -> Result<u64> {
        let n: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM messages WHERE id > ?1",
            [after],
            |r| r.get(0),
        )?;
        Ok(n.max(0) as u64)
    }

    pub(crate) fn page(&self, after: i64) -> Result<Vec<SrcRow>> {
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

    pub(crate) fn tombstones(&self) -> Result<HashSet<String>> {
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

pub(crate) fn non_empty(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

/// Text of Hermes content: plain, or the sentinel-prefixed JSON of a list/dict.
pub fn hermes_content(raw: String) -> String {
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
pub(crate) fn content_text(v: &Value) -> String {
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
pub(crate) fn bounded_uid(uid: String) -> String {
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
pub(crate) struct Converted {
    pub(crate) session: SessionMeta,
    pub(crate) end_reason: String,
    pub(crate) message: CapturedMessage,
    pub(crate) compacted: bool,
}

pub(crate) fn convert_row(row: SrcRow, dialect: Dialect) -> std::result::Result<Converted, String> {
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
pub(crate) struct RunState {
    pub(crate) summary: ImportSummary,
    pub(crate) sessions: HashSet<(String, String)>,
    pub(crate) users: HashSet<String>,
    pub(crate) ended: HashSet<(String, String)>,
    pub(crate) done: u64,
    pub(crate) total: u64,
}

impl RunState {
    pub(crate) fn progress(&self) -> ImportProgress {
        ImportProgress {
            done: self.done,
            total: self.total,
            imported: self.summary.messages_imported as u64,
        }
    }

    pub(crate) fn finish(mut self, complete: bool) -> ImportSummary {
        self.summary.sessions = self.sessions.len();
        self.summary.users = self.users.len();
        self.summary.complete = complete;
        self.summary
    }
}

/// Group messages into per-session batches of at most [`store::MAX_BATCH`] (source order kept)
/// and append them in one transaction; account for the outcome.
pub(crate) async fn append_grouped(
    hub: &History,
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
    reason = "one row of the source schema per argument"
)]
pub(crate) async fn import_state_db(
    hub: &History,
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

pub(crate) fn canonical_key(path: &Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn mark_started(cursor: &mut CursorFile, keys: &[String]) {
    cursor.complete = false;
    for k in keys {
        cursor.sources.entry(k.clone()).or_default().complete = false;
    }
}
