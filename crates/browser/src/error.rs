//! The crate's one error type. Each variant has the wire code a tool result carries.

/// What went wrong with a browser action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrowserError {
    /// No Chromium could be started (not installed, not executable, crashed at start).
    #[error("browser unavailable: {0}")]
    Unavailable(String),
    /// The browser ended (closed, crashed, or the session was closed meanwhile).
    #[error("the browser session is closed")]
    Closed,
    #[error("DevTools protocol error: {0}")]
    Protocol(String),
    #[error("timed out after {0} s")]
    Timeout(u64),
    #[error("navigation refused: {0}")]
    NavigationRefused(String),
    #[error("navigation failed: {0}")]
    NavigationFailed(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("no element matches `{0}`")]
    ElementNotFound(String),
    #[error("selector `{selector}` matches {count} elements; it must match exactly one")]
    AmbiguousSelector { selector: String, count: u64 },
    #[error("unknown element ref `{0}` (take a new snapshot)")]
    UnknownRef(String),
    #[error("unknown tab `{0}`")]
    UnknownTab(String),
    #[error("script error: {0}")]
    Script(String),
    #[error("screenshot could not be made small enough ({0} bytes at the lowest quality)")]
    ImageTooLarge(usize),
}

impl BrowserError {
    /// The result's error code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "browser_unavailable",
            Self::Closed => "browser_closed",
            Self::Protocol(_) => "browser_error",
            Self::Timeout(_) => "timeout",
            Self::NavigationRefused(_) => "unsafe_url",
            Self::NavigationFailed(_) => "navigation_failed",
            Self::InvalidArgument(_) => "invalid_input",
            Self::ElementNotFound(_) => "element_not_found",
            Self::AmbiguousSelector { .. } => "ambiguous_selector",
            Self::UnknownRef(_) => "unknown_ref",
            Self::UnknownTab(_) => "unknown_tab",
            Self::Script(_) => "script_error",
            Self::ImageTooLarge(_) => "image_too_large",
        }
    }
}

pub type Result<T, E = BrowserError> = std::result::Result<T, E>;
