//! MCP over HTTP (issue 33; spec runtime.md §11.5).
//!
//! - `POST|GET|DELETE /mcp` (and `/api/v1/mcp`): the host's tools as an MCP server (streamable
//!   HTTP, the SDK's sessions). Every request is authenticated here — a bearer token (a user's,
//!   or `MPA_ADMIN_TOKEN`), or `X-API-KEY` / `?apikey=` equal to `MPA_ADMIN_TOKEN` for the admin
//!   identity — and the caller's `Actor` travels to the tools in the request's extensions; a
//!   request without a valid credential is 401 before any JSON-RPC is read.
//! - `GET|POST|DELETE /api/v1/agent/mcp/servers`, `POST /api/v1/agent/mcp/servers/test`: the
//!   external servers admins configure. Admins only (403 otherwise); a stored env or header value
//!   is never returned.

use crate::auth::{ADMIN_TOKEN_USER_ID, Authed};
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::state::AppState;
use axum::Router;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use mpa_protocol::{Actor, UserId};
use serde::Deserialize;

/// The MCP routes, merged into the host's router.
pub fn routes(state: &AppState) -> Router<AppState> {
    let endpoint = mpa_core::mcp::http_endpoint(&state.agent, state.shutting_down.child_token());
    let authed = axum::middleware::from_fn_with_state(state.clone(), authenticate);
    Router::new()
        .route_service("/mcp", endpoint.clone())
        .route_service("/api/v1/mcp", endpoint)
        .route_layer(axum::middleware::from_fn(jsonrpc_errors))
        .route_layer(authed)
        .route(
            "/api/v1/agent/mcp/servers",
            get(list_servers).post(add_server).delete(remove_by_query),
        )
        .route(
            "/api/v1/agent/mcp/servers/{name}",
            axum::routing::delete(remove_server),
        )
        .route("/api/v1/agent/mcp/servers/test", post(test_server))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `X-API-KEY` or `?apikey=` (the reference's MCP credential) when it is `MPA_ADMIN_TOKEN`.
fn api_key_admin(req: &axum::http::request::Parts, state: &AppState) -> Option<Actor> {
    let admin = state.cfg.admin_token.as_deref().filter(|t| !t.is_empty())?;
    let from_header = req
        .headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let from_query = req.uri.query().and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "apikey")
            .map(|(_, v)| v.into_owned())
    });
    let key = from_header.or(from_query)?;
    constant_time_eq(admin.as_bytes(), key.as_bytes()).then(|| Actor {
        user_id: UserId(ADMIN_TOKEN_USER_ID.into()),
        user_name: ADMIN_TOKEN_USER_ID.into(),
        is_admin: true,
    })
}

async fn authenticate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let actor = match api_key_admin(&parts, &state) {
        Some(actor) => actor,
        None => match Authed::from_request_parts(&mut parts, &state).await {
            Ok(Authed(actor)) => actor,
            Err(e) => return e.into_response(),
        },
    };
    let mut req = Request::from_parts(parts, body);
    req.extensions_mut().insert(actor);
    next.run(req).await
}

/// A JSON-RPC error reply with no request id (spec runtime.md §11.5's codes).
fn jsonrpc_error(status: StatusCode, code: i64, message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message},
    });
    (status, axum::Json(body)).into_response()
}

/// The SDK answers a few transport-level failures in plain text; MCP clients read JSON-RPC
/// codes (spec runtime.md §11.5): a body that is not JSON −32700, JSON that is not a JSON-RPC
/// message −32600, an unknown session −32002, a request before `initialize` −32003.
async fn jsonrpc_errors(req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let is_post = parts.method == axum::http::Method::POST;
    let has_session = parts.headers.contains_key("mcp-session-id");
    let req = if is_post {
        let bytes = match axum::body::to_bytes(body, usize::MAX).await {
            Ok(b) => b,
            Err(_) => {
                return ApiError::for_status(StatusCode::PAYLOAD_TOO_LARGE).into_response();
            }
        };
        match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(serde_json::Value::Object(o)) if o.get("jsonrpc") == Some(&"2.0".into()) => {}
            Ok(serde_json::Value::Array(_)) => {}
            Ok(_) => {
                return jsonrpc_error(
                    StatusCode::BAD_REQUEST,
                    -32600,
                    "invalid request: not a JSON-RPC 2.0 message",
                );
            }
            Err(_) => {
                return jsonrpc_error(
                    StatusCode::BAD_REQUEST,
                    -32700,
                    "parse error: the body is not JSON",
                );
            }
        }
        Request::from_parts(parts, axum::body::Body::from(bytes))
    } else {
        Request::from_parts(parts, body)
    };
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json") || v.contains("event-stream"));
    if !status.is_client_error() || is_json {
        return resp;
    }
    match status {
        StatusCode::NOT_FOUND if has_session => {
            jsonrpc_error(status, -32002, "session not found; initialize again")
        }
        StatusCode::BAD_REQUEST if is_post && !has_session => jsonrpc_error(
            status,
            -32003,
            "not initialized: send initialize first (then the Mcp-Session-Id it returns)",
        ),
        StatusCode::UNSUPPORTED_MEDIA_TYPE if is_post => jsonrpc_error(
            StatusCode::BAD_REQUEST,
            -32600,
            "invalid request: not a valid MCP message",
        ),
        _ => resp,
    }
}

fn hub(state: &AppState, actor: &Actor) -> Result<mpa_core::mcp::McpHub, ApiError> {
    if !actor.is_admin {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "admin_required",
            "only administrators may configure MCP servers / 仅管理员可配置 MCP 服务器",
        ));
    }
    mpa_core::mcp::hub_of(&state.agent).ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "mcp_unavailable",
            "this host has no MCP client",
        )
    })
}

fn mcp_failure(e: mpa_core::CoreError) -> ApiError {
    let status = match &e {
        mpa_core::CoreError::Mcp(_) => StatusCode::BAD_REQUEST,
        mpa_core::CoreError::McpServerNotFound(_) => StatusCode::NOT_FOUND,
        _ => return e.into(),
    };
    ApiError::new(status, e.code(), e.to_string())
}

async fn list_servers(
    State(state): State<AppState>,
    Authed(actor): Authed,
) -> Result<Json<serde_json::Value>, ApiError> {
    let servers = hub(&state, &actor)?.list().await.map_err(mcp_failure)?;
    Ok(Json(serde_json::json!({ "servers": servers })))
}

async fn add_server(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Json(config): Json<serde_json::Value>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let server = hub(&state, &actor)?
        .add(config)
        .await
        .map_err(mcp_failure)?;
    Ok(Json(server))
}

async fn test_server(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Json(config): Json<serde_json::Value>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let report = hub(&state, &actor)?
        .test(config)
        .await
        .map_err(mcp_failure)?;
    Ok(Json(report))
}

async fn remove_server(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    hub(&state, &actor)?
        .remove(&name)
        .await
        .map_err(mcp_failure)?;
    Ok(Json(serde_json::json!({ "removed": name })))
}

#[derive(Deserialize)]
struct ByName {
    name: String,
}

async fn remove_by_query(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Query(q): Query<ByName>,
) -> Result<Json<serde_json::Value>, ApiError> {
    remove_server(State(state), Authed(actor), Path(q.name)).await
}
