use thiserror::Error;

#[derive(Debug, Error)]
pub enum CoreError {
    #[error(transparent)]
    Store(#[from] mpa_store::StoreError),
    #[error(transparent)]
    Model(#[from] mpa_model::ModelError),
    /// The session does not exist for this caller (also used for other users' sessions: no
    /// existence leak).
    #[error("session not found")]
    SessionNotFound,
    #[error(
        "the session queue is full ({capacity} turns waiting); try again when the current turn ends"
    )]
    QueueFull { capacity: usize },
    #[error("the session is shutting down")]
    SessionClosed,
    #[error("the evidence store is unavailable: {0}")]
    EvidenceUnavailable(String),
    #[error("unknown tool {0:?}")]
    UnknownTool(String),
    /// A tool set names a tool another layer of the registry has already.
    #[error("a tool named {0:?} exists already")]
    ToolNameTaken(String),
    #[error("invalid session id {0:?}: use 1-128 letters, digits, ':', '.', '_' or '-'")]
    InvalidSessionId(String),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("no such user: {0}")]
    NoSuchUser(String),
    #[error("the password must have at least {min_chars} characters")]
    WeakPassword { min_chars: usize },
    #[error("wrong user name or password")]
    InvalidCredentials,
    #[error("too many failed logins; try again in {retry_after_secs} s")]
    LoginRateLimited { retry_after_secs: u64 },
    #[error("the server is busy checking other logins; try again in a moment")]
    LoginBusy,
    #[error("password hashing failed: {0}")]
    PasswordHashing(String),
    /// MoviePilot accepted the credentials but has disabled the account.
    #[error("this MoviePilot account is disabled / 该 MoviePilot 账户未启用")]
    AccountDisabled,
    /// The user's MoviePilot account ended (disabled, deleted, or its sign-in refused): the
    /// token presented was revoked with it.
    #[error("{}", .0.message())]
    MoviePilotAccountEnded(crate::moviepilot::standing::Ended),
    /// `MPA_AUTH=moviepilot` and MoviePilot's login could not be reached or read.
    #[error("cannot sign in with MoviePilot right now: {0} / 暂时无法通过 MoviePilot 登录")]
    SignInUnavailable(String),
}

impl CoreError {
    /// Stable machine-readable code for front ends.
    pub fn code(&self) -> &'static str {
        match self {
            CoreError::Store(mpa_store::StoreError::NameTaken(_)) => "user_name_taken",
            CoreError::Store(mpa_store::StoreError::AlreadyLinked { .. }) => {
                "moviepilot_user_linked"
            }
            CoreError::Store(mpa_store::StoreError::InvalidName(_)) => "invalid_user_name",
            CoreError::Store(mpa_store::StoreError::NoSuchUser(_)) | CoreError::NoSuchUser(_) => {
                "no_such_user"
            }
            CoreError::Store(_) => "storage_unavailable",
            CoreError::Model(e) => e.code(),
            CoreError::SessionNotFound => "session_not_found",
            CoreError::QueueFull { .. } => "agent_manager_queue_full",
            CoreError::SessionClosed => "agent_manager_unavailable",
            CoreError::EvidenceUnavailable(_) => "storage_unavailable",
            CoreError::UnknownTool(_) => "unknown_tool",
            CoreError::ToolNameTaken(_) => "tool_name_taken",
            CoreError::InvalidSessionId(_) => "invalid_session_id",
            CoreError::Config(_) => "invalid_configuration",
            CoreError::WeakPassword { .. } => "weak_password",
            CoreError::InvalidCredentials => "invalid_credentials",
            CoreError::LoginRateLimited { .. } => "too_many_login_attempts",
            CoreError::LoginBusy => "login_busy",
            CoreError::PasswordHashing(_) => "internal_error",
            CoreError::AccountDisabled => "account_disabled",
            CoreError::SignInUnavailable(_) => "moviepilot_unavailable",
            CoreError::MoviePilotAccountEnded(why) => why.code(),
        }
    }
}

pub type Result<T> = std::result::Result<T, CoreError>;
