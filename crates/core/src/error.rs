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
    /// A message's text is over `MPA_MAX_MESSAGE_KB`; nothing of it was stored.
    #[error(
        "the message has {bytes} bytes of text, more than the {limit} accepted; nothing was stored — send long text as a file or in parts / 消息文本过长（{bytes} 字节，上限 {limit} 字节），未保存任何内容；请改用文件或分段发送"
    )]
    MessageTooLarge { bytes: usize, limit: usize },
    /// A message that could not fit the model's context window even alone; nothing of it was
    /// stored.
    #[error(
        "the message alone needs about {tokens} tokens, more than the {room} the model's context window ({window} tokens) leaves beside the system prompt and tools; nothing was stored — shorten it / 该消息本身约需 {tokens} 个 token，超过模型上下文窗口（{window}）在系统提示与工具之外可用的 {room} 个，未保存任何内容；请缩短后再发送"
    )]
    MessageOverWindow { tokens: u64, room: u64, window: u64 },
    /// The data directory's disk is below the free-space floor: a new turn could not be saved.
    #[error(
        "the host's disk is almost full ({available} bytes free, {floor} needed); nothing was accepted — free some space and try again / 主机磁盘空间不足（剩余 {available} 字节，至少需要 {floor} 字节），本条消息未被接受；请释放空间后重试"
    )]
    StorageFull { available: u64, floor: u64 },
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
    /// An upload over the attachment limit (32 MiB).
    #[error("the file is {size} bytes; attachments are limited to 32 MiB")]
    AttachmentTooLarge { size: usize },
    #[error("the file is empty")]
    AttachmentEmpty,
    /// Unknown, expired, or uploaded by someone else: the same answer for all three.
    #[error("no such attachment (unknown, expired, or not yours)")]
    AttachmentNotFound,
    #[error("the attachment could not be stored: {0}")]
    AttachmentStorage(String),
    /// Something only a system administrator may do (switching the persona, the public memory).
    #[error("only a system administrator may {0}")]
    AdminRequired(&'static str),
    /// A web request's value is out of range (the message names the field and the rule).
    #[error("{0}")]
    InvalidInput(String),
    /// The session's turn is running; the request needs it idle (regenerate, edit the last message).
    #[error("a turn is running in this session; stop it or wait for it to end")]
    SessionBusy,
    /// Regenerate or edit asked of a session with no user message to go back to.
    #[error("this session has no message of yours to send again")]
    NothingToRegenerate,
    #[error(transparent)]
    Mcp(#[from] mpa_mcp::McpError),
    #[error("no MCP server named {0:?} is configured")]
    McpServerNotFound(String),
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
            CoreError::MessageTooLarge { .. } => "message_too_large",
            CoreError::MessageOverWindow { .. } => "message_exceeds_context_window",
            CoreError::StorageFull { .. } => "storage_full",
            CoreError::Config(_) => "invalid_configuration",
            CoreError::WeakPassword { .. } => "weak_password",
            CoreError::InvalidCredentials => "invalid_credentials",
            CoreError::LoginRateLimited { .. } => "too_many_login_attempts",
            CoreError::LoginBusy => "login_busy",
            CoreError::PasswordHashing(_) => "internal_error",
            CoreError::AccountDisabled => "account_disabled",
            CoreError::SignInUnavailable(_) => "moviepilot_unavailable",
            CoreError::MoviePilotAccountEnded(why) => why.code(),
            CoreError::AttachmentTooLarge { .. } => "attachment_too_large",
            CoreError::AttachmentEmpty => "empty_file",
            CoreError::AttachmentNotFound => "attachment_not_found",
            CoreError::AttachmentStorage(_) => "attachment_storage_error",
            CoreError::AdminRequired(_) => "admin_required",
            CoreError::InvalidInput(_) => "invalid_input",
            CoreError::SessionBusy => "session_busy",
            CoreError::NothingToRegenerate => "nothing_to_regenerate",
            CoreError::Mcp(e) => e.code(),
            CoreError::McpServerNotFound(_) => "mcp_server_not_found",
        }
    }
}

pub type Result<T> = std::result::Result<T, CoreError>;
