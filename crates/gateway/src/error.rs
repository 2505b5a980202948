//! The crate's one error type. No variant carries a bearer token, a password or a secret key;
//! response bodies are carried only by [`ApiError`], whose `Display` leaves them out.

use crate::client::ApiError;
use crate::reconcile::LiveRefusal;
use crate::request::InputError;
use mpa_protocol::Outcome;

pub type Result<T, E = GatewayError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// No operation has this id; `suggestions` are close ids, best first.
    #[error("unknown MoviePilot operation `{id}`{}", suggestion_text(.suggestions))]
    UnknownOperation {
        id: String,
        suggestions: Vec<&'static str>,
    },

    /// The call does not fit the operation's input contract; nothing was sent.
    #[error(transparent)]
    InvalidInput(#[from] InputError),

    /// The configured MoviePilot address cannot be used (never echoed: it may hold credentials).
    #[error("MOVIEPILOT_URL is not a usable http(s) base URL: {reason}")]
    InvalidBaseUrl { reason: &'static str },

    /// The request certainly did not reach MoviePilot (connection refused, name not resolved,
    /// request not buildable): nothing happened.
    #[error("the MoviePilot request for {operation_id} was not sent: {reason}")]
    NotSent {
        operation_id: String,
        reason: String,
    },

    /// The request may have reached MoviePilot and may already have taken effect (timeout after
    /// sending, connection dropped mid-response, unreadable body): the outcome is unknown.
    #[error(
        "the MoviePilot request for {operation_id} may already have taken effect, its outcome is unknown: {reason}"
    )]
    MaybeSent {
        operation_id: String,
        reason: String,
    },

    /// MoviePilot answered with HTTP ≥ 400.
    #[error(transparent)]
    Api(#[from] ApiError),

    /// The call cannot go to this server's routes (unavailable operation, a field the route
    /// would ignore, …); nothing was sent.
    #[error(transparent)]
    Unavailable(#[from] LiveRefusal),

    /// MoviePilot answered that the route itself does not exist (FastAPI's 404 "Not Found", or
    /// 405): its version does not serve this operation. Nothing happened there.
    #[error(
        "{server} does not serve {operation_id}: it answered HTTP {status} (no such route{}); its routes are read again before the next call",
        if *.status == 405 { " for this method" } else { "" }
    )]
    RouteNotServed {
        operation_id: String,
        status: u16,
        server: String,
    },

    /// MoviePilot answered with a redirect (3xx), which is never followed: following it would
    /// repeat the call, with the user's bearer, somewhere the catalogue never named.
    /// `may_have_acted` is set when the redirect can come after a write took effect (a 303, or
    /// a 301/302 to a write).
    #[error(
        "MoviePilot answered {operation_id} with HTTP {status}, a redirect{}; redirects are not followed",
        .location.as_deref().map(|l| format!(" to {l}")).unwrap_or_default()
    )]
    Redirected {
        operation_id: String,
        status: u16,
        location: Option<String>,
        may_have_acted: bool,
    },

    /// Wrong password and unknown user alike (never told apart).
    #[error("MoviePilot did not accept this username and password / MoviePilot 用户名或密码不正确")]
    LoginRejected,

    /// The credentials were right but MoviePilot has disabled the account.
    #[error("this MoviePilot account is disabled / 该 MoviePilot 账户未启用")]
    AccountDisabled,

    /// The sign-in endpoint answered with another status (its body is not kept: it may echo the
    /// submitted form).
    #[error("MoviePilot sign-in failed with HTTP {status} / MoviePilot 登录失败（HTTP {status}）")]
    LoginFailed { status: u16 },

    /// The sign-in endpoint answered 2xx but not with a token.
    #[error(
        "MoviePilot's sign-in answer could not be read: {reason} / 无法读取 MoviePilot 登录结果"
    )]
    LoginBadResponse { reason: &'static str },

    /// A token cannot be minted for this identity.
    #[error("cannot mint a MoviePilot token: {reason}")]
    InvalidIdentity { reason: &'static str },
}

fn suggestion_text(suggestions: &[&'static str]) -> String {
    if suggestions.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", suggestions.join(", "))
    }
}

impl GatewayError {
    /// What this failure means for the call's effect. Only a request that may have reached
    /// MoviePilot is `Unknown`; an HTTP error answer and everything refused before sending is
    /// `Failed`. Exhaustive on purpose: a new variant must decide.
    pub fn outcome(&self) -> Outcome {
        match self {
            GatewayError::MaybeSent { .. } => Outcome::Unknown,
            GatewayError::Redirected { may_have_acted, .. } => {
                if *may_have_acted {
                    Outcome::Unknown
                } else {
                    Outcome::Failed
                }
            }
            GatewayError::UnknownOperation { .. }
            | GatewayError::InvalidInput(_)
            | GatewayError::Unavailable(_)
            | GatewayError::RouteNotServed { .. }
            | GatewayError::InvalidBaseUrl { .. }
            | GatewayError::NotSent { .. }
            | GatewayError::Api(_)
            | GatewayError::LoginRejected
            | GatewayError::AccountDisabled
            | GatewayError::LoginFailed { .. }
            | GatewayError::LoginBadResponse { .. }
            | GatewayError::InvalidIdentity { .. } => Outcome::Failed,
        }
    }

    /// Whether the request may have reached MoviePilot (`MaybeSent` or an HTTP answer).
    pub fn reached_server(&self) -> bool {
        match self {
            GatewayError::MaybeSent { .. }
            | GatewayError::Api(_)
            | GatewayError::Redirected { .. }
            | GatewayError::RouteNotServed { .. }
            | GatewayError::LoginRejected
            | GatewayError::AccountDisabled
            | GatewayError::LoginFailed { .. }
            | GatewayError::LoginBadResponse { .. } => true,
            GatewayError::UnknownOperation { .. }
            | GatewayError::InvalidInput(_)
            | GatewayError::Unavailable(_)
            | GatewayError::InvalidBaseUrl { .. }
            | GatewayError::NotSent { .. }
            | GatewayError::InvalidIdentity { .. } => false,
        }
    }
}
