//! The business world: the served operations over [`WorldState`], synchronous and pure (no I/O),
//! called under the server's one lock so dedup, effect and ledger entry happen in one step.
//!
//! Replies follow MoviePilot: the `{success, message, data}` envelope; a business refusal
//! (duplicate, unknown id, unknown downloader) is HTTP 200 with `success:false`; input that fails
//! validation is HTTP 422 with FastAPI's `{"detail":[{type, loc, msg, input}]}`.

mod admin;
mod download;
mod reads;
mod subscription;

use crate::catalog::Operation;
use crate::ledger::{Effect, Observation, ObservationKind, Refusal, RefusalKind};
use crate::state::{DuplicateSubscription, Restrictions, Row, User, WorldState};
use serde_json::{Map, Value, json};

/// The operations the fake serves; every other catalogue operation answers 501.
pub const SERVED_OPERATIONS: [&str; 21] = [
    "config.system.get",
    "config.system.update",
    "download.add",
    "download.clients",
    "download.history.list",
    "download.paths",
    "download.tasks.active",
    "library.exists",
    "media.detail",
    "media.search",
    "scheduler.list",
    "scheduler.run",
    "search.results",
    "search.torrents",
    "site.list",
    "subscription.add",
    "subscription.delete",
    "subscription.find",
    "subscription.get",
    "subscription.list",
    "transfer.queue",
];

/// One authenticated call to a catalogue operation.
pub(crate) struct Call<'a> {
    pub op: &'a Operation,
    pub path_params: &'a [(&'static str, String)],
    pub query: &'a [(String, String)],
    pub body: Option<&'a Value>,
    pub user: &'a User,
    /// Superuser in the state and in the token.
    pub super_user: bool,
}

/// The collection headers of a list reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Collection {
    pub result_count: usize,
    pub total_count: Option<usize>,
    pub page: Option<u64>,
    pub page_size: Option<u64>,
}

/// A reply with what it did and showed.
#[derive(Debug, Clone)]
pub(crate) struct Served {
    pub status: u16,
    pub body: Value,
    pub collection: Option<Collection>,
    pub effects: Vec<Effect>,
    pub observations: Vec<Observation>,
    pub duplicate: bool,
    pub refusal: Option<Refusal>,
}

/// Handlers return their refusal as the error so `?` can end them early.
pub(crate) type Answer = std::result::Result<Served, Box<Served>>;

impl Served {
    fn reply(status: u16, body: Value) -> Served {
        Served {
            status,
            body,
            collection: None,
            effects: Vec::new(),
            observations: Vec::new(),
            duplicate: false,
            refusal: None,
        }
    }

    pub(crate) fn refused(status: u16, body: Value, kind: RefusalKind, message: &str) -> Served {
        Served {
            refusal: Some(Refusal {
                kind,
                message: message.to_string(),
            }),
            ..Served::reply(status, body)
        }
    }

    fn observe(mut self, observations: Vec<Observation>) -> Served {
        self.observations = observations;
        self
    }

    fn effect(mut self, effect: Effect) -> Served {
        self.effects.push(effect);
        self
    }

    /// Flags the call as a write of something that already exists.
    fn duplicate(mut self) -> Served {
        self.duplicate = true;
        self
    }

    /// Whether the call landed: an effect applied, or a read answered `success`.
    pub(crate) fn landed(&self, read: bool) -> bool {
        !self.effects.is_empty() || (read && self.status < 300 && envelope_success(&self.body))
    }
}

/// `false` only for a body that says `success: false`.
pub(crate) fn envelope_success(body: &Value) -> bool {
    body.get("success").and_then(Value::as_bool) != Some(false)
}

/// `{success: true, message, data}`.
pub(crate) fn ok(message: &str, data: Value) -> Served {
    Served::reply(
        200,
        json!({"success": true, "message": message, "data": data}),
    )
}

/// A business refusal: HTTP 200 with `success: false`.
pub(crate) fn fail(message: &str) -> Served {
    Served::reply(
        200,
        json!({"success": false, "message": message, "data": null}),
    )
}

/// FastAPI's validation error (HTTP 422).
pub(crate) fn invalid(loc: &[&str], kind: &str, msg: &str, input: Value) -> Box<Served> {
    Box::new(Served::refused(
        422,
        json!({"detail": [{"type": kind, "loc": loc, "msg": msg, "input": input}]}),
        RefusalKind::Invalid,
        &format!("{}: {msg}", loc.join(".")),
    ))
}

fn restricted(message: &str) -> Box<Served> {
    Box::new(Served::refused(
        400,
        json!({"success": false, "message": message, "data": null}),
        RefusalKind::Restricted,
        message,
    ))
}

/// The world behind the server's lock.
#[derive(Debug, Clone)]
pub(crate) struct World {
    pub state: WorldState,
    pub restrictions: Restrictions,
    pub duplicate_subscription: DuplicateSubscription,
    /// The id the next created row of a collection gets (`subscriptions`), then the next free
    /// one after it; absent: the largest id + 1.
    pub next_ids: std::collections::BTreeMap<String, i64>,
}

impl World {
    /// Serves `call`, or `None` when the operation is not one the fake serves.
    pub fn serve(&mut self, call: &Call<'_>) -> Option<Served> {
        if let Some(allowed) = &self.restrictions.operations
            && !allowed.contains(call.op.id)
        {
            let list = allowed.iter().cloned().collect::<Vec<_>>().join(", ");
            return Some(*restricted(&format!(
                "此环境只接受这些操作 / only these operations are allowed here: {list}"
            )));
        }
        let answer = match call.op.id {
            "subscription.list" => subscription::list(self, call),
            "subscription.find" => subscription::find(self, call),
            "subscription.get" => subscription::get(self, call),
            "subscription.add" => subscription::add(self, call),
            "subscription.delete" => subscription::delete(self, call),
            "download.tasks.active" => download::active(self, call, false),
            "download.history.list" => download::active(self, call, true),
            "download.clients" => download::clients(self, call),
            "download.paths" => download::paths(self, call),
            "download.add" => download::add(self, call),
            "site.list" => reads::sites(self, call),
            "library.exists" => reads::library_exists(self, call),
            "transfer.queue" => reads::transfer_queue(self, call),
            "search.results" => reads::search_results(self, call),
            "search.torrents" => reads::search_torrents(self, call),
            "media.search" => reads::media_search(self, call),
            "media.detail" => reads::media_detail(self, call),
            "config.system.get" => admin::settings_get(self, call),
            "config.system.update" => admin::settings_update(self, call),
            "scheduler.list" => admin::scheduler_list(self, call),
            "scheduler.run" => admin::scheduler_run(self, call),
            _ => return None,
        };
        Some(answer.unwrap_or_else(|refusal| *refusal))
    }
}

/// The id for a new row of `collection`, whose ids are `taken`: the scenario's chosen next id
/// (then the next free one after it), else the largest id + 1.
pub(crate) fn next_id(
    next_ids: &mut std::collections::BTreeMap<String, i64>,
    collection: &str,
    taken: &[i64],
) -> i64 {
    match next_ids.get_mut(collection) {
        Some(next) => {
            let mut id = *next;
            while taken.contains(&id) {
                id += 1;
            }
            *next = id + 1;
            id
        }
        None => taken.iter().copied().max().unwrap_or(0) + 1,
    }
}

/// Query access with FastAPI-like validation. Over HTTP every value is a string; a repeated
/// key keeps its last value for scalars.
pub(crate) struct Query<'a>(&'a [(String, String)]);

impl<'a> Query<'a> {
    /// Refuses keys outside `allowed` (the evaluation world's allowlist).
    pub fn new(call: &Call<'a>, allowed: &[&str]) -> Result<Query<'a>, Box<Served>> {
        if let Some((k, v)) = call
            .query
            .iter()
            .find(|(k, _)| !allowed.contains(&k.as_str()))
        {
            let msg = format!(
                "Extra inputs are not permitted (allowed: {})",
                if allowed.is_empty() {
                    "none".to_string()
                } else {
                    allowed.join(", ")
                }
            );
            return Err(invalid(&["query", k], "extra_forbidden", &msg, json!(v)));
        }
        Ok(Query(call.query))
    }

    pub fn str(&self, key: &str) -> Option<&'a str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn all(&self, key: &str) -> Vec<&'a str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect()
    }

    pub fn required(&self, key: &str) -> Result<&'a str, Box<Served>> {
        match self.str(key) {
            Some(v) if !v.trim().is_empty() => Ok(v),
            _ => Err(invalid(
                &["query", key],
                "missing",
                "Field required",
                Value::Null,
            )),
        }
    }

    pub fn int(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>, Box<Served>> {
        let Some(raw) = self.str(key) else {
            return Ok(None);
        };
        match raw.trim().parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
            Ok(_) => Err(invalid(
                &["query", key],
                "value_error",
                &format!("Input should be between {min} and {max}"),
                json!(raw),
            )),
            Err(_) => Err(invalid(
                &["query", key],
                "int_parsing",
                "Input should be a valid integer",
                json!(raw),
            )),
        }
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>, Box<Served>> {
        match self.str(key).map(str::to_ascii_lowercase).as_deref() {
            None => Ok(None),
            Some("true" | "1" | "yes" | "on") => Ok(Some(true)),
            Some("false" | "0" | "no" | "off") => Ok(Some(false)),
            Some(raw) => Err(invalid(
                &["query", key],
                "bool_parsing",
                "Input should be a valid boolean",
                json!(raw),
            )),
        }
    }

    /// MoviePilot's legacy full-list pagination: without `page` and `count` the whole list,
    /// else `page` (default 1) of `count` (default `default_count`) rows. `always` pages even
    /// without them (endpoints with their own defaults). Enforces the world's restrictions.
    pub fn paging(
        &self,
        world: &World,
        default_count: u64,
        always: bool,
    ) -> Result<Option<(u64, u64)>, Box<Served>> {
        let page = self.int("page", 1, i64::MAX)?;
        let count = self.int("count", 1, 200)?;
        let r = &world.restrictions;
        if let Some(fixed) = r.count
            && count.map(|c| c as u64) != Some(fixed)
        {
            return Err(restricted(&format!(
                "此环境的分页读取必须使用 count={fixed} / paged reads here must use count={fixed}"
            )));
        }
        if let Some(max) = r.max_page
            && !page.is_some_and(|p| (1..=max).contains(&(p as u64)))
        {
            return Err(restricted(&format!(
                "此环境只允许 page=1..{max} / only page=1..{max} may be read here"
            )));
        }
        Ok((always || page.is_some() || count.is_some()).then(|| {
            (
                page.map_or(1, |p| p as u64),
                count.map_or(default_count, |c| c as u64),
            )
        }))
    }
}

/// Slices `rows` for `paging` and builds the list reply with its collection headers.
pub(crate) fn list_reply<T>(
    rows: &[T],
    paging: Option<(u64, u64)>,
    with_total: bool,
    observe: impl Fn(&T) -> (Value, Observation),
) -> Served {
    let selected: &[T] = match paging {
        Some((page, count)) => {
            let start = usize::try_from((page - 1).saturating_mul(count)).unwrap_or(usize::MAX);
            let end = start.saturating_add(usize::try_from(count).unwrap_or(usize::MAX));
            rows.get(start.min(rows.len())..end.min(rows.len()))
                .unwrap_or(&[])
        }
        None => rows,
    };
    let (data, observations): (Vec<Value>, Vec<Observation>) = selected.iter().map(observe).unzip();
    let mut served = ok("查询成功", Value::Array(data)).observe(observations);
    served.collection = Some(Collection {
        result_count: selected.len(),
        total_count: with_total.then_some(rows.len()),
        page: paging.map(|(p, _)| p),
        page_size: paging.map(|(_, c)| c),
    });
    served
}

/// A record as returned, and its observation.
pub(crate) fn seen(
    kind: ObservationKind,
    id: impl Into<Value>,
    record: Value,
) -> (Value, Observation) {
    (record.clone(), Observation::new(kind, id, record))
}

/// A legacy full-list read (`page`/`count` only) of serialisable rows, each observed as `kind`.
pub(crate) fn plain_list<T: serde::Serialize>(
    world: &World,
    call: &Call<'_>,
    rows: &[T],
    kind: ObservationKind,
    id: impl Fn(&T) -> Value,
) -> Answer {
    let q = Query::new(call, &["page", "count"])?;
    no_body(call)?;
    let paging = q.paging(world, 50, false)?;
    Ok(list_reply(rows, paging, true, |row| {
        seen(kind, id(row), to_value(row))
    }))
}

/// Refuses a body on an operation that takes none (`{}` and `null` are tolerated).
pub(crate) fn no_body(call: &Call<'_>) -> Result<(), Box<Served>> {
    match call.body {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(m)) if m.is_empty() => Ok(()),
        Some(other) => Err(invalid(
            &["body"],
            "extra_forbidden",
            "This operation takes no body",
            other.clone(),
        )),
    }
}

/// The JSON object body, with keys limited to `allowed`.
pub(crate) fn object_body<'a>(call: &Call<'a>, allowed: &[&str]) -> Result<&'a Row, Box<Served>> {
    let Some(Value::Object(body)) = call.body else {
        return Err(invalid(
            &["body"],
            "model_type",
            "Input should be a valid dictionary or object",
            call.body.cloned().unwrap_or(Value::Null),
        ));
    };
    if let Some(k) = body.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(invalid(
            &["body", k],
            "extra_forbidden",
            "Extra inputs are not permitted",
            body[k].clone(),
        ));
    }
    Ok(body)
}

pub(crate) fn path_param<'a>(call: &Call<'a>, name: &str) -> &'a str {
    call.path_params
        .iter()
        .find(|(k, _)| *k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// A positive integer path placeholder (`subscribe_id`).
pub(crate) fn positive_id(call: &Call<'_>, name: &str) -> Result<i64, Box<Served>> {
    let raw = path_param(call, name);
    match raw.parse::<i64>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err(invalid(
            &["path", name],
            "greater_than_equal",
            "Input should be greater than or equal to 1",
            json!(raw),
        )),
        Err(_) => Err(invalid(
            &["path", name],
            "int_parsing",
            "Input should be a valid integer",
            json!(raw),
        )),
    }
}

pub(crate) fn object(row: &Row) -> Value {
    Value::Object(row.clone())
}

/// `source:id`, the observation id of media-like records.
pub(crate) fn media_key(source: &str, id: &str) -> String {
    format!("{}:{id}", crate::state::canonical_source(source))
}

pub(crate) fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

pub(crate) fn empty() -> Value {
    Value::Object(Map::new())
}
