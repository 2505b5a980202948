//! External MCP servers an admin configured (schema version 6). The store keeps their JSON as
//! given (core validates it); the values of a configuration's env and headers may be
//! credentials, so nothing here logs a row.

use crate::{Result, Store};
use rusqlite::params;

/// One configured server.
#[derive(Clone, PartialEq, Eq)]
pub struct McpServerRow {
    pub name: String,
    /// The configuration (JSON object).
    pub config: String,
    /// The tools the server last listed (JSON array).
    pub tools: String,
}

impl std::fmt::Debug for McpServerRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerRow")
            .field("name", &self.name)
            .field("config", &"<not shown>")
            .finish_non_exhaustive()
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

impl Store {
    /// Every configured server, by name.
    pub async fn mcp_servers(&self) -> Result<Vec<McpServerRow>> {
        self.read(|c| {
            let mut stmt =
                c.prepare("SELECT name, config, tools FROM mcp_servers ORDER BY name")?;
            let rows = stmt.query_map([], |r| {
                Ok(McpServerRow {
                    name: r.get(0)?,
                    config: r.get(1)?,
                    tools: r.get(2)?,
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    /// Adds the server or replaces its configuration and tools.
    pub async fn put_mcp_server(&self, row: McpServerRow) -> Result<()> {
        self.run(move |c| {
            let now = now();
            c.execute(
                "INSERT INTO mcp_servers (name, config, tools, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?4)
                 ON CONFLICT(name) DO UPDATE SET config = ?2, tools = ?3, updated_at = ?4",
                params![row.name, row.config, row.tools, now],
            )?;
            Ok(())
        })
        .await
    }

    /// Records the tools the server listed now (a server that was removed stays removed).
    pub async fn set_mcp_server_tools(&self, name: &str, tools: String) -> Result<()> {
        let name = name.to_string();
        self.run(move |c| {
            c.execute(
                "UPDATE mcp_servers SET tools = ?1, updated_at = ?2 WHERE name = ?3",
                params![tools, now(), name],
            )?;
            Ok(())
        })
        .await
    }

    /// Removes the server; `false` when there was none of that name.
    pub async fn delete_mcp_server(&self, name: &str) -> Result<bool> {
        let name = name.to_string();
        self.run(move |c| {
            Ok(c.execute("DELETE FROM mcp_servers WHERE name = ?1", params![name])? > 0)
        })
        .await
    }
}
