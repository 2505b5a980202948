//! The world's data: the state file format, its validation, and the row helpers the operations
//! share. Typed sections refuse unknown fields through serde; subscription and download rows are
//! MoviePilot JSON objects (dozens of optional fields), checked against field allowlists here.

use crate::error::{EvalError, Result};
use crate::faults::Fault;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A MoviePilot record as JSON (a subscription or a download row).
pub type Row = Map<String, Value>;

/// The whole state file: `{"description": "...", "config": {...}, "state": {...}}`, all optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    /// Free text for people reading the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub config: ConfigSection,
    #[serde(default)]
    pub state: WorldState,
}

/// Server settings that may live in the state file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigSection {
    /// MoviePilot's `SECRET_KEY`: signs and checks the HS256 bearer tokens.
    #[serde(default)]
    pub secret_key: Option<String>,
    /// Lifetime of tokens issued by the login endpoint (MoviePilot's default: 8 days).
    #[serde(default)]
    pub token_ttl_minutes: Option<u64>,
    #[serde(default)]
    pub faults: Vec<Fault>,
    #[serde(default)]
    pub restrictions: Restrictions,
    #[serde(default)]
    pub duplicate_subscription: DuplicateSubscription,
    /// The id the next created row of a collection gets (`{"subscriptions": 880}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_ids: BTreeMap<String, i64>,
}

/// How a second `subscription.add` for an existing media identity is answered. Either way
/// nothing is created and the ledger flags the attempt as a duplicate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DuplicateSubscription {
    /// MoviePilot's own answer: success, "订阅已存在", and the existing row's id.
    #[default]
    AnswerExisting,
    /// The evaluation world's answer: a failure, "not added again".
    Refuse,
}

/// Constraints the world enforces itself, whatever the prompt said (evaluation §5).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Restrictions {
    /// When set, every other catalogue operation is refused (HTTP 400).
    #[serde(default)]
    pub operations: Option<BTreeSet<String>>,
    /// When set, paged reads must send exactly this `count`.
    #[serde(default)]
    pub count: Option<u64>,
    /// When set, paged reads must send a `page` in `1..=max_page`.
    #[serde(default)]
    pub max_page: Option<u64>,
}

/// Everything the fake serves and changes. Snapshots of it are what an oracle compares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorldState {
    #[serde(default)]
    pub users: Vec<User>,
    /// Media catalogue for `media.search` / `media.detail` (read-only).
    #[serde(default)]
    pub media: Vec<Media>,
    /// Site resources `search.torrents` finds (read-only).
    #[serde(default)]
    pub torrents: Vec<Torrent>,
    /// What the media server holds, for `library.exists` (read-only).
    #[serde(default)]
    pub library: Vec<LibraryItem>,
    #[serde(default)]
    pub subscriptions: Vec<Row>,
    /// Downloader tasks; each row's `hash` (= `id` = `infohash`) is its 40-hex infohash.
    #[serde(default)]
    pub downloads: Vec<Row>,
    /// `TransferJob` objects, served as given.
    #[serde(default)]
    pub transfers: Vec<Value>,
    #[serde(default)]
    pub sites: Vec<Site>,
    #[serde(default)]
    pub downloaders: Vec<Downloader>,
    #[serde(default)]
    pub download_paths: Vec<DownloadPath>,
    /// System settings by key.
    #[serde(default)]
    pub settings: Map<String, Value>,
    /// Optional settings groups for `config.system.get?group=…`: group → keys.
    #[serde(default)]
    pub setting_groups: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub scheduler: Vec<SchedulerJob>,
    /// The last search context (`search.results`); `search.torrents` replaces it. A cache,
    /// not a business effect.
    #[serde(default)]
    pub last_search: Option<LastSearch>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct User {
    pub id: i64,
    pub name: String,
    /// Plain text: this is a fake for tests and demos.
    pub password: String,
    #[serde(default)]
    pub super_user: bool,
    #[serde(default = "yes")]
    pub is_active: bool,
    #[serde(default)]
    pub avatar: Option<String>,
    #[serde(default = "one")]
    pub level: i64,
    #[serde(default)]
    pub permissions: Map<String, Value>,
}

fn yes() -> bool {
    true
}

fn one() -> i64 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Media {
    /// `themoviedb`, `douban`, `bangumi`, … (`tmdb` is read as `themoviedb`).
    pub media_source: String,
    pub media_id: String,
    pub title: String,
    /// `电影` or `电视剧`.
    #[serde(rename = "type")]
    pub media_type: String,
    #[serde(default)]
    pub year: Option<String>,
    #[serde(default)]
    pub original_title: Option<String>,
    #[serde(default)]
    pub en_title: Option<String>,
    /// Other names a search should find it by.
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub overview: Option<String>,
    #[serde(default)]
    pub poster_path: Option<String>,
    #[serde(default)]
    pub vote_average: Option<f64>,
    /// Season number → episode count, for series.
    #[serde(default)]
    pub seasons: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Torrent {
    pub media_source: String,
    pub media_id: String,
    #[serde(default)]
    pub season: Option<i64>,
    /// MoviePilot `TorrentInfo` fields; `title` and a magnet `enclosure` are required.
    pub torrent_info: Row,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LibraryItem {
    pub media_source: String,
    pub media_id: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub year: Option<String>,
    #[serde(default)]
    pub seasons: Vec<i64>,
    #[serde(default)]
    pub server: Option<String>,
}

/// A site row. `cookie`, `apikey`, `token` and `ua` are shown to superusers only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Site {
    pub id: i64,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// MoviePilot's switch; the evaluation world also calls it `enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_active: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pri: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ua: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apikey: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_interval: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downloader: Option<String>,
}

impl Site {
    /// Whether the site counts as active for `status=active|inactive`.
    pub fn active(&self) -> bool {
        self.is_active.or(self.enabled).unwrap_or(true)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Downloader {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The one used when `download.add` names none (else the first).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DownloadPath {
    pub name: String,
    pub storage: String,
    pub save_path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SchedulerJob {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// MoviePilot shows `等待` (waiting) or `正在运行` (running).
    #[serde(default = "waiting")]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run: Option<String>,
}

fn waiting() -> String {
    "等待".to_string()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LastSearch {
    #[serde(default)]
    pub params: Map<String, Value>,
    /// Context items `{meta_info, media_info, torrent_info}`.
    #[serde(default)]
    pub results: Vec<Value>,
}

/// The ~55 writable `Subscribe` fields, plus the v2 identity fields still accepted.
#[rustfmt::skip]
pub(crate) const SUBSCRIBE_FIELDS: &[&str] = &[
    "audio_format", "audio_quality", "backdrop", "bangumiid", "best_version", "best_version_full",
    "classification_policy_revision", "classification_rule_id", "classification_source",
    "completed_episode", "current_audio_format", "current_bit_depth", "current_bitrate",
    "current_priority", "current_sample_rate", "custom_words", "date", "description", "doubanid",
    "downloader", "effect", "episode_group", "episode_priority", "exclude", "execution_status",
    "filter", "filter_groups", "id", "imdbid", "include", "keyword", "lack_episode", "last_search",
    "last_update", "media_category", "media_category_id", "media_id", "media_source", "mediaid",
    "min_bit_depth", "min_bitrate", "min_sample_rate", "music_type", "name", "note", "poster",
    "quality", "resolution", "save_path", "search_imdbid", "search_interval", "season", "sites",
    "start_episode", "state", "tmdbid", "total_episode", "total_tracks", "tvdbid", "type",
    "username", "vote", "year",
];

/// `DownloaderTorrent` fields plus the evaluation world's identity fields.
#[rustfmt::skip]
const DOWNLOAD_ROW_FIELDS: &[&str] = &[
    "category", "content_path", "dlspeed", "download_limit", "downloader", "hash", "id",
    "infohash", "left_time", "media", "media_id", "media_source", "name", "path", "progress",
    "ratio_limit", "save_path", "season_episode", "seeding_time_limit", "site_name", "size",
    "state", "tags", "title", "trackers", "upload_limit", "upspeed", "userid", "username", "year",
];

/// `TorrentInfo` fields `download.add` accepts inside `torrent_in`.
#[rustfmt::skip]
pub(crate) const TORRENT_INFO_FIELDS: &[&str] = &[
    "category", "date_elapsed", "description", "downloadvolumefactor", "enclosure", "freedate",
    "freedate_diff", "grabs", "hit_and_run", "labels", "media_id", "media_source", "page_url",
    "peers", "pri_order", "pubdate", "seeders", "site", "site_cookie", "site_downloader",
    "site_name", "site_order", "site_proxy", "site_ua", "size", "title", "uploadvolumefactor",
    "volume_factor",
];

/// Canonical spelling of a media source, so `tmdb:1` and `themoviedb:1` are one identity.
pub(crate) fn canonical_source(source: &str) -> String {
    let s = source.trim().to_ascii_lowercase();
    match s.as_str() {
        "tmdb" => "themoviedb".to_string(),
        _ => s,
    }
}

fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A subscription's media identity: `media_source`+`media_id`, or the v2 `tmdbid` /
/// `doubanid` / `bangumiid` fields.
pub(crate) fn subscription_identity(row: &Row) -> Option<(String, String)> {
    if let (Some(source), Some(id)) = (
        row.get("media_source").and_then(scalar_string),
        row.get("media_id").and_then(scalar_string),
    ) {
        return Some((canonical_source(&source), id));
    }
    [
        ("tmdbid", "themoviedb"),
        ("doubanid", "douban"),
        ("bangumiid", "bangumi"),
    ]
    .iter()
    .find_map(|(field, source)| {
        row.get(*field)
            .and_then(scalar_string)
            .map(|id| (source.to_string(), id))
    })
}

/// The dedup key MoviePilot uses: identity, season and music type (never the name).
pub(crate) fn subscription_key(row: &Row) -> Option<(String, String, Value, Value)> {
    let (source, id) = subscription_identity(row)?;
    let season = row.get("season").cloned().unwrap_or(Value::Null);
    let music = row.get("music_type").cloned().unwrap_or(Value::Null);
    Some((source, id, season, music))
}

pub(crate) fn row_id(row: &Row) -> Option<i64> {
    row.get("id").and_then(Value::as_i64)
}

pub(crate) fn row_hash(row: &Row) -> Option<&str> {
    row.get("hash").and_then(Value::as_str)
}

/// Lower-case hex of a 40-hex infohash, or `None`.
pub(crate) fn normalise_hex_hash(s: &str) -> Option<String> {
    (s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())).then(|| s.to_ascii_lowercase())
}

pub(crate) fn unknown_fields<'a>(obj: &'a Row, allowed: &[&str]) -> Vec<&'a str> {
    obj.keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
        .collect()
}

impl StateFile {
    /// Parses and validates a state file's text. `origin` names it in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<StateFile> {
        let mut file: StateFile =
            serde_json::from_str(text).map_err(|e| EvalError::InvalidState {
                origin: origin.to_string(),
                message: e.to_string(),
            })?;
        file.state.validate(origin)?;
        Ok(file)
    }

    pub fn load(path: &Path) -> Result<StateFile> {
        let text = std::fs::read_to_string(path).map_err(|source| EvalError::ReadState {
            path: path.to_path_buf(),
            source,
        })?;
        StateFile::from_json(&text, &path.display().to_string())
    }
}

impl WorldState {
    /// Builds a state from JSON (the `state` section's shape), validated.
    pub fn from_value(value: Value) -> Result<WorldState> {
        let mut state: WorldState =
            serde_json::from_value(value).map_err(|e| EvalError::InvalidState {
                origin: "state".to_string(),
                message: e.to_string(),
            })?;
        state.validate("state")?;
        Ok(state)
    }

    /// Checks what serde cannot (row fields, identities, unique ids) and normalises download
    /// hashes to lower-case hex with `id` = `hash` = `infohash`.
    pub fn validate(&mut self, origin: &str) -> Result<()> {
        let bad = |message: String| EvalError::InvalidState {
            origin: origin.to_string(),
            message,
        };
        let mut seen = BTreeSet::new();
        for (i, u) in self.users.iter().enumerate() {
            if !seen.insert(u.id) || u.name.trim().is_empty() {
                return Err(bad(format!(
                    "state.users[{i}]: ids must be unique and names non-empty"
                )));
            }
        }
        let mut seen = BTreeSet::new();
        for (i, row) in self.subscriptions.iter().enumerate() {
            let extra = unknown_fields(row, SUBSCRIBE_FIELDS);
            if !extra.is_empty() {
                return Err(bad(format!(
                    "state.subscriptions[{i}]: unknown field(s) {extra:?}"
                )));
            }
            let id = row_id(row).filter(|id| *id > 0);
            match id {
                Some(id) if seen.insert(id) => {}
                _ => {
                    return Err(bad(format!(
                        "state.subscriptions[{i}]: `id` must be a unique positive integer"
                    )));
                }
            }
            if subscription_identity(row).is_none() {
                return Err(bad(format!(
                    "state.subscriptions[{i}]: needs `media_source` + `media_id` (or `tmdbid` / `doubanid` / `bangumiid`)"
                )));
            }
            if !matches!(
                row.get("season"),
                None | Some(Value::Null) | Some(Value::Number(_))
            ) {
                return Err(bad(format!(
                    "state.subscriptions[{i}]: `season` must be an integer or null"
                )));
            }
        }
        let mut seen = BTreeSet::new();
        for (i, row) in self.downloads.iter_mut().enumerate() {
            let extra = unknown_fields(row, DOWNLOAD_ROW_FIELDS);
            if !extra.is_empty() {
                return Err(bad(format!(
                    "state.downloads[{i}]: unknown field(s) {extra:?}"
                )));
            }
            let given = ["hash", "infohash", "id"]
                .iter()
                .find_map(|k| row.get(*k).and_then(Value::as_str));
            let Some(hash) = given.and_then(normalise_hex_hash) else {
                return Err(bad(format!(
                    "state.downloads[{i}]: `hash` must be a 40-hex infohash"
                )));
            };
            if !seen.insert(hash.clone()) {
                return Err(bad(format!(
                    "state.downloads[{i}]: duplicate infohash {hash}"
                )));
            }
            for k in ["id", "hash", "infohash"] {
                row.insert(k.to_string(), Value::String(hash.clone()));
            }
            row.entry("state")
                .or_insert_with(|| Value::String("downloading".into()));
        }
        for (i, t) in self.torrents.iter().enumerate() {
            let extra = unknown_fields(&t.torrent_info, TORRENT_INFO_FIELDS);
            let magnet = t
                .torrent_info
                .get("enclosure")
                .and_then(Value::as_str)
                .and_then(crate::magnet::infohash);
            if !extra.is_empty() || magnet.is_none() || t.torrent_info.get("title").is_none() {
                return Err(bad(format!(
                    "state.torrents[{i}].torrent_info: needs `title` and a magnet `enclosure` with xt=urn:btih:, and only TorrentInfo fields (unknown: {extra:?})"
                )));
            }
        }
        let mut seen = BTreeSet::new();
        for (i, s) in self.sites.iter().enumerate() {
            if !seen.insert(s.id) {
                return Err(bad(format!("state.sites[{i}]: duplicate id {}", s.id)));
            }
        }
        Ok(())
    }
}
