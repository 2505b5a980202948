//! Per-result size cap (spec runtime.md §4.2): a result over the cap is replaced by a JSON preview
//! whose whole serialised form fits the cap. When the full text was kept in the session's result
//! store the preview says where to read on (`result_id`, `next_offset`); when it could not be
//! kept it says so and asks to narrow the query. Tools that size their own output for the model
//! (`ToolMeta::self_capped`) are never re-truncated.

use mpa_protocol::Outcome;

pub const DEFAULT_TOOL_RESULT_MAX_CHARS: usize = 65_536;
/// The preview budget when the full text was kept (the rest is one `read_tool_result` away).
pub const ARCHIVED_PREVIEW_MAX_CHARS: usize = 8192;

/// The cap for a context window: a quarter of the window in characters (at least 4000), never
/// above [`DEFAULT_TOOL_RESULT_MAX_CHARS`] — one result must leave room for the conversation on a
/// small local model (a 16 K window gets 4000 characters, ≤ 4000 tokens even in Chinese).
pub fn cap_for_window(window_tokens: u64) -> usize {
    let quarter = usize::try_from(window_tokens / 4).unwrap_or(usize::MAX);
    quarter.clamp(4000, DEFAULT_TOOL_RESULT_MAX_CHARS)
}

/// What became of the full text of a result over the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archive<'a> {
    /// Kept in the session's result store under this id.
    Kept { result_id: &'a str },
    /// Over the store's per-result limit: not kept.
    TooLarge { limit_bytes: usize },
    /// The session's store could not be reached: not kept.
    Unavailable,
}

/// Whether `content` is over the cap.
pub fn over_cap(content: &str, max_chars: usize) -> bool {
    // Byte length bounds the character count from above: most results never count characters.
    content.len() > max_chars && content.chars().count() > max_chars
}

/// The preview replacing `content`, or `None` when `content` fits the cap and is kept as is.
pub fn cap_result(
    tool_name: &str,
    content: &str,
    outcome: Outcome,
    max_chars: usize,
) -> Option<String> {
    over_cap(content, max_chars)
        .then(|| preview(tool_name, content, outcome, max_chars, Archive::Unavailable))
}

/// The preview of an over-cap `content`, given what became of its full text.
pub fn preview(
    tool_name: &str,
    content: &str,
    outcome: Outcome,
    max_chars: usize,
    archive: Archive<'_>,
) -> String {
    let total = content.chars().count();
    let budget = match archive {
        Archive::Kept { .. } => max_chars.min(ARCHIVED_PREVIEW_MAX_CHARS),
        _ => max_chars,
    };
    let build = |n: usize| {
        let preview: String = content.chars().take(n).collect();
        let mut v = serde_json::json!({
            "execution_outcome": outcome.as_str(),
            "tool_result_truncated": true,
            "tool_name": tool_name,
            "total_chars": total,
            "returned_chars": n,
            "content_preview": preview,
        });
        match archive {
            Archive::Kept { result_id } => {
                v["result_id"] = result_id.into();
                v["read_tool"] = "read_tool_result".into();
                v["expires_in_seconds"] = 900.into();
                v["offset_unit"] = "unicode_characters".into();
                v["next_offset"] = n.into();
                v["message"] = format!(
                    "The result has {total} characters; only the first {n} are shown. Read on with \
                     read_tool_result(result_id, offset={n}) without running {tool_name} again, or \
                     pass pattern to get only the matching lines."
                )
                .into();
            }
            Archive::TooLarge { limit_bytes } => {
                v["result_unavailable"] = "result_too_large".into();
                v["result_limit_bytes"] = limit_bytes.into();
                v["message"] = format!(
                    "The result is larger than the {limit_bytes} bytes the host keeps, so it was \
                     not kept and only its beginning is shown; narrow the query or paginate to see \
                     the rest."
                )
                .into();
            }
            Archive::Unavailable => {
                v["result_unavailable"] = "thread_unavailable".into();
                v["message"] = "The result was too large and could not be kept, so only its \
                                beginning is shown; narrow the query or paginate to see the rest."
                    .into();
            }
        }
        v.to_string()
    };
    // Binary search the longest preview whose escaped JSON wrapper still fits.
    let (mut lo, mut hi) = (0usize, budget.min(total));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if build(mid).chars().count() <= budget {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    build(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_results_become_a_fitting_preview() {
        let big = "\"x\n".repeat(40_000);
        let out = cap_result("t", &big, Outcome::Succeeded, 65_536).unwrap();
        assert!(out.chars().count() <= 65_536);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["tool_result_truncated"], true);
        assert_eq!(v["total_chars"], 120_000);
        assert!(v["returned_chars"].as_u64().unwrap() > 10_000);
        assert_eq!(cap_result("t", "small", Outcome::Succeeded, 10), None);
    }

    #[test]
    fn a_kept_result_gets_a_short_preview_that_says_where_to_read_on() {
        let big = "电影\n".repeat(40_000);
        let id = "0123456789abcdef0123456789abcdef";
        let out = preview(
            "t",
            &big,
            Outcome::Succeeded,
            65_536,
            Archive::Kept { result_id: id },
        );
        assert!(out.chars().count() <= ARCHIVED_PREVIEW_MAX_CHARS);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["result_id"], id);
        assert_eq!(v["next_offset"], v["returned_chars"]);
        assert_eq!(v["offset_unit"], "unicode_characters");
        assert!(v.get("result_unavailable").is_none());
        let v: serde_json::Value = serde_json::from_str(&preview(
            "t",
            &big,
            Outcome::Succeeded,
            65_536,
            Archive::TooLarge {
                limit_bytes: 1_048_576,
            },
        ))
        .unwrap();
        assert_eq!(v["result_unavailable"], "result_too_large");
        assert_eq!(v["result_limit_bytes"], 1_048_576);
        assert!(v.get("result_id").is_none());
    }
}
