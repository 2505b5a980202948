//! Tool discovery (spec runtime.md §3): with `LLM_MAX_TOOLS > 0` the first model call of a user
//! request offers the always-on internal tools plus the N most relevant others; `search_tools`
//! finds more in the caller's authorised catalogue (offline: it never installs, connects or
//! widens anything), and the next model call gets the schemas of the most recent discoveries that
//! fit its budget. MoviePilot operations are searched too, so `search_tools("订阅")` points at
//! `moviepilot_api` with the matching operation ids and the model never needs all of them.
//!
//! Discovery state ([`Discovery`]) lives in the session state for one user request.

use super::registry::ToolView;
use super::{ToolContext, ToolMeta, ToolOutput, TypedTool};
use mpa_protocol::{Actor, Outcome, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;

pub const MAX_RESULTS: usize = 8;
pub const DEFAULT_RESULTS: usize = 5;
/// Discoveries kept as candidates (the most recent).
pub const WINDOW_SIZE: usize = 16;
/// Schema budget for discovered tools, capped to 10 % of the window.
pub const SCHEMA_TOKENS: u64 = 4096;
pub const SCHEMA_WINDOW_FRACTION: f64 = 0.10;
/// The context budget leaves 15 % of the window free.
pub const CONTEXT_FRACTION: f64 = 0.85;
const MAX_OPERATIONS: usize = 32;

/// Capability tags and the words (English and Chinese) that reach them.
pub const ALIASES: &[(&str, &[&str])] = &[
    (
        "media",
        &["media", "movie", "movies", "tv", "电影", "电视剧", "剧集"],
    ),
    ("resource", &["resource", "torrent", "种子", "资源"]),
    ("site", &["site", "sites", "tracker", "站点"]),
    (
        "subscription",
        &["subscription", "subscriptions", "subscribe", "订阅", "追剧"],
    ),
    ("download", &["download", "downloads", "downloader", "下载"]),
    (
        "library",
        &["library", "mediaserver", "媒体库", "媒体服务器"],
    ),
    ("transfer", &["transfer", "organize", "整理", "转移"]),
    ("system", &["system", "系统"]),
    ("settings", &["settings", "configuration", "配置", "设置"]),
    ("plugin", &["plugin", "plugins", "插件"]),
    ("workflow", &["workflow", "workflows", "工作流"]),
    ("scheduler", &["scheduler", "schedule", "定时", "调度"]),
    ("agent_task", &["agent_task", "智能体任务", "后台任务"]),
    ("file", &["file", "files", "文件"]),
    (
        "directory",
        &[
            "directory",
            "directories",
            "folder",
            "folders",
            "目录",
            "文件夹",
        ],
    ),
    ("web", &["web", "internet", "网页", "互联网"]),
    ("command", &["command", "shell", "命令", "终端"]),
    ("filter_rule", &["filter", "过滤", "筛选规则"]),
    ("persona", &["persona", "人格"]),
    ("recommendation", &["recommendation", "recommend", "推荐"]),
    ("metadata", &["metadata", "scrape", "元数据", "刮削"]),
    ("skill", &["skill", "skills", "技能"]),
];

const STOP_WORDS: &[&str] = &[
    "the", "a", "an", "and", "or", "for", "to", "of", "in", "on", "with", "please", "find", "show",
    "help", "me", "my", "tool", "tools",
];

/// MoviePilot operation categories → capability tags.
fn category_tag(category: &str) -> &str {
    match category {
        "config" => "settings",
        "torrent" | "search" => "resource",
        "filter" => "filter_rule",
        "storage" => "directory",
        "music" | "subtitle" => "media",
        other => other,
    }
}

fn is_latin(term: &str) -> bool {
    term.is_ascii()
}

/// Whether `term` occurs in `text` (both lower case): Latin terms on word boundaries, others
/// (Chinese) as substrings.
fn mentions(text: &str, term: &str) -> bool {
    if !is_latin(term) {
        return text.contains(term);
    }
    text.match_indices(term).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + term.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric())
            && !after.is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

/// Unique alphanumeric tokens of the case-folded query, stop words removed.
pub fn keywords(query: &str) -> Vec<String> {
    let lower = query.to_lowercase();
    let mut out: Vec<String> = Vec::new();
    for t in lower.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if t.is_empty() || STOP_WORDS.contains(&t) || out.iter().any(|o| o == t) {
            continue;
        }
        out.push(t.to_string());
    }
    out
}

/// Tags the keywords reach through the alias table (a Chinese keyword reaches a tag when it
/// contains one of its aliases, so "下载任务" reaches `download`).
fn reached_tags(keywords: &[String]) -> Vec<&'static str> {
    ALIASES
        .iter()
        .filter(|(tag, aliases)| {
            keywords.iter().any(|k| {
                k == tag
                    || aliases
                        .iter()
                        .any(|a| k == a || (!is_latin(a) && k.contains(a)))
            })
        })
        .map(|(tag, _)| *tag)
        .collect()
}

/// One searchable tool of the caller's catalogue.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    /// Always offered (internal tools); never a discovery.
    pub always_on: bool,
    /// MoviePilot operations (id, category) when this is the gateway tool.
    pub operations: Vec<(&'static str, &'static str)>,
}

impl Entry {
    fn new(spec: &ToolSpec, meta: &ToolMeta) -> Self {
        let text = format!("{} {}", spec.name, spec.description).to_lowercase();
        let tags = ALIASES
            .iter()
            .filter(|(tag, aliases)| {
                mentions(&text, tag) || aliases.iter().any(|a| mentions(&text, a))
            })
            .map(|(tag, _)| (*tag).to_string())
            .collect();
        Entry {
            name: spec.name.clone(),
            description: spec.description.clone(),
            tags,
            always_on: meta.internal,
            operations: Vec::new(),
        }
    }

    /// Score of spec §3.2: exact name 10000; else 100 per reached tag the tool has, plus per
    /// keyword 10 (name), 5 (tags), 1 (description).
    fn score(&self, query: &str, kw: &[String], reached: &[&str]) -> u32 {
        if self.name.eq_ignore_ascii_case(query.trim()) {
            return 10_000;
        }
        let name = self.name.to_lowercase();
        let desc = self.description.to_lowercase();
        let mut s = 100
            * reached
                .iter()
                .filter(|t| self.tags.iter().any(|x| x == *t))
                .count() as u32;
        for k in kw {
            if mentions(&name, k) {
                s += 10;
            }
            if self.tags.iter().any(|t| mentions(t, k)) {
                s += 5;
            }
            if mentions(&desc, k) {
                s += 1;
            }
        }
        s
    }

    /// Matching operation ids of the gateway tool.
    fn matching_operations(&self, kw: &[String], reached: &[&str]) -> Vec<&'static str> {
        self.operations
            .iter()
            .filter(|(id, cat)| {
                reached.contains(&category_tag(cat))
                    || kw.iter().any(|k| is_latin(k) && mentions(id, k))
            })
            .map(|(id, _)| *id)
            .take(MAX_OPERATIONS)
            .collect()
    }
}

/// The caller's authorised catalogue: every tool it may see, the gateway's operations under
/// `moviepilot_api`.
pub fn catalogue_for(tools: &ToolView, actor: &Actor) -> Vec<Entry> {
    tools
        .iter()
        .filter(|t| super::policy::visible(actor, &t.meta))
        .map(|t| {
            let mut e = Entry::new(&t.spec, &t.meta);
            // A multiplexing tool (`moviepilot_api`) is found by the operations it offers this
            // actor on this server.
            if let Some(ops) = t.tool.offered_operations(actor) {
                for (_, c) in &ops {
                    let tag = category_tag(c).to_string();
                    if ALIASES.iter().any(|(t, _)| *t == tag) && !e.tags.contains(&tag) {
                        e.tags.push(tag);
                    }
                }
                e.operations = ops;
            }
            e
        })
        .collect()
}

/// The ranked matches of a query (score > 0), best first, then by name.
pub fn rank<'a>(catalogue: &'a [Entry], query: &str) -> Vec<(&'a Entry, u32)> {
    let kw = keywords(query);
    if kw.is_empty() {
        return Vec::new();
    }
    let reached = reached_tags(&kw);
    let mut scored: Vec<(&Entry, u32)> = catalogue
        .iter()
        .map(|e| (e, e.score(query, &kw, &reached)))
        .filter(|(_, s)| *s > 0)
        .collect();
    scored.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.name.cmp(&b.0.name)));
    scored
}

/// The first-call selection: the `n` most relevant non-always-on tools for the user's text,
/// topped up in name order to `n`.
pub fn select(catalogue: &[Entry], text: &str, n: usize) -> Vec<String> {
    let mut picked: Vec<String> = rank(catalogue, text)
        .into_iter()
        .filter(|(e, _)| !e.always_on)
        .map(|(e, _)| e.name.clone())
        .take(n)
        .collect();
    for e in catalogue.iter().filter(|e| !e.always_on) {
        if picked.len() >= n {
            break;
        }
        if !picked.contains(&e.name) {
            picked.push(e.name.clone());
        }
    }
    picked
}

/// The tools a user request starts with, and its discovery state: every visible tool but
/// `search_tools` when `max_tools` is 0; else the always-on internal tools (with `search_tools`)
/// plus the `max_tools` most relevant others for the request's text.
/// Every tool but `search_tools` (offered only with discovery on).
pub fn without_discovery(all: Vec<ToolSpec>) -> Vec<ToolSpec> {
    all.into_iter()
        .filter(|s| s.name != SearchTools::NAME)
        .collect()
}

pub fn first_call(
    tools: &ToolView,
    actor: &Actor,
    text: &str,
    max_tools: u32,
    all: &[ToolSpec],
) -> (Vec<ToolSpec>, Discovery) {
    if max_tools == 0 {
        return (without_discovery(all.to_vec()), Discovery::default());
    }
    let catalogue = catalogue_for(tools, actor);
    let mut baseline = select(&catalogue, text, max_tools as usize);
    baseline.extend(
        catalogue
            .iter()
            .filter(|e| e.always_on)
            .map(|e| e.name.clone()),
    );
    let specs = all
        .iter()
        .filter(|s| baseline.contains(&s.name))
        .cloned()
        .collect();
    (
        specs,
        Discovery {
            enabled: true,
            catalogue,
            baseline,
            discovered: Vec::new(),
        },
    )
}

/// One user request's discovery state.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    pub enabled: bool,
    pub catalogue: Vec<Entry>,
    /// First-call selection plus the always-on tools.
    pub baseline: Vec<String>,
    /// Most recent last, at most [`WINDOW_SIZE`].
    pub discovered: Vec<String>,
}

impl Discovery {
    /// Records matches (given best first) so the most relevant is the most recent.
    pub fn record(&mut self, names: &[String]) {
        for n in names.iter().rev() {
            if self.baseline.contains(n) {
                continue;
            }
            self.discovered.retain(|d| d != n);
            self.discovered.push(n.clone());
        }
        let extra = self.discovered.len().saturating_sub(WINDOW_SIZE);
        self.discovered.drain(..extra);
    }
}

/// The status of each candidate for one request, and the names that were enabled.
pub fn admit(
    discovery: &Discovery,
    specs: &BTreeMap<&str, &ToolSpec>,
    window: u64,
    estimated_input_tokens: u64,
    counter: mpa_model::TokenCounter,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut schema = if window > 0 {
        SCHEMA_TOKENS.min((window as f64 * SCHEMA_WINDOW_FRACTION) as u64)
    } else {
        SCHEMA_TOKENS
    };
    let mut context = if window > 0 {
        ((window as f64 * CONTEXT_FRACTION) as u64).saturating_sub(estimated_input_tokens)
    } else {
        SCHEMA_TOKENS
    };
    let mut statuses = BTreeMap::new();
    let mut enabled = Vec::new();
    for name in discovery.discovered.iter().rev() {
        let status = if discovery.baseline.contains(name) {
            "already_selected"
        } else if let Some(spec) = specs.get(name.as_str()) {
            let cost = counter.budgeted(counter.tool_tokens(spec));
            if cost > schema {
                "schema_budget_exceeded"
            } else if cost > context {
                "context_budget_exceeded"
            } else {
                schema -= cost;
                context -= cost;
                enabled.push(name.clone());
                "enabled"
            }
        } else {
            "unavailable_in_current_catalog"
        };
        statuses.insert(name.clone(), status.to_string());
    }
    (statuses, enabled)
}

/// The block the model reads about discovered tools (outbound only, after the transcript).
pub fn availability_notice(statuses: &BTreeMap<String, String>) -> String {
    format!(
        "<tool_discovery_availability>\n{}\nThis supersedes pending search_tools results: tools marked \
         enabled are callable now; only the {WINDOW_SIZE} most recent discoveries are candidates; \
         tools disabled for budget may fit later.\n</tool_discovery_availability>",
        serde_json::to_string(statuses).unwrap_or_default()
    )
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchToolsArgs {
    /// An exact tool name or concise keywords (English or Chinese), 1-160 characters.
    pub search: String,
    /// Candidates to return, 1-8. Default 5.
    #[serde(default)]
    pub limit: Option<usize>,
}

pub struct SearchTools;

#[async_trait::async_trait]
impl TypedTool for SearchTools {
    type Args = SearchToolsArgs;
    const NAME: &'static str = "search_tools";

    fn description(&self) -> String {
        "Find tools that are not offered yet, by exact name or keywords (English or Chinese, e.g. \
         \"下载\", \"subscription\"). Matching candidates are offered from the next model call on, \
         as far as they fit; the next call says which were enabled. For MoviePilot it also lists \
         the matching moviepilot_api operation ids."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        ToolMeta::read().internal().self_capped()
    }

    async fn run(&self, ctx: ToolContext, args: SearchToolsArgs) -> ToolOutput {
        let n = args.search.chars().count();
        let limit = args.limit.unwrap_or(DEFAULT_RESULTS);
        if !(1..=160).contains(&n) || !(1..=MAX_RESULTS).contains(&limit) {
            return ToolOutput::failure(
                "invalid_arguments",
                format!("search must be 1-160 characters and limit 1-{MAX_RESULTS}"),
            );
        }
        let discovery = ctx.session.slot::<Discovery>();
        let mut d = crate::sync::lock(&discovery);
        if !d.enabled {
            return ToolOutput::failure(
                "discovery_disabled",
                "tool discovery is off (LLM_MAX_TOOLS=0): every tool is already offered",
            );
        }
        let kw = keywords(&args.search);
        let reached = reached_tags(&kw);
        let ranked = rank(&d.catalogue, &args.search);
        let mut tools = Vec::new();
        let mut names = Vec::new();
        for (e, _) in ranked.iter().take(limit) {
            let selected = d.baseline.contains(&e.name);
            let mut v = serde_json::json!({
                "name": e.name,
                "description": e.description.chars().take(400).collect::<String>(),
                "tags": e.tags.iter().take(6).map(|t| t.chars().take(48).collect::<String>()).collect::<Vec<_>>(),
                "status": if selected { "already_selected" } else { "pending_budget_check" },
            });
            let ops = e.matching_operations(&kw, &reached);
            if !ops.is_empty() {
                v["operations"] = serde_json::json!(ops);
            }
            tools.push(v);
            names.push(e.name.clone());
        }
        d.record(&names);
        let message = if tools.is_empty() {
            "no matching tools; try a precise name"
        } else {
            "candidates registered; the next model call reports which fit the budget and are enabled"
        };
        ToolOutput::json(
            &serde_json::json!({"success": true, "tools": tools, "message": message}),
            Outcome::Succeeded,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, desc: &str) -> Entry {
        Entry::new(
            &ToolSpec {
                name: name.into(),
                description: desc.into(),
                parameters: serde_json::json!({}),
            },
            &ToolMeta::read(),
        )
    }

    #[test]
    fn aliases_reach_tags_in_both_languages() {
        let cat = vec![
            entry(
                "transfer_files",
                "Organize downloaded files into the library",
            ),
            entry("add_download", "Start a torrent download"),
            entry("tv_lookup", "Look up a tv show"),
        ];
        assert_eq!(rank(&cat, "整理")[0].0.name, "transfer_files");
        assert_eq!(rank(&cat, "下载")[0].0.name, "add_download");
        assert_eq!(rank(&cat, "add_download")[0].1, 10_000);
        assert!(
            rank(&cat, "the tools").is_empty(),
            "stop words only: nothing"
        );
        // Latin terms on word boundaries: "tv" is not found inside "activity".
        assert!(!mentions("activity log", "tv"));
        assert_eq!(keywords("Find the 下载 TOOL"), vec!["下载"]);
    }

    #[test]
    fn discoveries_keep_the_sixteen_most_recent_and_the_best_last() {
        let mut d = Discovery::default();
        let names: Vec<String> = (0..20).map(|i| format!("t{i:02}")).collect();
        d.record(&names);
        assert_eq!(d.discovered.len(), WINDOW_SIZE);
        assert_eq!(d.discovered.last().unwrap(), "t00");
        d.record(&["t19".to_string()]);
        assert_eq!(d.discovered.last().unwrap(), "t19");
        assert_eq!(d.discovered.len(), WINDOW_SIZE);
    }
}
