//! The crate's one error type. Messages never carry an env value or a header value of a
//! server's configuration (they may be credentials).

/// What went wrong talking MCP.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// An admin's configuration that cannot be used; nothing was stored or started.
    #[error("invalid MCP server configuration: {0}")]
    InvalidConfig(String),
    /// The server could not be reached or started (or is waiting out its reconnect backoff).
    #[error("MCP server {server} is unavailable: {reason}")]
    Unavailable { server: String, reason: String },
    /// The connection ended while a request was under way: whether it took effect is unknown.
    #[error("MCP server {server} went away during the request: {reason}")]
    ConnectionLost { server: String, reason: String },
    /// The server answered with a JSON-RPC error.
    #[error("MCP server {server} refused the request ({code}): {message}")]
    Protocol {
        server: String,
        code: i32,
        message: String,
    },
}

impl McpError {
    /// The stable code a tool result carries.
    pub fn code(&self) -> &'static str {
        match self {
            McpError::InvalidConfig(_) => "invalid_mcp_server",
            McpError::Unavailable { .. } => "mcp_server_unavailable",
            McpError::ConnectionLost { .. } => "mcp_connection_lost",
            McpError::Protocol { .. } => "mcp_error",
        }
    }
}
