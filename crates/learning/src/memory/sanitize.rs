//! The view of entries that may be shown to a model: credentials are redacted and poisoned
//! entries become placeholders. Used by the prompt snapshot and by every answer that echoes
//! entries, never applied to the files.

use crate::threat;

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
    // A credential an older version saved is shown as its marker (the rest of the entry stays
    // useful); what it was is never scanned for patterns again.
    let entry = threat::shown(entry);
    let findings = threat::scan(&entry, threat::ScanScope::Strict);
    if findings.is_empty() {
        return entry.into_owned();
    }
    let ids: Vec<String> = findings.iter().map(threat::Finding::id).collect();
    format!(
        "[BLOCKED: {file} entry contained threat pattern(s): {}. Removed from system prompt; use memory(action=remove) to delete the original.]",
        ids.join(", ")
    )
}
