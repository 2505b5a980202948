//! The relational schema, the three FTS indexes (their tables, columns and tokenizers), the
//! content views they read, and migrations. Backfill and integrity read the FTS constants from
//! here, not from the store.

use super::*;

/// Relational schema version stamped in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 1;
/// Tool rows are indexed by their first 8192 characters only (spec §4.2). The same expression
/// is used by the view, the triggers and any backfill, so `'integrity-check'` can pass.
pub const TOOL_INDEX_PREFIX_CHARS: usize = 8192;

/// The three FTS indexes and the table name used as their `state_meta` key prefix.
pub const FTS_TABLES: [&str; 3] = ["messages_fts", "messages_fts_trigram", "messages_fts_cjk"];

/// How one FTS index is declared: its table, columns (read from `<table>_src`) and tokenizer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FtsDef {
    pub(crate) table: &'static str,
    pub(crate) cols: &'static [&'static str],
    pub(crate) tokenize: &'static str,
}

/// Tool bodies get their own column in the base index so user/assistant searches can exclude
/// them with a column filter before ranking: tool rows are most of the bytes and postings.
pub(crate) const FTS_DEFS: [FtsDef; 3] = [
    FtsDef {
        table: "messages_fts",
        cols: &["content", "tool_name", "tool_calls", "tool_result"],
        tokenize: "unicode61",
    },
    FtsDef {
        table: "messages_fts_trigram",
        cols: &["content", "tool_name"],
        tokenize: "trigram",
    },
    FtsDef {
        table: "messages_fts_cjk",
        cols: &["content", "tool_name"],
        tokenize: crate::CJK_TOKENIZE,
    },
];

impl FtsDef {
    pub(crate) fn create_sql(&self) -> String {
        fts_sql(self.table, self.cols, self.tokenize)
    }

    pub(crate) fn col_list(&self) -> String {
        self.cols.join(", ")
    }
}

pub(crate) fn view_sql() -> String {
    let n = TOOL_INDEX_PREFIX_CHARS;
    format!(
        "CREATE VIEW messages_fts_src AS SELECT id, \
           CASE WHEN role = 'tool' THEN '' ELSE content END AS content, \
           tool_name, tool_calls, \
           CASE WHEN role = 'tool' THEN substr(content, 1, {n}) ELSE '' END AS tool_result \
           FROM messages;\n\
         CREATE VIEW messages_fts_trigram_src AS SELECT m.id AS id, m.content AS content, \
           m.tool_name AS tool_name FROM messages m JOIN sessions s ON s.id = m.session_id \
           WHERE m.role <> 'tool' AND s.source NOT IN ('cron', 'subagent');\n\
         CREATE VIEW messages_fts_cjk_src AS SELECT m.id AS id, m.content AS content, \
           m.tool_name AS tool_name FROM messages m JOIN sessions s ON s.id = m.session_id \
           WHERE m.role <> 'tool' AND s.source NOT IN ('cron', 'subagent');\n"
    )
}

/// Id-gated sync triggers (spec §4.3): a row is in the index iff `id <= P` or `id > H`; with no
/// backfill pending both markers are absent and the gate is always true.
pub(crate) fn fts_sql(table: &str, cols: &[&str], tokenize: &str) -> String {
    let col_list = cols.join(", ");
    let gate = |who: &str| {
        format!(
            "{who}.id <= COALESCE((SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = '{table}:progress'), -1) \
             OR {who}.id > COALESCE((SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = '{table}:high'), -1)"
        )
    };
    format!(
        "CREATE VIRTUAL TABLE {table} USING fts5({col_list}, content='{table}_src', content_rowid='id', tokenize='{tokenize}');\n\
         CREATE TRIGGER {table}_ai AFTER INSERT ON messages WHEN {gi} BEGIN \
           INSERT INTO {table}(rowid, {col_list}) SELECT id, {col_list} FROM {table}_src WHERE id = new.id; END;\n\
         CREATE TRIGGER {table}_bd BEFORE DELETE ON messages WHEN {gd} BEGIN \
           INSERT INTO {table}({table}, rowid, {col_list}) SELECT 'delete', id, {col_list} FROM {table}_src WHERE id = old.id; END;\n",
        gi = gate("new"),
        gd = gate("old"),
    )
}

pub(crate) fn schema_sql() -> String {
    let mut s = String::from(
        "CREATE TABLE sessions (
           id TEXT PRIMARY KEY,
           source TEXT NOT NULL DEFAULT 'chat',
           title TEXT NOT NULL DEFAULT '',
           model TEXT NOT NULL DEFAULT '',
           started_at REAL NOT NULL,
           last_active REAL NOT NULL,
           parent_session_id TEXT NOT NULL DEFAULT '',
           end_reason TEXT NOT NULL DEFAULT '',
           message_count INTEGER NOT NULL DEFAULT 0
         );
         CREATE INDEX sessions_recent ON sessions(last_active DESC);
         CREATE INDEX sessions_title ON sessions(title COLLATE NOCASE, started_at DESC);
         CREATE INDEX sessions_parent ON sessions(parent_session_id);
         CREATE TABLE messages (
           id INTEGER PRIMARY KEY AUTOINCREMENT,
           session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
           message_uid TEXT NOT NULL,
           role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
           content TEXT NOT NULL,
           tool_call_id TEXT NOT NULL DEFAULT '',
           tool_name TEXT NOT NULL DEFAULT '',
           tool_calls TEXT NOT NULL DEFAULT '',
           timestamp REAL NOT NULL,
           provenance TEXT NOT NULL DEFAULT 'observed' CHECK (provenance IN ('observed', 'legacy_snapshot')),
           active INTEGER NOT NULL DEFAULT 1,
           compacted INTEGER NOT NULL DEFAULT 0,
           UNIQUE (session_id, message_uid)
         );
         CREATE INDEX messages_session ON messages(session_id, id);
         CREATE INDEX messages_filter ON messages(id, role, active, compacted, timestamp, session_id);
         -- Only compacted/rewound rows: keeps status counts off a full scan of the bodies.
         CREATE INDEX messages_inactive ON messages(compacted) WHERE active = 0;
         CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE deleted_sessions (id TEXT PRIMARY KEY, deleted_at REAL NOT NULL);
         CREATE TRIGGER messages_count_ai AFTER INSERT ON messages BEGIN
           UPDATE sessions SET message_count = message_count + 1,
             last_active = MAX(last_active, new.timestamp) WHERE id = new.session_id;
         END;
         CREATE TRIGGER messages_count_ad AFTER DELETE ON messages BEGIN
           UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;
         END;
",
    );
    s.push_str(&view_sql());
    for def in FTS_DEFS {
        s.push_str(&def.create_sql());
    }
    s.push_str(&format!(
        "INSERT INTO state_meta (key, value) VALUES ('{}', '{}');\n",
        crate::backfill::TOKENIZER_VERSION_KEY,
        crate::tokenizer::TOKENIZER_VERSION
    ));
    s
}

/// Additions to schema version 1 that older binaries ignore safely, applied when a store is
/// opened and one is missing (each statement idempotent): the covering index ranked searches check their filters through
/// (row flags sit after the message body, which may span overflow pages), and the segment
/// posting lists of [`crate::rank`].
pub(crate) const ADDITIVE_SQL: &str = concat!(
    "CREATE INDEX IF NOT EXISTS messages_filter \
     ON messages(id, role, active, compacted, timestamp, session_id);",
    "CREATE TABLE IF NOT EXISTS rank_segments (\
      idx TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL, \
      format INTEGER NOT NULL, tokenizer INTEGER NOT NULL, docs INTEGER NOT NULL, \
      PRIMARY KEY (idx, lo)) WITHOUT ROWID;\
    CREATE TABLE IF NOT EXISTS rank_postings (\
      idx TEXT NOT NULL, term BLOB NOT NULL, lo INTEGER NOT NULL, df INTEGER NOT NULL, \
      postings BLOB NOT NULL, PRIMARY KEY (idx, term, lo)) WITHOUT ROWID;\
    CREATE INDEX IF NOT EXISTS rank_postings_segment ON rank_postings(idx, lo);"
);

pub(crate) fn migrate(conn: &Connection, from: i64) -> Result<()> {
    if from == 0 {
        let sql = format!(
            "BEGIN IMMEDIATE; {} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;",
            schema_sql()
        );
        // Another process may have migrated between our version read and BEGIN IMMEDIATE.
        let again: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if again == 0
            && let Err(e) = conn.execute_batch(&sql)
        {
            let _ = conn.execute_batch("ROLLBACK");
            let now: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if now != SCHEMA_VERSION {
                return Err(e.into());
            }
        }
    }
    Ok(())
}
