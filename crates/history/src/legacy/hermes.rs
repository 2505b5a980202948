//! The Hermes importer: one `state.db` into one user's store.

use super::*;

/// Import a Hermes `state.db` (tables `sessions` and `messages`) into `user`'s history.
/// Resumes from `users/<key>/import-hermes-cursor.json`; `system`/`session_meta` rows, hidden
/// display rows and rewound rows are skipped (with reasons); compacted rows stay searchable
/// archives; sessions' end reasons are carried over.
pub async fn import_hermes(
    hub: &History,
    state_db: &Path,
    user: &UserKey,
    progress: &mut dyn FnMut(ImportProgress),
) -> Result<ImportSummary> {
    store::check_user_key(user)?;
    let reader = StateDbReader::open(state_db, Dialect::Hermes)?;
    // Opening the store creates the user's private directory the cursor lives in.
    hub.status(user).await?;
    let cursor_path = store::users_root(&hub.config().data_dir)
        .join(user.as_str())
        .join(HERMES_CURSOR);
    let mut cursor = load_cursor(&cursor_path)?;
    let key = canonical_key(state_db);
    mark_started(&mut cursor, std::slice::from_ref(&key));
    save_cursor(&cursor_path, &mut cursor)?;
    let after = cursor.sources.get(&key).map(|c| c.last_id).unwrap_or(0);
    let mut run = RunState {
        total: reader.remaining(after)?,
        ..RunState::default()
    };
    run.summary.source = "hermes".into();
    progress(run.progress());
    import_state_db(
        hub,
        user,
        &reader,
        Dialect::Hermes,
        &key,
        &cursor_path,
        &mut cursor,
        &mut run,
        progress,
    )
    .await?;
    cursor.complete = cursor.sources.values().all(|c| c.complete);
    save_cursor(&cursor_path, &mut cursor)?;
    Ok(run.finish(true))
}
