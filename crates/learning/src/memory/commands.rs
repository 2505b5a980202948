//! `/memory pending|approve|discard` — the user's own text API for proposals. Parsed by the host
//! from the user's latest message only, never from tool arguments: the model can never approve
//! or discard a proposal.

use super::apply::{dedup, has_drift};
use super::entries::usage;
use super::proposals::{StoredAction, is_id};
use super::request::Op;
use super::store::Scope;
use super::{MAX_PROPOSALS, Memory};
use mpa_protocol::{Actor, Lang};
use std::fs;

const USAGE: &str = "Usage: /memory pending [ID] · /memory approve ID · /memory discard ID";
const USAGE_ZH: &str = "用法：/memory pending [ID] · /memory approve ID · /memory discard ID";

impl Memory {
    /// Handle `/memory …` typed by the user, answered in `lang`. `None` when `text` is not a
    /// memory command.
    pub fn user_command(&self, actor: &Actor, text: &str, lang: Lang) -> Option<String> {
        let mut words = text.split_whitespace();
        if words.next()? != "/memory" {
            return None;
        }
        let sub = words.next();
        let arg = words.next();
        let usage = lang.pick(USAGE, USAGE_ZH);
        if words.next().is_some() {
            return Some(usage.to_string());
        }
        Some(match (sub, arg) {
            (Some("pending"), None) => self.render_pending(actor, lang),
            (Some("pending"), Some(id)) if is_id(id) => self.render_detail(actor, id, lang),
            (Some("approve"), Some(id)) if is_id(id) => self.approve(actor, id, lang),
            (Some("discard"), Some(id)) if is_id(id) => self.discard(actor, id, lang),
            (Some("pending" | "approve" | "discard"), Some(_)) => lang.pick(
                format!("Proposal ids are 32 lowercase hex characters. {usage}"),
                format!("提议 ID 是 32 个小写十六进制字符。{usage}"),
            ),
            _ => usage.to_string(),
        })
    }

    fn render_pending(&self, actor: &Actor, lang: Lang) -> String {
        let list = self.proposals(actor);
        if list.is_empty() {
            return lang
                .pick("No pending memory proposals.", "没有待处理的记忆提议。")
                .to_string();
        }
        let mut out = lang.pick(
            format!("{} pending memory proposal(s):\n", list.len()),
            format!("{} 条待处理的记忆提议：\n", list.len()),
        );
        for p in list.iter().take(MAX_PROPOSALS) {
            let ops = p.operations.len();
            out.push_str(&lang.pick(
                format!(
                    "- {} · {} · {ops} operation(s) · {}\n",
                    p.id,
                    p.target.as_str(),
                    p.summary_preview()
                ),
                format!(
                    "- {} · {} · {ops} 项操作 · {}\n",
                    p.id,
                    p.target.as_str(),
                    p.summary_preview()
                ),
            ));
        }
        out.push_str(lang.pick(
            "Details: /memory pending <ID> · apply: /memory approve <ID> · drop: /memory discard <ID>",
            "详情：/memory pending <ID> · 应用：/memory approve <ID> · 丢弃：/memory discard <ID>",
        ));
        out
    }

    fn render_detail(&self, actor: &Actor, id: &str, lang: Lang) -> String {
        let p = match self.load_proposal(actor, id, lang) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let (target, ops) = (p.target.as_str(), p.operations.len());
        let mut out = lang.pick(
            format!("Proposal {} for {target} ({ops} operation(s)):\n", p.id),
            format!("提议 {}，针对 {target}（{ops} 项操作）：\n", p.id),
        );
        for (i, op) in p.operations.iter().enumerate() {
            let action = match (op.action, lang) {
                (StoredAction::Add, Lang::En) => "add",
                (StoredAction::Replace, Lang::En) => "replace",
                (StoredAction::Remove, Lang::En) => "remove",
                (StoredAction::Add, Lang::Zh) => "添加",
                (StoredAction::Replace, Lang::Zh) => "替换",
                (StoredAction::Remove, Lang::Zh) => "删除",
            };
            out.push_str(&format!("{}. {action}\n", i + 1));
            if let Some(Some(prev)) = p.previous.get(i) {
                out.push_str(&lang.pick(
                    format!("   original entry: {prev}\n"),
                    format!("   原条目：{prev}\n"),
                ));
            }
            if let Some(c) = &op.content {
                out.push_str(&lang.pick(
                    format!("   new content: {c}\n"),
                    format!("   新内容：{c}\n"),
                ));
            }
        }
        out.push_str(&lang.pick(
            format!("Apply with /memory approve {id} or drop with /memory discard {id}."),
            format!("应用：/memory approve {id}；丢弃：/memory discard {id}。"),
        ));
        out
    }

    /// Replays a proposal against the entries it was pinned to; refuses (and keeps it) when
    /// any of them changed since.
    fn approve(&self, actor: &Actor, id: &str, lang: Lang) -> String {
        let p = match self.load_proposal(actor, id, lang) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let store = self.store(actor, Scope::User, p.target);
        let (_guard, raw, list) = match store.lock_and_read() {
            Ok(v) => v,
            Err(e) => return not_applied(lang, id, &e.to_string()),
        };
        if has_drift(&raw, &list, store.limit) {
            return lang.pick(
                format!(
                    "Proposal {id} was not applied: {} was edited outside the memory tool. The proposal was kept.",
                    store.label
                ),
                format!(
                    "提议 {id} 未应用：{} 在记忆工具之外被修改过。提议已保留。",
                    store.label
                ),
            );
        }
        let mut work = list.clone();
        for (i, stored) in p.operations.iter().enumerate() {
            let op = Op::from(stored);
            match &op {
                Op::Add { content } => {
                    if !content.is_empty() && !work.iter().any(|e| e == content) {
                        work.push(content.clone());
                    }
                }
                Op::Replace { .. } | Op::Remove { .. } => {
                    let pinned = p.previous.get(i).cloned().flatten().unwrap_or_default();
                    let Some(at) = work.iter().position(|e| *e == pinned) else {
                        let n = i + 1;
                        return lang.pick(
                            format!(
                                "Proposal {id} was not applied: the entry it changes (operation {n}) no longer exists as it was when proposed. The proposal was kept; discard it with /memory discard {id}."
                            ),
                            format!(
                                "提议 {id} 未应用：它要修改的条目（第 {n} 项操作）已不是提议时的样子。提议已保留；可用 /memory discard {id} 丢弃。"
                            ),
                        );
                    };
                    if let Op::Remove { .. } = op {
                        work.remove(at);
                    } else {
                        work[at] = op.replacement(&work[at]);
                    }
                }
            }
        }
        dedup(&mut work);
        if p.batch && !list.is_empty() && work.is_empty() {
            return lang.pick(
                format!(
                    "Proposal {id} was not applied: it would remove every entry. The proposal was kept."
                ),
                format!("提议 {id} 未应用：它会删除全部条目。提议已保留。"),
            );
        }
        let total = usage(&work);
        if total > store.limit {
            let (label, limit) = (&store.label, store.limit);
            return lang.pick(
                format!(
                    "Proposal {id} was not applied: {label} would reach {total}/{limit} chars. The proposal was kept."
                ),
                format!("提议 {id} 未应用：{label} 将达到 {total}/{limit} 字符。提议已保留。"),
            );
        }
        if let Err(e) = store.write(&work) {
            return not_applied(lang, id, &e.to_string());
        }
        match fs::remove_file(self.proposal_path(actor, id)) {
            Ok(()) => {
                let (target, n, limit) = (p.target.as_str(), work.len(), store.limit);
                lang.pick(
                    format!(
                        "Applied proposal {id} to {target} ({n} entries, {total}/{limit} chars)."
                    ),
                    format!("已将提议 {id} 应用到 {target}（{n} 条，{total}/{limit} 字符）。"),
                )
            }
            Err(_) => lang.pick(
                format!(
                    "Applied proposal {id}, but its file could not be deleted (cleanup_pending); discard it with /memory discard {id}."
                ),
                format!(
                    "已应用提议 {id}，但其文件未能删除（cleanup_pending）；可用 /memory discard {id} 丢弃。"
                ),
            ),
        }
    }

    fn discard(&self, actor: &Actor, id: &str, lang: Lang) -> String {
        match fs::remove_file(self.proposal_path(actor, id)) {
            Ok(()) => lang.pick(
                format!("Discarded proposal {id}; memory is unchanged."),
                format!("已丢弃提议 {id}；记忆未改变。"),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => lang.pick(
                format!("No pending memory proposal {id}."),
                format!("没有待处理的记忆提议 {id}。"),
            ),
            Err(e) => lang.pick(
                format!("Could not discard proposal {id}: {e}"),
                format!("未能丢弃提议 {id}：{e}"),
            ),
        }
    }
}

fn not_applied(lang: Lang, id: &str, why: &str) -> String {
    lang.pick(
        format!("Proposal {id} was not applied: {why}"),
        format!("提议 {id} 未应用：{why}"),
    )
}
