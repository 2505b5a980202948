//! The MoviePilot gateway: what the agent may call on MoviePilot's REST API, how a call is
//! checked and built, and how it is sent. A capability crate — it knows nothing of tools, JSON
//! schemas for the model or the agent loop; `mpa-core`'s `moviepilot_api` tool adapts it.
//!
//! Public API:
//! - [`catalogue()`] → the static [`Catalogue`] of 229 [`Operation`]s compiled in from
//!   `catalog/moviepilot-operations.tsv` and parsed once: [`Catalogue::get`], [`lookup`](Catalogue::lookup),
//!   [`categories`](Catalogue::categories), [`in_category`](Catalogue::in_category),
//!   [`suggest`](Catalogue::suggest). Each operation has a fixed [`HttpMethod`] + route, an
//!   [`EffectClass`](mpa_protocol::EffectClass), [`Role`], [`Confirmation`], [`Recovery`],
//!   [`Sensitivity`], [`CollectionShape`] and typed inputs ([`Field`], [`BodySpec`]);
//!   [`Operation::input_contract`] renders them as the [`InputContract`] a model reads.
//! - [`Operation::prepare`] validates `(path_params, query, body)` → [`PreparedRequest`] or an
//!   [`InputError`]; [`PreparedRequest::canonical_arguments`] / [`arguments_digest`](PreparedRequest::arguments_digest)
//!   identify the normalised call for the invocation ledger.
//! - [`GatewayClient::send`] → [`ApiResponse`] (with the [`Collection`] headers;
//!   [`ApiResponse::result_json`] puts `collection` first) or a [`GatewayError`]: `Api`
//!   (HTTP ≥ 400), `NotSent` (nothing happened) or `MaybeSent` (outcome unknown).
//! - Identity: [`mint_token`], [`verify_token`], [`token_expiry`], [`BearerToken`],
//!   [`GatewayClient::login`] → [`LoginResult`].
//! - [`redact_secrets`] / [`is_secret_key`] (`mpa-redact`'s value rules) for results the tool
//!   layer must not show.
//!
//! Invariants:
//! - Only catalogue routes are ever requested; no argument can choose a URL, header, method or
//!   token. Placeholders are percent-encoded; `{source}`/`{action}` are allow-listed.
//! - A refused call sends nothing. A transport failure after the request may have been written
//!   is never reported as "not executed" (`MaybeSent`, [`Outcome::Unknown`](mpa_protocol::Outcome)).
//! - Tokens appear in no `Debug`, `Display`, log line or error; environment proxies are ignored.

mod catalogue;
mod client;
mod contract;
mod error;
mod identity;
mod request;
mod suggest;

pub use catalogue::{
    ALLOWED_ACTIONS, ALLOWED_SOURCES, CATALOGUE_TSV, Catalogue, CatalogueError, CollectionShape,
    Confirmation, DEFAULT_TIMEOUT, HttpMethod, LONG_TIMEOUT, Operation, Paging, Recovery, Role,
    Sensitivity, catalogue, embedded_catalogue_error, placeholders,
};
pub use client::{
    ApiError, ApiResponse, CHANNEL_HEADER, CallContext, Collection, GatewayClient, GatewayConfig,
    LOGIN_PATH, SESSION_HEADER, SOURCE_HEADER,
};
pub use contract::{BodyKind, BodySpec, Field, FieldKind, InputContract, ObjectContract};
pub use error::{GatewayError, Result};
pub use identity::{
    BearerToken, LoginResult, TOKEN_PURPOSE, TokenClaims, mint_token, mint_token_at, now_epoch,
    token_expiry, verify_token,
};
pub use mpa_redact::{REDACTED, is_secret_key, redact_secrets};
pub use request::{
    DEFAULT_COUNT, DEFAULT_PAGE, InputError, Location, PreparedRequest, canonical_json,
};

impl Catalogue {
    /// The operation with this id, or `UnknownOperation` carrying close matches.
    pub fn lookup(&self, id: &str) -> Result<&Operation> {
        self.get(id).ok_or_else(|| GatewayError::UnknownOperation {
            id: id.chars().take(120).collect(),
            suggestions: self.suggest(id),
        })
    }
}
