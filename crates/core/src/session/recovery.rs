//! A session whose last turn never ended (the process was killed mid-turn) was loaded from its
//! recovery snapshot (see `turn::end::checkpoint`): it ends with the recovery notice. Before the
//! next turn, the notice gets the session's open write receipts from the invocation ledger —
//! `running` rows were made `unknown` at cold start — so the model verifies exactly those
//! read-only before retrying anything. Nothing is replayed.

use crate::session::SessionData;
use crate::turn::end::{RECOVERY_KEY, is_recovery_form};
use mpa_protocol::{Actor, Content, ContentPart};
use mpa_store::Store;

/// At most this many open receipts are listed (newest first).
const MAX_LISTED: usize = 20;

/// Adds the open receipts under a recovery notice that closes the transcript (once).
pub async fn annotate(store: &Store, actor: &Actor, data: &mut SessionData) {
    let pending = data
        .transcript
        .messages()
        .last()
        .is_some_and(is_recovery_form);
    if !pending {
        return;
    }
    let rows = match store
        .ledger_open_in_session(&actor.user_id.0, &data.session_id, MAX_LISTED)
        .await
    {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(session = %data.session_id, error = %e, "open write receipts not listed");
            return;
        }
    };
    // Continued once: from now on the recovery form is part of the conversation's history.
    for m in data.transcript.tail_mut(0) {
        if is_recovery_form(m) {
            m.metadata.insert(
                RECOVERY_KEY.into(),
                serde_json::Value::String("continued".into()),
            );
        }
    }
    let Some(last) = data.transcript.tail_mut(0).last_mut() else {
        return;
    };
    if rows.is_empty() {
        return;
    }
    let mut note = String::from(
        "\n[Write receipts still open in this conversation (invocation ledger; none was retried):",
    );
    for r in &rows {
        note.push_str(&format!(
            "\n- invocation_id {}: {} — {} ({})",
            r.invocation_id,
            r.tool_name,
            r.status.as_str(),
            r.summary
        ));
    }
    note.push_str("\nVerify each read-only before deciding to retry it.]");
    match &mut last.content {
        Content::Text(t) => t.push_str(&note),
        Content::Parts(parts) => parts.push(ContentPart::Text { text: note }),
    }
}
