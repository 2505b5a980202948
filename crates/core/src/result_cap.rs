//! Per-result size cap (spec runtime.md §4.2): a result over the cap is replaced by a JSON preview
//! whose whole serialised form fits the cap. Tools that size their own output for the model
//! (`ToolMeta::self_capped`) are never re-truncated.

use mpa_protocol::Outcome;

pub const DEFAULT_TOOL_RESULT_MAX_CHARS: usize = 65_536;

/// The preview replacing `content`, or `None` when `content` fits the cap and is kept as is.
pub fn cap_result(
    tool_name: &str,
    content: &str,
    outcome: Outcome,
    max_chars: usize,
) -> Option<String> {
    let total = content.chars().count();
    if total <= max_chars {
        return None;
    }
    let build = |n: usize| {
        let preview: String = content.chars().take(n).collect();
        serde_json::json!({
            "execution_outcome": outcome.as_str(),
            "tool_result_truncated": true,
            "tool_name": tool_name,
            "total_chars": total,
            "returned_chars": n,
            "content_preview": preview,
            "result_unavailable": "result_too_large",
            "message": "The tool result was too large and only its beginning is shown; narrow the query or paginate to see the rest.",
        })
        .to_string()
    };
    // Binary search the longest preview whose escaped JSON wrapper still fits.
    let (mut lo, mut hi) = (0usize, max_chars.min(total));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if build(mid).chars().count() <= max_chars {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(build(lo))
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
}
