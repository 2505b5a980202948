//! The host's tools as an MCP server (spec runtime.md §11.5): `initialize`, `ping`,
//! `tools/list`, `tools/call`; the SDK does the JSON-RPC, the protocol-version negotiation and
//! the streamable HTTP sessions.
//!
//! Who calls: over HTTP the front end authenticates each request and puts the caller's
//! [`Actor`] in the request's extensions (a request without one is refused); over stdio the
//! actor is fixed when the server starts. Every `tools/list` and `tools/call` is answered for
//! that actor by the host's [`Catalogue`].

use mpa_protocol::{Actor, ToolSpec};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, Implementation, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

/// The protocol versions the endpoint speaks (spec runtime.md §11.5).
pub const PROTOCOL_VERSIONS: [ProtocolVersion; 3] = [
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2024_11_05,
];

/// The answer to a published call.
#[derive(Debug, Clone, PartialEq)]
pub enum Published {
    /// The tool ran (or a gate answered it): its text and whether it is an error result.
    Result { text: String, is_error: bool },
    /// No tool of that name is published for this actor.
    UnknownTool,
    /// The arguments do not fit the tool's schema (JSON-RPC −32602).
    InvalidArguments(String),
}

/// What the host publishes: the tools an actor may see and a call made as that actor.
pub trait Catalogue: Send + Sync + 'static {
    fn tools(&self, actor: &Actor) -> Vec<ToolSpec>;
    fn call(
        &self,
        actor: Actor,
        tool: String,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> impl Future<Output = Published> + Send;
}

/// The SDK's server handler over a [`Catalogue`].
pub struct Publisher<C> {
    catalogue: Arc<C>,
    /// The stdio server's one caller; `None` over HTTP (each request carries its own).
    fixed: Option<Actor>,
}

impl<C> Clone for Publisher<C> {
    fn clone(&self) -> Self {
        Self {
            catalogue: Arc::clone(&self.catalogue),
            fixed: self.fixed.clone(),
        }
    }
}

impl<C: Catalogue> Publisher<C> {
    fn actor(&self, context: &RequestContext<RoleServer>) -> Result<Actor, ErrorData> {
        if let Some(actor) = &self.fixed {
            return Ok(actor.clone());
        }
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Actor>())
            .cloned()
            .ok_or_else(|| ErrorData::invalid_request("the request is not authenticated", None))
    }
}

impl<C: Catalogue> ServerHandler for Publisher<C> {
    fn get_info(&self) -> InitializeResult {
        let mut info = InitializeResult::new(ServerCapabilities::builder().enable_tools().build());
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info.server_info = Implementation::new("moviepilot-agent", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "MoviePilot agent tools. Calls run as the authenticated user, under the same \
             permissions and write ledger as in a chat."
                .into(),
        );
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let actor = self.actor(&context)?;
        let tools = self
            .catalogue
            .tools(&actor)
            .into_iter()
            .map(|spec| {
                let schema = match spec.parameters {
                    serde_json::Value::Object(o) => o,
                    _ => serde_json::Map::new(),
                };
                Tool::new(spec.name, spec.description, Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let actor = self.actor(&context)?;
        let name = request.name.to_string();
        let arguments = request.arguments.unwrap_or_default();
        match self.catalogue.call(actor, name.clone(), arguments).await {
            Published::Result { text, is_error } => {
                let content = vec![ContentBlock::text(text)];
                Ok(if is_error {
                    CallToolResult::error(content)
                } else {
                    CallToolResult::success(content)
                }
                .into())
            }
            Published::UnknownTool => Err(ErrorData::invalid_params(
                format!("unknown tool: {name}"),
                None,
            )),
            Published::InvalidArguments(message) => Err(ErrorData::invalid_params(message, None)),
        }
    }
}

/// The streamable HTTP endpoint's type (a tower service over `http` requests).
pub type HttpEndpoint<C> = rmcp::transport::StreamableHttpService<
    Publisher<C>,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
>;

/// The streamable HTTP endpoint (a tower service; mount it at `/mcp`). Sessions are the SDK's
/// (`Mcp-Session-Id`); the front end must authenticate every request and insert its [`Actor`]
/// into the request's extensions. The SDK's Host-header allow-list (a DNS-rebinding guard for
/// unauthenticated local servers) is off: every request here carries its own credential.
pub fn http_service<C: Catalogue>(
    catalogue: Arc<C>,
    cancel: tokio_util::sync::CancellationToken,
) -> HttpEndpoint<C> {
    let publisher = Publisher {
        catalogue,
        fixed: None,
    };
    let config = rmcp::transport::StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_cancellation_token(cancel);
    rmcp::transport::StreamableHttpService::new(
        move || Ok(publisher.clone()),
        Arc::default(),
        config,
    )
}

/// Serves the catalogue over this process's stdin/stdout as `actor` until the client closes
/// its end.
pub async fn serve_stdio<C: Catalogue>(catalogue: Arc<C>, actor: Actor) -> std::io::Result<()> {
    let publisher = Publisher {
        catalogue,
        fixed: Some(actor),
    };
    let running = publisher
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}
