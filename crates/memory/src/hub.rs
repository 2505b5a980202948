//! The `memory` tool: argument parsing, locate/apply, budgets, drift guard, failure cap.

use crate::durable_fs::{self, MutationLock};
use crate::entries::{chars, join, parse, preview, usage};
use crate::threat;
use crate::{Error, MemoryConfig, Result, WriteOrigin};
use mpa_protocol::{Actor, UserKey};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Longest string accepted in any memory argument.
const MAX_ARG_CHARS: usize = 100_000;
/// Most operations in one batch.
const MAX_OPS: usize = 20;
const SUCCESS_NOTE: &str = "Write saved. This update is complete — do not repeat it.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Target {
    Memory,
    User,
}

impl Target {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Target::Memory => "memory",
            Target::User => "user",
        }
    }

    pub(crate) fn file_name(self) -> &'static str {
        match self {
            Target::Memory => "MEMORY.md",
            Target::User => "USER.md",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Scope {
    Global,
    User,
}

impl Scope {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::User => "user",
        }
    }
}

/// One memory file and its rules.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    pub scope: Scope,
    pub target: Target,
    pub path: PathBuf,
    /// Directory whose `.mutation.lock` serialises writers.
    pub lock_root: PathBuf,
    pub limit: usize,
    /// Display path relative to the data directory.
    pub label: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Action {
    Add,
    Replace,
    Remove,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Op {
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
    /// `replace` with `mode: "substring"` swaps only `old_text` inside the entry instead of
    /// the whole entry (the whole-entry default is the reference contract).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub substring: bool,
}

impl Op {
    /// The text that replaces `entry` for a replace op.
    pub(crate) fn replacement(&self, entry: &str) -> String {
        let content = self.content.clone().unwrap_or_default();
        match (&self.old_text, self.substring) {
            (Some(old), true) if entry != old => entry.replacen(old.as_str(), &content, 1),
            _ => content,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub target: Target,
    pub scope: Scope,
    pub ops: Vec<Op>,
    pub batch: bool,
}

enum Parsed {
    Pending,
    Write(Request),
}

/// Why an operation could not be applied. `show_entries` adds the (sanitised) current
/// entries so the model can pick a correct `old_text`.
#[derive(Debug)]
pub(crate) struct Fail {
    pub error: String,
    pub matches: Option<Vec<String>>,
    pub show_entries: bool,
}

impl Fail {
    fn plain(error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            matches: None,
            show_entries: false,
        }
    }

    fn with_entries(error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            matches: None,
            show_entries: true,
        }
    }
}

/// Entry point for memory of every user. Cheap to clone (shared state behind `Arc`).
#[derive(Debug, Clone)]
pub struct MemoryHub {
    pub(crate) cfg: Arc<MemoryConfig>,
    failures: Arc<Mutex<HashMap<String, u32>>>,
}

impl MemoryHub {
    pub fn new(cfg: MemoryConfig) -> Self {
        Self {
            cfg: Arc::new(cfg),
            failures: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// `<data>/agent/memory`.
    pub(crate) fn memory_root(&self) -> PathBuf {
        self.cfg.data_dir.join("agent").join("memory")
    }

    pub(crate) fn user_root(&self, key: &UserKey) -> PathBuf {
        self.memory_root().join("users").join(key.as_str())
    }

    pub(crate) fn store(&self, actor: &Actor, scope: Scope, target: Target) -> Store {
        let limit = match target {
            Target::Memory => self.cfg.memory_char_limit,
            Target::User => self.cfg.user_char_limit,
        };
        match scope {
            Scope::Global => Store {
                scope,
                target,
                path: self.memory_root().join(target.file_name()),
                lock_root: self.memory_root(),
                limit,
                label: format!("agent/memory/{}", target.file_name()),
            },
            Scope::User => {
                let key = actor.user_key();
                Store {
                    scope,
                    target,
                    path: self.user_root(&key).join(target.file_name()),
                    lock_root: self.user_root(&key),
                    limit,
                    label: format!("agent/memory/users/{key}/{}", target.file_name()),
                }
            }
        }
    }

    /// Read a store's entries (missing file = empty; unreadable = error, never empty).
    pub(crate) fn read_store(&self, store: &Store) -> Result<(String, Vec<String>)> {
        let raw = durable_fs::read_optional(&store.path)
            .map_err(|source| Error::Read {
                file: store.label.clone(),
                source,
            })?
            .unwrap_or_default();
        let list = parse(&raw);
        Ok((raw, list))
    }

    pub(crate) fn write_store(&self, store: &Store, list: &[String]) -> Result<()> {
        let mut text = join(list);
        if !text.is_empty() {
            text.push('\n');
        }
        durable_fs::atomic_write(&store.path, text.as_bytes()).map_err(|source| Error::Write {
            file: store.label.clone(),
            source,
        })
    }

    pub(crate) fn lock(&self, root: &Path, label: &str) -> Result<MutationLock> {
        MutationLock::acquire(root).map_err(|e| Error::lock(e, label))
    }

    /// A new user turn started: the consolidation failure cap counts per turn.
    pub fn begin_user_turn(&self, actor: &Actor) {
        if let Ok(mut map) = self.failures.lock() {
            map.remove(&failure_key(actor, &WriteOrigin::Foreground));
        }
    }

    /// A background review ended: drop its failure counter.
    pub fn end_review(&self, actor: &Actor, token: &crate::ReviewToken) {
        if let Ok(mut map) = self.failures.lock() {
            map.remove(&failure_key(
                actor,
                &WriteOrigin::BackgroundReview(token.clone()),
            ));
        }
    }

    /// The `memory` tool. Never panics; every outcome is a JSON object with `success`.
    pub fn memory_tool(&self, actor: &Actor, origin: &WriteOrigin, args: Value) -> Value {
        let key = failure_key(actor, origin);
        match self.memory_tool_inner(actor, origin, &args) {
            Ok(v) => {
                if let Ok(mut map) = self.failures.lock() {
                    map.remove(&key);
                }
                v
            }
            Err(body) => {
                let n = self
                    .failures
                    .lock()
                    .map(|mut map| {
                        let c = map.entry(key).or_insert(0);
                        *c += 1;
                        *c
                    })
                    .unwrap_or(1);
                if n > crate::FAILURE_CAP {
                    json!({
                        "success": false,
                        "done": true,
                        "error": format!(
                            "Memory consolidation failed {n} times this turn. Stop retrying memory writes now and continue with your reply to the user; the memory update can wait for a later turn."
                        ),
                    })
                } else {
                    body
                }
            }
        }
    }

    fn memory_tool_inner(
        &self,
        actor: &Actor,
        origin: &WriteOrigin,
        args: &Value,
    ) -> std::result::Result<Value, Value> {
        let req = match parse_args(args).map_err(|e| err_body(&e))? {
            Parsed::Pending => return Ok(self.pending_listing(actor)),
            Parsed::Write(req) => req,
        };
        if req.scope == Scope::Global && !actor.is_admin {
            return Err(err_body(
                "Only administrators can write the global MEMORY.md; use scope \"user\" (the default) for your own memory.",
            ));
        }
        if req.scope == Scope::Global && req.target == Target::User {
            return Err(err_body(
                "The global scope has only MEMORY.md; use target \"memory\" with scope \"global\".",
            ));
        }
        // Scan before any lock or staging: a poisoned batch is rejected as a whole.
        for (i, op) in req.ops.iter().enumerate() {
            if let Some(c) = &op.content
                && let Some(f) = threat::first_block(c)
            {
                let msg = f.block_message();
                return Err(err_body(&if req.batch {
                    format!(
                        "Operation {}: {msg} No operations were applied (batch is all-or-nothing).",
                        i + 1
                    )
                } else {
                    msg
                }));
            }
        }
        let store = self.store(actor, req.scope, req.target);
        if let WriteOrigin::BackgroundReview(token) = origin {
            if token.is_cancelled() {
                return Err(err_body(
                    "The background review was cancelled; nothing was written.",
                ));
            }
            if req.scope == Scope::Global {
                return Err(err_body(
                    "A background review cannot write the global memory.",
                ));
            }
            if req.ops.iter().any(|op| op.action != Action::Add) {
                return self.stage_proposal(actor, &store, &req, token);
            }
        }
        self.apply_request(&store, &req, origin)
    }

    /// Apply a request under the store lock and write the result once.
    fn apply_request(
        &self,
        store: &Store,
        req: &Request,
        origin: &WriteOrigin,
    ) -> std::result::Result<Value, Value> {
        let _guard = self
            .lock(&store.lock_root, &store.label)
            .map_err(|e| err_body(&e.to_string()))?;
        let (raw, list) = self
            .read_store(store)
            .map_err(|e| err_body(&e.to_string()))?;
        let rewrites = req.batch || req.ops.iter().any(|op| op.action != Action::Add);
        if rewrites && has_drift(&raw, &list, store.limit) {
            return Err(self.drift_refusal(store, &raw));
        }
        let mut work = list.clone();
        let outcome = if req.batch {
            apply_batch(&mut work, &req.ops, store, true)
        } else {
            req.ops
                .first()
                .ok_or_else(|| Fail::plain("No operation given."))
                .and_then(|op| apply_single(&mut work, op, store))
        };
        let (previous, message, changed) = match outcome {
            Ok(v) => v,
            Err(fail) => return Err(self.fail_body(store, &list, fail)),
        };
        if let WriteOrigin::BackgroundReview(token) = origin
            && token.is_cancelled()
        {
            return Err(err_body(
                "The background review was cancelled; nothing was written.",
            ));
        }
        if changed {
            self.write_store(store, &work)
                .map_err(|e| err_body(&e.to_string()))?;
        }
        Ok(self.success_body(store, &work, previous, message, changed))
    }

    pub(crate) fn success_body(
        &self,
        store: &Store,
        list: &[String],
        previous: Vec<Option<String>>,
        message: String,
        changed: bool,
    ) -> Value {
        let used = usage(list);
        let mut body = json!({
            "success": true,
            "done": true,
            "changed": changed,
            "target": store.target.as_str(),
            "scope": store.scope.as_str(),
            "entry_count": list.len(),
            "usage": format!("{used}/{}", store.limit),
            "message": message,
            "previous_entries": previous,
            "note": SUCCESS_NOTE,
        });
        if used * 10 >= store.limit * 9
            && let Some(obj) = body.as_object_mut()
        {
            obj.insert(
                "warning".into(),
                json!(format!(
                    "{} is at {used}/{} chars; consolidate soon (one batch that shortens or removes stale entries).",
                    store.target.file_name(),
                    store.limit
                )),
            );
        }
        body
    }

    pub(crate) fn fail_body(&self, store: &Store, list: &[String], fail: Fail) -> Value {
        let mut obj = Map::new();
        obj.insert("success".into(), json!(false));
        obj.insert("error".into(), json!(fail.error));
        if let Some(m) = fail.matches {
            obj.insert("matches".into(), json!(m));
        }
        if fail.show_entries {
            obj.insert(
                "current_entries".into(),
                json!(sanitized(store.target.file_name(), list)),
            );
        }
        obj.insert(
            "usage".into(),
            json!(format!("{}/{}", usage(list), store.limit)),
        );
        Value::Object(obj)
    }

    fn drift_refusal(&self, store: &Store, raw: &str) -> Value {
        let bak = store.path.with_file_name(format!(
            "{}.bak.{}",
            store.target.file_name(),
            uuid::Uuid::new_v4().simple()
        ));
        let written = durable_fs::atomic_write(&bak, raw.as_bytes());
        let bak_name = bak
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match written {
            Ok(()) => err_body(&format!(
                "{} was edited outside the memory tool (it no longer round-trips, or one entry is larger than the whole {}-char budget), so it was not rewritten. A copy was saved as {bak_name} next to it. Integrate its facts one by one with memory(action=\"add\"), then ask the user to clean up the file.",
                store.label, store.limit
            )),
            Err(e) => err_body(&format!(
                "{} was edited outside the memory tool and could not be backed up ({e}); the file was left untouched. Ask the user to clean it up.",
                store.label
            )),
        }
    }
}

fn failure_key(actor: &Actor, origin: &WriteOrigin) -> String {
    match origin {
        WriteOrigin::Foreground => format!("{}:fg", actor.user_key()),
        WriteOrigin::BackgroundReview(t) => format!("{}:review:{}", actor.user_key(), t.id()),
    }
}

pub(crate) fn err_body(msg: &str) -> Value {
    json!({ "success": false, "error": msg })
}

/// The view of entries that may be shown to a model: poisoned entries are placeholders.
pub(crate) fn sanitized(file: &str, list: &[String]) -> Vec<String> {
    list.iter().map(|e| sanitize_entry(file, e)).collect()
}

fn sanitize_entry(file: &str, entry: &str) -> String {
    if entry.starts_with("[BLOCKED:") {
        return entry.to_string();
    }
    if threat::too_large_to_scan(entry) {
        return format!(
            "[BLOCKED: {file} entry too large to scan. Removed from system prompt; use memory(action=remove) to delete the original.]"
        );
    }
    let findings = threat::scan(entry, threat::ScanScope::Strict);
    if findings.is_empty() {
        return entry.to_string();
    }
    let ids: Vec<String> = findings.iter().map(threat::Finding::id).collect();
    format!(
        "[BLOCKED: {file} entry contained threat pattern(s): {}. Removed from system prompt; use memory(action=remove) to delete the original.]",
        ids.join(", ")
    )
}

/// Content that would not survive a parse → serialise round trip, or one entry larger than
/// the whole budget: signs of free-form edits by another writer.
pub(crate) fn has_drift(raw: &str, list: &[String], limit: usize) -> bool {
    raw.trim() != join(list) || list.iter().any(|e| chars(e) > limit)
}

enum Located {
    At(usize),
    NoMatch,
    Ambiguous(Vec<String>),
}

/// Exact entry equality wins; otherwise every entry containing `old` as a substring.
fn locate(list: &[String], old: &str) -> Located {
    if let Some(i) = list.iter().position(|e| e == old) {
        return Located::At(i);
    }
    let hits: Vec<usize> = list
        .iter()
        .enumerate()
        .filter(|(_, e)| e.contains(old))
        .map(|(i, _)| i)
        .collect();
    match hits.as_slice() {
        [] => Located::NoMatch,
        [first, rest @ ..] => {
            if rest.iter().all(|&i| list[i] == list[*first]) {
                Located::At(*first)
            } else {
                Located::Ambiguous(hits.iter().map(|&i| preview(&list[i], 80)).collect())
            }
        }
    }
}

fn locate_or_fail(list: &[String], old: &str, prefix: &str) -> std::result::Result<usize, Fail> {
    match locate(list, old) {
        Located::At(i) => Ok(i),
        Located::NoMatch => Err(Fail::with_entries(format!(
            "{prefix}No entry matched '{}'. Pick old_text from current_entries.",
            preview(old, 80)
        ))),
        Located::Ambiguous(m) => Err(Fail {
            error: format!(
                "{prefix}Multiple entries matched '{}'. Be more specific.",
                preview(old, 80)
            ),
            matches: Some(m),
            show_entries: false,
        }),
    }
}

type Applied = (Vec<Option<String>>, String, bool);

fn apply_single(
    list: &mut Vec<String>,
    op: &Op,
    store: &Store,
) -> std::result::Result<Applied, Fail> {
    let limit = store.limit;
    let file = store.target.file_name();
    match op.action {
        Action::Add => {
            let content = op.content.as_deref().unwrap_or("");
            if content.is_empty() {
                return Err(Fail::plain("Content cannot be empty for add."));
            }
            if list.iter().any(|e| e == content) {
                return Ok((
                    vec![None],
                    "Entry already exists (no duplicate added).".into(),
                    false,
                ));
            }
            let mut next = list.clone();
            next.push(content.to_string());
            let total = usage(&next);
            if total > limit {
                return Err(Fail::with_entries(format!(
                    "{file} is at {}/{limit} chars; adding this entry ({} chars) would exceed the limit ({total}/{limit}). Reissue as ONE batch that removes or shortens stale entries and adds the new one.",
                    usage(list),
                    chars(content)
                )));
            }
            *list = next;
            Ok((vec![None], "Entry added.".into(), true))
        }
        Action::Replace | Action::Remove => {
            let verb = if op.action == Action::Replace {
                "replace"
            } else {
                "remove"
            };
            let Some(old) = op.old_text.as_deref().filter(|s| !s.is_empty()) else {
                return Err(Fail::with_entries(format!(
                    "old_text is required for {verb}. Reissue the call with old_text set to a short unique part of one of current_entries."
                )));
            };
            if op.action == Action::Replace && op.content.as_deref().unwrap_or("").is_empty() {
                return Err(Fail::plain(
                    "content cannot be empty for replace; use action=\"remove\" to delete an entry.",
                ));
            }
            let i = locate_or_fail(list, old, "")?;
            let previous = list[i].clone();
            if op.action == Action::Remove {
                list.remove(i);
                return Ok((vec![Some(previous)], "Entry removed.".into(), true));
            }
            let mut next = list.clone();
            next[i] = op.replacement(&list[i]);
            dedup(&mut next);
            let total = usage(&next);
            if total > limit {
                return Err(Fail::with_entries(format!(
                    "Replacing would put {file} at {total}/{limit} chars, over the limit. Shorten the content or remove other entries in one batch."
                )));
            }
            *list = next;
            Ok((vec![Some(previous)], "Entry replaced.".into(), true))
        }
    }
}

/// Drop later exact duplicates (first kept), as [`parse`] does when reading.
pub(crate) fn dedup(list: &mut Vec<String>) {
    let mut seen: Vec<String> = Vec::with_capacity(list.len());
    list.retain(|e| {
        if seen.contains(e) {
            false
        } else {
            seen.push(e.clone());
            true
        }
    });
}

const NOTHING_APPLIED: &str = "No operations were applied (batch is all-or-nothing).";

pub(crate) fn apply_batch(
    list: &mut Vec<String>,
    ops: &[Op],
    store: &Store,
    forbid_empty: bool,
) -> std::result::Result<Applied, Fail> {
    let original_len = list.len();
    let mut work = list.clone();
    let mut previous = Vec::with_capacity(ops.len());
    for (n, op) in ops.iter().enumerate() {
        let prefix = format!("Operation {}: ", n + 1);
        let abort = |mut f: Fail| {
            f.error = format!(
                "{}{} {NOTHING_APPLIED}",
                prefix,
                f.error.trim_start_matches(&prefix)
            );
            f.show_entries = true;
            f
        };
        match op.action {
            Action::Add => {
                let Some(content) = op.content.as_deref().filter(|c| !c.is_empty()) else {
                    return Err(abort(Fail::plain("add needs non-empty content.")));
                };
                if !work.iter().any(|e| e == content) {
                    work.push(content.to_string());
                }
                previous.push(None);
            }
            Action::Replace | Action::Remove => {
                let Some(old) = op.old_text.as_deref().filter(|s| !s.is_empty()) else {
                    return Err(abort(Fail::plain(
                        "old_text is required for replace/remove.",
                    )));
                };
                if op.action == Action::Replace && op.content.as_deref().unwrap_or("").is_empty() {
                    return Err(abort(Fail::plain(
                        "replace needs non-empty content; use remove to delete an entry.",
                    )));
                }
                let i = locate_or_fail(&work, old, &prefix).map_err(abort)?;
                previous.push(Some(work[i].clone()));
                if op.action == Action::Remove {
                    work.remove(i);
                } else {
                    work[i] = op.replacement(&work[i]);
                    dedup(&mut work);
                }
            }
        }
    }
    if forbid_empty && original_len > 0 && work.is_empty() {
        return Err(Fail::with_entries(
            "A batch may not remove every entry. To clear the store, remove the last entry with a single remove action. No operations were applied (batch is all-or-nothing).",
        ));
    }
    let total = usage(&work);
    if total > store.limit {
        return Err(Fail::with_entries(format!(
            "The batch would leave {} at {total}/{} chars, over the limit; nothing was written. Remove or shorten more entries in the same batch. {NOTHING_APPLIED}",
            store.target.file_name(),
            store.limit
        )));
    }
    let changed = work != *list;
    *list = work;
    Ok((
        previous,
        format!("Applied {} operation(s).", ops.len()),
        changed,
    ))
}

fn get_str(
    obj: &Map<String, Value>,
    key: &str,
    ctx: &str,
) -> std::result::Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            if chars(s) > MAX_ARG_CHARS {
                return Err(format!(
                    "{ctx}{key} is longer than {MAX_ARG_CHARS} characters."
                ));
            }
            Ok(Some(s.trim().to_string()))
        }
        Some(_) => Err(format!("{ctx}{key} must be a string.")),
    }
}

fn parse_action(s: &str, ctx: &str) -> std::result::Result<Action, String> {
    match s {
        "add" => Ok(Action::Add),
        "replace" => Ok(Action::Replace),
        "remove" => Ok(Action::Remove),
        other => Err(format!(
            "{ctx}Unknown action '{other}'. Use add, replace or remove."
        )),
    }
}

fn parse_mode(obj: &Map<String, Value>, ctx: &str) -> std::result::Result<bool, String> {
    match get_str(obj, "mode", ctx)?.as_deref() {
        None | Some("entry") => Ok(false),
        Some("substring") => Ok(true),
        Some(other) => Err(format!(
            "{ctx}Invalid mode '{other}'. Use 'entry' (replace the whole entry) or 'substring'."
        )),
    }
}

fn parse_args(args: &Value) -> std::result::Result<Parsed, String> {
    let Some(obj) = args.as_object() else {
        return Err("Arguments must be a JSON object.".into());
    };
    let action = get_str(obj, "action", "")?;
    if action.as_deref() == Some("pending") {
        return Ok(Parsed::Pending);
    }
    let target = match get_str(obj, "target", "")?.as_deref() {
        None | Some("memory") => Target::Memory,
        Some("user") => Target::User,
        Some(other) => {
            return Err(format!(
                "Invalid target '{other}'. Use 'memory' (environment facts) or 'user' (preferences)."
            ));
        }
    };
    let scope = match get_str(obj, "scope", "")?.as_deref() {
        None | Some("user") => Scope::User,
        Some("global") => Scope::Global,
        Some(other) => return Err(format!("Invalid scope '{other}'. Use 'user' or 'global'.")),
    };
    if let Some(ops) = obj.get("operations").filter(|v| !v.is_null()) {
        if action.is_some() {
            return Err(
                "Omit action when using operations (each operation has its own action).".into(),
            );
        }
        let Some(items) = ops.as_array() else {
            return Err("operations must be an array.".into());
        };
        if items.is_empty() || items.len() > MAX_OPS {
            return Err(format!(
                "operations must hold 1 to {MAX_OPS} items (got {}).",
                items.len()
            ));
        }
        let mut parsed = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let ctx = format!("Operation {}: ", i + 1);
            let Some(o) = item.as_object() else {
                return Err(format!("{ctx}each operation must be an object."));
            };
            if let Some(k) = o.keys().find(|k| {
                !matches!(
                    k.as_str(),
                    "action" | "content" | "new_text" | "old_text" | "mode"
                )
            }) {
                return Err(format!("{ctx}unknown field '{k}'."));
            }
            let a =
                get_str(o, "action", &ctx)?.ok_or_else(|| format!("{ctx}action is required."))?;
            parsed.push(parse_op(o, &a, &ctx)?);
        }
        return Ok(Parsed::Write(Request {
            target,
            scope,
            ops: parsed,
            batch: true,
        }));
    }
    let Some(a) = action else {
        return Err(
            "action is required (add, replace, remove or pending), or pass operations for a batch."
                .into(),
        );
    };
    Ok(Parsed::Write(Request {
        target,
        scope,
        ops: vec![parse_op(obj, &a, "")?],
        batch: false,
    }))
}

/// One operation: a batch item, or the top-level arguments of a single write. `new_text` is
/// accepted for `content`.
fn parse_op(obj: &Map<String, Value>, action: &str, ctx: &str) -> std::result::Result<Op, String> {
    let content = match get_str(obj, "content", ctx)? {
        Some(c) => Some(c),
        None => get_str(obj, "new_text", ctx)?,
    };
    Ok(Op {
        action: parse_action(action, ctx)?,
        content,
        old_text: get_str(obj, "old_text", ctx)?,
        substring: parse_mode(obj, ctx)?,
    })
}
