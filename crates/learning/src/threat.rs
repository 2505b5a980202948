//! Threat scanning for text that is injected into the system prompt (memory entries, skills).
//!
//! Shared by memory and skills (and, later, context files). Pure: no I/O.
//!
//! Credentials: what memory and skills hold reaches every later session's system prompt, so a
//! write that carries one (an API key, a token, a password — whatever `mpa-redact`, the redactor
//! of captured evidence, would replace) is refused ([`first_block`] → [`Finding::Credential`]),
//! and everything shown to a model from those files goes through [`shown`], so a credential an
//! older version saved stops at the file.
//!
//! Algorithm (spec learning-guardrails §1.10): truncate to [`SCAN_WINDOW`] chars; report
//! invisible / bidi code points on the raw text; NFKC-normalise (folds full-width forms);
//! run the case-insensitive pattern catalogue of the requested scope. Every pattern runs in
//! one `RegexSet` pass — the `regex` crate is linear time, so the bounded word filler between
//! anchors keeps the reference semantics without any backtracking risk.
//!
//! The set runs over bytes with ASCII-only case folding and word classes (`(?i-u)`): every
//! anchor word is ASCII and NFKC already folded compatibility forms (full-width letters,
//! U+3000 spaces, the Kelvin sign) to ASCII, while Unicode classes would make the lazy DFA
//! give up on CJK text (measured: 1 MB/s instead of hundreds).

use regex::bytes::{Regex, RegexSet};
use std::sync::OnceLock;
use unicode_normalization::{IsNormalized, UnicodeNormalization};

/// Only the first this-many chars are scanned (bounded runtime per entry).
pub const SCAN_WINDOW: usize = 65_536;

/// Which patterns apply. Scopes are cumulative: `Strict` ⊃ `Context` ⊃ `All`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ScanScope {
    All,
    Context,
    Strict,
}

const INVISIBLE: &[char] = &[
    '\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{2062}', '\u{2063}', '\u{2064}', '\u{FEFF}',
    '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}', '\u{2068}',
    '\u{2069}',
];

/// Bounded filler: up to 8 words between two anchors.
const F: &str = r"(?:\S+\s+){0,8}";
const MODIFY: &str = r"(?:modify|edit|write|overwrite|append|change|update|replace|rewrite)";

// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub struct Catalogue {
    ids: Vec<&'static str>,
    scopes: Vec<ScanScope>,
    set: RegexSet,
    hardcoded_secret: Regex,
    shouty: Regex,
}

fn patterns() -> Vec<(&'static str, ScanScope, String)> {
    use ScanScope::{All, Context, Strict};
    vec![
        (
            "prompt_injection",
            All,
            format!(r"\bignore\s+{F}(?:previous|all|above|prior)\b\s*{F}instructions\b"),
        ),
        ("sys_prompt_override", All, r"\bsystem\s+prompt\s+override\b".into()),
        (
            "disregard_rules",
            All,
            format!(r"\bdisregard\s+{F}(?:your|all|any)\s+{F}(?:instructions|rules|guidelines)\b"),
        ),
        (
            "bypass_restrictions",
            All,
            format!(
                r"\bact\s+as\s+(?:if|though)\s+you\s+{F}(?:have\s+no|don'?t\s+have|do\s+not\s+have)\s+{F}(?:restrictions|limits|rules)\b"
            ),
        ),
        (
            "html_comment_injection",
            All,
            r"<!--[^>]*\b(?:ignore|override|system|secret|hidden)\b[^>]*-->".into(),
        ),
        (
            "hidden_div",
            All,
            r#"<div\b[^>]*style\s*=\s*["'][^"']*display\s*:\s*none"#.into(),
        ),
        (
            "translate_execute",
            All,
            format!(r"\btranslate\s+{F}into\s+{F}(?:execute|run|eval)\b"),
        ),
        (
            "deception_hide",
            All,
            format!(r"\b(?:do\s+not|don'?t)\s+{F}tell\s+{F}the\s+user\b"),
        ),
        (
            "exfil_curl",
            All,
            r"\bcurl\b[^\n]*\$\{?\w*(?:KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)\b".into(),
        ),
        (
            "exfil_wget",
            All,
            r"\bwget\b[^\n]*\$\{?\w*(?:KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)\b".into(),
        ),
        (
            "read_secrets",
            All,
            r"\bcat\s+[^\n]*(?:\.env\b|credentials|\.netrc|\.pgpass|\.npmrc|\.pypirc)".into(),
        ),
        ("role_hijack", Context, format!(r"\byou\s+are\s+{F}now\s+(?:a|an|the)\b")),
        (
            "role_pretend",
            Context,
            r"\bpretend\s+(?:to\s+be|you\s+are|that\s+you\s+are)\b".into(),
        ),
        (
            "leak_system_prompt",
            Context,
            format!(r"\boutput\s+{F}(?:system|initial)\s+prompt\b"),
        ),
        (
            "remove_filters",
            Context,
            format!(r"\brespond\s+without\s+{F}(?:restrictions|filters|safety)\b"),
        ),
        (
            "fake_update",
            Context,
            format!(r"\byou\s+have\s+been\s+{F}(?:updated|upgraded|patched)\s+to\b"),
        ),
        ("identity_override", Context, r"\bname\s+yourself\s+\S+".into()),
        (
            "c2_node_registration",
            Context,
            r"\bregister\s+(?:this\s+)?(?:node|agent|machine|host|implant)\s+(?:with|to|at)\b"
                .into(),
        ),
        (
            "c2_heartbeat",
            Context,
            r"\b(?:heartbeat|beacon|check[\s-]?in)\s+(?:to|with)\b".into(),
        ),
        (
            "c2_task_pull",
            Context,
            format!(
                r"\b(?:fetch|pull|poll|retrieve)\s+{F}(?:tasks|commands|jobs)\s+from\s+(?:the\s+)?(?:server|c2|controller|operator)\b"
            ),
        ),
        (
            "c2_network_connect",
            Context,
            r"\bconnect\s+(?:back\s+)?to\s+(?:the\s+)?(?:c2|command\s+server|controller|operator)\b"
                .into(),
        ),
        (
            "forced_action",
            Context,
            format!(r"\byou\s+must\s+{F}(?:register|connect|report|beacon)\b"),
        ),
        (
            "anti_forensic_oneliner",
            Context,
            r"(?:\bhistory\s+-c\b|\bunset\s+HISTFILE\b|\brm\s+-\w*f\w*\s+\S*\.bash_history)".into(),
        ),
        (
            "anti_forensic_disk",
            Context,
            r"(?:\bshred\s+-|\bdd\s+if=/dev/(?:zero|urandom)\s+of=/dev/|\bwipe\s+(?:the\s+)?(?:logs|disk)\b)"
                .into(),
        ),
        (
            "env_var_unset_agent",
            Context,
            r"\bunset\s+\w*(?:CLAUDE|CODEX|HERMES|AGENT|OPENAI|ANTHROPIC)\w*".into(),
        ),
        (
            "known_c2_framework",
            Context,
            r"(?:\bcobalt\s*strike\b|\bmetasploit\b|\bbrainworm\b|\b(?:sliver|havoc|mythic)\s+(?:c2|implant|beacon|teamserver|framework)\b)"
                .into(),
        ),
        (
            "c2_explicit",
            Context,
            r"\bc2\s+(?:server|channel|endpoint|infrastructure|beacon)\b".into(),
        ),
        ("c2_explicit_long", Context, r"\bcommand[\s-]+and[\s-]+control\b".into()),
        (
            "send_to_url",
            Strict,
            format!(r"\b(?:send|post|upload|transmit)\s+{F}(?:to|at)\s+https?://"),
        ),
        (
            "context_exfil",
            Strict,
            format!(
                r"\b(?:include|output|print|share)\s+{F}(?:conversation|chat\s+history|previous\s+messages|(?:full|entire)\s+context)\b"
            ),
        ),
        ("ssh_backdoor", Strict, r"authorized_keys".into()),
        (
            "ssh_access",
            Strict,
            r"(?:>|\b(?:write|writes|writing|append|echo|add|cp|mv|tee|install)\b|\bopen\()[^\n]*(?:~|\$HOME|\$\{HOME\})/\.ssh\b"
                .into(),
        ),
        ("hermes_env", Strict, r"~/\.hermes/\.env".into()),
        (
            "agent_config_mod",
            Strict,
            format!(r"\b{MODIFY}\s+{F}\S*(?:AGENTS\.md|CLAUDE\.md|\.cursorrules|\.clinerules)"),
        ),
        (
            "hermes_config_mod",
            Strict,
            format!(r"\b{MODIFY}\s+{F}\S*(?:\.hermes/config\.yaml|SOUL\.md)"),
        ),
        ("hardcoded_secret", Strict, HARDCODED_SECRET.into()),
    ]
}

const HARDCODED_SECRET: &str =
    r#"\b(?:api[_-]?key|token|secret|password)\s*[=:]\s*["']([A-Za-z0-9+/=_\-]{20,})["']"#;

// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub fn catalogue() -> Option<&'static Catalogue> {
    static CAT: OnceLock<Option<Catalogue>> = OnceLock::new();
    CAT.get_or_init(|| {
        let pats = patterns();
        let set = RegexSet::new(pats.iter().map(|(_, _, p)| format!("(?i-u){p}"))).ok()?;
        Some(Catalogue {
            ids: pats.iter().map(|(id, _, _)| *id).collect(),
            scopes: pats.iter().map(|(_, s, _)| *s).collect(),
            set,
            hardcoded_secret: Regex::new(&format!("(?i-u){HARDCODED_SECRET}")).ok()?,
            shouty: Regex::new(r"(?-u)^[A-Z][A-Z0-9_]*$").ok()?,
        })
    })
    .as_ref()
}

/// One reason a text was flagged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    Invisible(char),
    Pattern(&'static str),
    /// The catalogue failed to compile: scanning fails closed.
    ScannerUnavailable,
    /// Credentials of these kinds (`api_key`, `token`, `password`, …), as the redactor names them.
    Credential(Vec<String>),
}

impl Finding {
    pub fn id(&self) -> String {
        match self {
            Finding::Invisible(c) => format!("invisible_unicode_U+{:04X}", *c as u32),
            Finding::Pattern(id) => (*id).to_string(),
            Finding::ScannerUnavailable => "scanner_unavailable".to_string(),
            Finding::Credential(_) => "credential".to_string(),
        }
    }

    /// The write-blocking message shown to the model.
    pub fn block_message(&self) -> String {
        match self {
            Finding::Invisible(c) => format!(
                "Blocked: content contains invisible unicode character U+{:04X} (possible injection).",
                *c as u32
            ),
            Finding::Pattern(id) => format!(
                "Blocked: content matches threat pattern '{id}'. Content is injected into the system prompt and must not contain injection or exfiltration payloads."
            ),
            Finding::ScannerUnavailable => {
                "Blocked: the threat scanner is unavailable, so nothing can be written.".to_string()
            }
            Finding::Credential(kinds) => format!(
                "Blocked: content contains a credential ({}). Credentials are never saved in memory or skills: they would reach every later session's system prompt. Save what matters without the value (for example \"the user's OpenAI key is set in MoviePilot's settings\") and tell the user the value itself was not stored.",
                kinds.join(", ")
            ),
        }
    }
}

/// Every finding for `text` under `scope` (invisible characters first, then pattern ids in
/// catalogue order).
pub fn scan(text: &str, scope: ScanScope) -> Vec<Finding> {
    let window = match text.char_indices().nth(SCAN_WINDOW) {
        Some((i, _)) => &text[..i],
        None => text,
    };
    let mut out = Vec::new();
    let ascii = window.is_ascii();
    if !ascii {
        // One pass over the text, reported in catalogue order.
        let mut seen = [false; INVISIBLE.len()];
        for c in window.chars() {
            if ('\u{200B}'..='\u{FEFF}').contains(&c)
                && let Some(i) = INVISIBLE.iter().position(|&x| x == c)
            {
                seen[i] = true;
            }
        }
        for (i, &c) in INVISIBLE.iter().enumerate() {
            if seen[i] {
                out.push(Finding::Invisible(c));
            }
        }
    }
    let Some(cat) = catalogue() else {
        out.push(Finding::ScannerUnavailable);
        return out;
    };
    // ASCII and quick-checked text are already NFKC; skipping the normaliser keeps the
    // common case fast.
    let normalized;
    let subject: &str =
        if ascii || unicode_normalization::is_nfkc_quick(window.chars()) == IsNormalized::Yes {
            window
        } else {
            normalized = window.nfkc().collect::<String>();
            &normalized
        };
    for idx in cat.set.matches(subject.as_bytes()).iter() {
        if cat.scopes[idx] > scope {
            continue;
        }
        let id = cat.ids[idx];
        if id == "hardcoded_secret" && !has_real_secret(cat, subject.as_bytes()) {
            continue;
        }
        out.push(Finding::Pattern(id));
    }
    out
}

/// A value that is itself an env-var name (`API_KEY = "OPENAI_API_KEY_PRODUCTION"`) is a
/// reference, not a secret.
fn has_real_secret(cat: &Catalogue, text: &[u8]) -> bool {
    cat.hardcoded_secret.captures_iter(text).any(|c| {
        c.get(1)
            .map(|v| !cat.shouty.is_match(v.as_bytes()))
            .unwrap_or(false)
    })
}

/// The first finding under the strict scope, else a credential (what memory and skill writes
/// use).
pub fn first_block(text: &str) -> Option<Finding> {
    scan(text, ScanScope::Strict)
        .into_iter()
        .next()
        .or_else(|| credential(text))
}

/// The credentials in `text`, by kind: what the evidence redactor would replace.
pub fn credential(text: &str) -> Option<Finding> {
    let redacted = mpa_redact::redact(text);
    // A match whose rule keeps the text (a sentence about passwords) is no credential.
    if redacted == text {
        return None;
    }
    // The markers the redactor added (a marker already in the text is not a credential).
    let mut kinds: Vec<String> = markers(&redacted)
        .filter(|k| !markers(text).any(|o| o == *k))
        .map(str::to_owned)
        .collect();
    kinds.sort();
    kinds.dedup();
    if kinds.is_empty() {
        // Replaced, though every marker was there before: the redactor's own kinds are unknown.
        kinds.push("secret".to_owned());
    }
    Some(Finding::Credential(kinds))
}

/// `kind` of every `[REDACTED:kind]` marker in `text`.
fn markers(text: &str) -> impl Iterator<Item = &str> {
    text.split("[REDACTED:")
        .skip(1)
        .filter_map(|rest| rest.split_once(']').map(|(kind, _)| kind))
}

/// `text` as a model may be shown it: credentials replaced by `[REDACTED:<kind>]` markers.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    mpa_redact::redact(text)
}

/// Whether `text` is longer than the scan window (such entries are masked in snapshots).
pub fn too_large_to_scan(text: &str) -> bool {
    text.char_indices().nth(SCAN_WINDOW).is_some()
}
