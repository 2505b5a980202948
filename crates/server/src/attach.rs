//! `POST /api/v1/agent/upload` and `GET /api/v1/agent/file/{id}` (spec runtime.md §14.1): the
//! web page's attachments, stored and looked up by [`mpa_core::web::attachments`]. Uploads have
//! their own size rule (32 MiB of file, not of body), so this route sits outside the general
//! body limit and counts the file's bytes itself.

use crate::auth::Authed;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::state::AppState;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mpa_core::CoreError;
use mpa_core::web::attachments::{Kind, MAX_BYTES};
use serde::Deserialize;
use serde_json::{Value, json};

/// Room for the multipart framing and the other fields around a file of [`MAX_BYTES`].
const FRAMING: usize = 64 * 1024;

fn too_large(size: usize) -> ApiError {
    CoreError::AttachmentTooLarge { size }.into()
}

pub async fn upload(
    State(state): State<AppState>,
    Authed(actor): Authed,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    // A declared length over the limit is refused before a byte of the body is read.
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if let Some(n) = declared
        && n > MAX_BYTES + FRAMING
    {
        return Err(too_large(n));
    }
    let mut form = Multipart::from_request(req, &state).await.map_err(|_| {
        ApiError::bad_request_code(
            "invalid_multipart",
            "send the file as multipart/form-data with a `file` field",
        )
    })?;
    let mut file: Option<(String, Vec<u8>)> = None;
    loop {
        let field = match form.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(_) => {
                return Err(ApiError::bad_request_code(
                    "invalid_multipart",
                    "the multipart body could not be read",
                ));
            }
        };
        if field.name() != Some("file") {
            // `session_id` and anything else: the attachment belongs to the user, not a session.
            continue;
        }
        let name = field.file_name().unwrap_or_default().to_string();
        let mut bytes = Vec::new();
        let mut field = field;
        loop {
            match field.chunk().await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > MAX_BYTES {
                        return Err(too_large(bytes.len() + chunk.len()));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(_) => {
                    return Err(ApiError::bad_request_code(
                        "invalid_multipart",
                        "the multipart body could not be read",
                    ));
                }
            }
        }
        file = Some((name, bytes));
    }
    let Some((name, bytes)) = file else {
        return Err(ApiError::bad_request_code(
            "missing_file",
            "the form has no `file` field",
        ));
    };
    let agent = state.agent.clone();
    let owner = actor.user_id.clone();
    let stored =
        tokio::task::spawn_blocking(move || agent.attachments().store(&owner, &name, &bytes))
            .await
            .map_err(|_| {
                ApiError::internal("internal_error", "the upload could not be stored")
            })??;
    Ok(Json(json!(stored)))
}

#[derive(Deserialize)]
pub struct FileQuery {
    #[serde(default)]
    pub download: Option<String>,
}

pub async fn file(
    State(state): State<AppState>,
    Authed(actor): Authed,
    Path(id): Path<String>,
    Query(q): Query<FileQuery>,
) -> Result<Response, ApiError> {
    let agent = state.agent.clone();
    let owner = actor.user_id.clone();
    let (a, bytes) = tokio::task::spawn_blocking(move || agent.attachments().read(&owner, &id))
        .await
        .map_err(|_| ApiError::internal("internal_error", "the file could not be read"))??;
    let download = q.download.is_some_and(|d| d != "0" && d != "false");
    let mut resp = (StatusCode::OK, bytes).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(a.mime_type));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    // Only images are shown inline; anything else is a download, never rendered by the browser.
    let disposition = if a.kind == Kind::Image && !download {
        "inline"
    } else {
        "attachment"
    };
    // The display name is percent-encoded (RFC 5987), so no quote or newline reaches the header.
    let encoded: String = a
        .name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    if let Ok(v) = HeaderValue::from_str(&format!("{disposition}; filename*=UTF-8''{encoded}")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}
