//! The MoviePilot importer: its per-user `state.db` files and the `agentchat` recovery
//! snapshots in its main database, each MoviePilot user into the local user of the same name.

use super::*;

/// MoviePilot's per-user directory key: SHA-256 hex of the trimmed user id.
pub(crate) fn mp_user_key(id: &str) -> String {
    hex::encode(Sha256::digest(id.trim().as_bytes()))
}

pub(crate) fn is_internal(id: &str) -> bool {
    let t = id.trim();
    t.is_empty() || t.eq_ignore_ascii_case("system")
}

/// A MoviePilot installation opened for import: which per-user state.db belongs to which user
/// name, and where the snapshots are.
#[derive(Debug)]
pub struct MoviePilotSource {
    pub(crate) config_dir: PathBuf,
    pub(crate) main_db: Option<PathBuf>,
    /// (MoviePilot directory key, state.db path, resolved user name if known).
    pub(crate) user_dbs: Vec<(String, PathBuf, Option<String>)>,
    /// MoviePilot user id (trimmed) → user name.
    pub(crate) names: HashMap<String, String>,
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

    pub(crate) fn name_for(&self, user_id: &str, username: &str) -> Option<String> {
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
pub(crate) struct SnapshotRecord {
    pub(crate) id: i64,
    pub(crate) session_id: String,
    pub(crate) user_id: String,
    pub(crate) username: String,
    pub(crate) channel: String,
    pub(crate) title: String,
    pub(crate) messages: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
}

pub(crate) fn snapshot_page(
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
pub fn py_json(v: &Value, out: &mut String) {
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

pub fn py_str(s: &str, out: &mut String) {
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
pub(crate) fn convert_lc(
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
    hub: &History,
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

pub(crate) async fn import_snapshot(
    hub: &History,
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
