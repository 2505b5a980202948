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
//!   (HTTP ≥ 400), `Redirected` (3xx, never followed), `NotSent` (nothing happened) or
//!   `MaybeSent` (outcome unknown). [`GatewayClient::request_url`] is the URL a call goes to.
//! - Identity: [`mint_token`], [`verify_token`], [`token_expiry`], [`BearerToken`],
//!   [`GatewayClient::login`] → [`LoginResult`]; [`jwt`]: the HS256 tokens underneath.
//! - [`ApiResponse::answer`] / [`ApiError::refusal`] read MoviePilot's answers as it writes them
//!   ([`Answer`]: data, a bare value wrapped, a `success:false` rejection, an all-null empty
//!   record; [`Refusal`]: permission denied, 422 field errors, a message, plain text).
//! - The user's own server: [`GatewayClient::server_knowledge`] reads its OpenAPI
//!   ([`ServerApi`]) when due and reconciles the catalogue with it ([`Reconciliation`]: each
//!   operation [`Availability`], and [`Reconciliation::adapt`] to the live route);
//!   [`GatewayClient::send`] refuses what the server does not serve ([`LiveRefusal`]) before
//!   sending.
//! - [`redact_secrets`] / [`is_secret_key`] (`mpa-redact`'s value rules) for results the tool
//!   layer must not show.
//!
//! Invariants:
//! - Only catalogue routes are ever requested; no argument can choose a URL, header, method or
//!   token. A placeholder value is exactly one segment: empty, `.`, `..` and values with `/`,
//!   `\` or control characters are refused (`invalid_path_parameter`); the URL is the parsed
//!   base plus segments, and its path is checked against the template before sending.
//!   `{source}`/`{action}` are allow-listed. Redirects are never followed (a 3xx is an error),
//!   so the bearer never reaches another path or origin.
//! - A refused call sends nothing. A transport failure after the request may have been written
//!   is never reported as "not executed" (`MaybeSent`, [`Outcome::Unknown`](mpa_protocol::Outcome)).
//! - Tokens appear in no `Debug`, `Display`, log line or error; environment proxies are ignored.

mod answer;
mod catalogue;
mod client;
mod contract;
mod error;
mod identity;
pub mod jwt;
mod openapi;
mod reconcile;
mod request;
mod route;
mod server;
mod suggest;

pub use answer::{Answer, FieldError, NOT_SUPERUSER_DETAIL, Refusal};
pub use catalogue::{
    ALLOWED_ACTIONS, ALLOWED_SOURCES, CATALOGUE_TSV, Catalogue, CatalogueError, CollectionShape,
    Confirmation, DEFAULT_TIMEOUT, HttpMethod, LONG_TIMEOUT, Operation, Paging, Recovery, Role,
    Sensitivity, catalogue, embedded_catalogue_error, placeholders,
};
pub use client::{
    AccountStanding, ApiError, ApiResponse, CHANNEL_HEADER, CURRENT_USER_PATH, CallContext,
    Collection, GatewayClient, GatewayConfig, LOGIN_PATH, OPENAPI_PATH, SESSION_HEADER,
    SOURCE_HEADER,
};
pub use contract::{BodyKind, BodySpec, Field, FieldKind, InputContract, ObjectContract};
pub use error::{GatewayError, Result};
pub use identity::{
    BearerToken, LoginResult, TOKEN_PURPOSE, TokenClaims, mint_token, mint_token_at, now_epoch,
    token_expiry, verify_token,
};
pub use mpa_redact::{REDACTED, is_secret_key, redact_secrets};
pub use openapi::{OpenApiError, QueryParam, RouteBody, ServerApi, ServerRoute};
pub use reconcile::{Availability, AvailabilityCounts, LiveOperation, LiveRefusal, Reconciliation};
pub use request::{
    DEFAULT_COUNT, DEFAULT_PAGE, InputError, Location, PreparedRequest, canonical_json,
};
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use contract::{ParsedEntry, parse_body, parse_field, split_top};
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use identity::parse_login_answer;
// public for the crate's tests (tests/all.rs); not part of the API
#[doc(hidden)]
pub use route::{TemplateSegment, build_url, template_segments, url_matches};
// public for the crate's tests (tests/all.rs); not part of the API
pub use server::{NoOpenApi, RECHECK_AFTER, RETRY_UNREACHABLE_AFTER, ServerKnowledge, ServerView};
#[doc(hidden)]
pub use suggest::{edit_distance, suggest};

impl Catalogue {
    /// The operation with this id, or `UnknownOperation` carrying close matches.
    pub fn lookup(&self, id: &str) -> Result<&Operation> {
        self.get(id).ok_or_else(|| GatewayError::UnknownOperation {
            id: id.chars().take(120).collect(),
            suggestions: self.suggest(id),
        })
    }
}
