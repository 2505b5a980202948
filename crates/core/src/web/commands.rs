//! The slash commands a user may type (`GET /api/v1/agent/commands`): the host commands answered
//! before the model (`turn::host_command`), with what they do in both languages. Administrators
//! also see the ones only they may run.

use mpa_protocol::Actor;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Description {
    pub en: &'static str,
    pub zh: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct Command {
    pub name: &'static str,
    pub usage: &'static str,
    pub description: Description,
    pub admin_only: bool,
}

const fn command(
    name: &'static str,
    usage: &'static str,
    en: &'static str,
    zh: &'static str,
    admin_only: bool,
) -> Command {
    Command {
        name,
        usage,
        description: Description { en, zh },
        admin_only,
    }
}

const ALL: [Command; 9] = [
    command(
        "/memory pending",
        "/memory pending [ID]",
        "List memory proposals waiting for you, or show one",
        "查看待你确认的记忆提议，或查看其中一条",
        false,
    ),
    command(
        "/memory approve",
        "/memory approve ID",
        "Apply a memory proposal",
        "应用一条记忆提议",
        false,
    ),
    command(
        "/memory discard",
        "/memory discard ID",
        "Discard a memory proposal; memory stays as it is",
        "丢弃一条记忆提议，记忆保持不变",
        false,
    ),
    command(
        "/skills pin",
        "/skills pin NAME",
        "Pin a personal skill: the background review will not change it",
        "固定个人技能：后台回顾不会修改它",
        false,
    ),
    command(
        "/skills unpin",
        "/skills unpin NAME",
        "Unpin a personal skill",
        "取消固定个人技能",
        false,
    ),
    command(
        "/skills adopt",
        "/skills adopt NAME",
        "Let the background review maintain a skill you wrote",
        "允许后台回顾维护你编写的技能",
        false,
    ),
    command(
        "/skills restore",
        "/skills restore NAME",
        "Restore a personal skill from the archive",
        "从归档中恢复个人技能",
        false,
    ),
    command(
        "/persona list",
        "/persona list",
        "List the personas (* marks the active one)",
        "列出人格（* 为当前启用）",
        false,
    ),
    command(
        "/persona use",
        "/persona use NAME",
        "Switch the global persona for new sessions",
        "切换全局人格（新会话生效）",
        true,
    ),
];

/// The commands `actor` may run.
pub fn available(actor: &Actor) -> Vec<Command> {
    ALL.iter()
        .filter(|c| actor.is_admin || !c.admin_only)
        .cloned()
        .collect()
}
