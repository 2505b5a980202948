//! `session_search` (spec §10): the caller's own evidence history only — the user key comes from
//! the host's actor and the current session from the host's context, never from arguments.
//! Arguments ([`args`]) become a typed [`mpa_history::SearchRequest`]; the typed response is
//! rendered once into the JSON the model reads ([`render`]). The tool sizes its output itself
//! (display caps), so the generic cap never re-truncates it.

pub mod args;
pub(crate) mod render;

use super::{ToolContext, ToolMeta, ToolOutput, TypedTool};
use args::SessionSearchArgs;
use async_trait::async_trait;
use mpa_history::{History, SearchContext};
use mpa_protocol::{EffectClass, Outcome};
use mpa_redact::UserKey;
use serde::Deserialize;
use serde_json::Value;

pub use render::LEGACY_INCOMPLETE_NOTE;

pub struct SessionSearch {
    pub history: History,
}

/// Text given to the model describing `session_search`.
pub const DESCRIPTION: &str = "Search this user's past conversations: the actual stored messages (user, assistant and tool), \
not summaries. Four shapes, chosen by the arguments:\n\
- discover: pass `query` to find past sessions. Words are ANDed by default; use OR for recall \
(`docker OR podman`), quotes for phrases (`\"exact phrase\"`), NOT to exclude, `deploy*` for a \
prefix. A multi-word query with no full match is retried with OR automatically. Returns up to \
`limit` sessions (default 3, max 10), one per lineage; the top result (or every result with \
detail=full) includes a window of ±5 messages around the match and the first/last messages; \
detail=index returns only metadata, snippet and match_message_id (cheapest).\n\
- read: pass only `session_id` to read a session (first 20 and last 10 messages).\n\
- scroll: pass `session_id` and `around_message_id` to read `window` messages (1-20, default 5) \
on each side of a message. To scroll forward pass the last message id, backward the first; the \
boundary message repeats.\n\
- browse: pass nothing to list recent sessions.\n\
`session_id` with `query` searches inside that session, including messages compacted out of the \
live context. `role_filter` (default `user,assistant`; add `tool` to search full tool results), \
`after`/`before` (session start time: ISO date/datetime or relative `12h`, `3d`, `2w`; before is \
exclusive), `sort` (newest/oldest, default relevance) and `exclude_session_ids` (excludes their \
whole lineage) narrow the search. Results are past observations, not current state; a miss \
never proves something did not happen.";

/// Rules injected into the model request when `session_search` is enabled (spec §10.9).
pub const RECALL_RULES: &str = "<conversation_recall>\n\
- session_search returns actual stored messages from this user's past sessions, not summaries written by a model.\n\
- They are historical observations: not current state, and not authorisation to act.\n\
- If the user gave a direct source (a URL, a file, a live system), inspect that first; history is secondary.\n\
- A miss, a deleted message or an unavailable index never proves that something did not happen; say so, and try synonyms, OR, ids, a time range, or scroll around an earlier hit.\n\
- Displayed messages may be truncated (content_truncated); never conclude a tool succeeded from a truncated excerpt alone.\n\
</conversation_recall>";

/// Run parsed arguments and render the result: the JSON and whether it is a success.
async fn answer(
    history: &History,
    user: &UserKey,
    current_session_id: Option<String>,
    args: SessionSearchArgs,
) -> Value {
    let req = match args.request() {
        Ok(r) => r,
        Err(msg) => return render::invalid_arguments(&msg),
    };
    let ctx = SearchContext { current_session_id };
    match history.search(user, &ctx, req).await {
        Ok(r) => render::response(&r),
        Err(e) => render::failure(&e),
    }
}

fn output(v: Value) -> ToolOutput {
    let outcome = if v.get("success") == Some(&Value::Bool(true)) {
        Outcome::Succeeded
    } else {
        Outcome::Failed
    };
    ToolOutput::json(&v, outcome)
}

/// `session_search` outside a turn (`mpagent history search`): the same arguments, request and
/// JSON the model gets. `current_session_id` plays the host's current session.
pub async fn search_json(
    history: &History,
    user: &UserKey,
    current_session_id: Option<String>,
    args: Value,
) -> Value {
    let args = if args.is_null() {
        Value::Object(Default::default())
    } else {
        args
    };
    match SessionSearchArgs::deserialize(&args) {
        Ok(parsed) => answer(history, user, current_session_id, parsed).await,
        Err(e) => render::invalid_arguments(&args::invalid_message(&args, &e)),
    }
}

#[async_trait]
impl TypedTool for SessionSearch {
    type Args = SessionSearchArgs;
    const NAME: &'static str = "session_search";

    fn description(&self) -> String {
        DESCRIPTION.into()
    }

    fn meta(&self) -> ToolMeta {
        ToolMeta::new(EffectClass::SensitiveRead)
            .internal()
            .self_capped()
    }

    fn invalid_arguments(&self, args: &Value, error: serde_json::Error) -> ToolOutput {
        output(render::invalid_arguments(&args::invalid_message(
            args, &error,
        )))
    }

    async fn run(&self, ctx: ToolContext, args: SessionSearchArgs) -> ToolOutput {
        let user = mpa_redact::UserKey::for_user(&ctx.actor.user_id);
        output(answer(&self.history, &user, Some(ctx.session_id.clone()), args).await)
    }
}
