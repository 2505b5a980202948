//! `mpa-mcp` — MCP both ways, over the official Rust SDK (`rmcp`); no JSON-RPC is written here.
//!
//! - [`config`]: an admin's description of an external server ([`ServerConfig`]: `stdio`
//!   command + args + env, or `streamable_http` URL + headers), its validation and the view of it
//!   that never shows a secret ([`ServerConfig::public_view`]).
//! - [`client`]: one connection per configured server ([`Server`]): started on first use, its
//!   tools listed ([`RemoteTool`]), calls made ([`CallResult`]), reconnected with backoff after
//!   it died, `notifications/tools/list_changed` reported to the owner, its child process ended
//!   with the connection ([`Server::close`]). A `streamable_http` server's HTTP exchanges go
//!   through `http` (rmcp's client transport on the workspace's reqwest 0.12).
//! - [`publish`]: the host's tools as an MCP server ([`Catalogue`] is what the host provides:
//!   the tools an actor may see and a call as that actor); served over streamable HTTP
//!   ([`publish::http_service`], the caller's [`mpa_protocol::Actor`] read from the request's
//!   extensions, put there by the front end's authentication) or stdio ([`publish::serve_stdio`]).
//!
//! This crate knows nothing of the host's policy, ledger or model: core adapts both sides.

pub mod client;
pub mod config;
pub mod error;
mod http;
pub mod publish;

pub use client::{CallResult, ClientOptions, RemoteTool, Server};
pub use config::{ServerConfig, TransportKind};
pub use error::McpError;
pub use publish::{Catalogue, Published};
