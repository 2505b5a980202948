//! Who asked for a write to memory or skills, and the live cancellation flag of a background
//! review. The host decides the origin, never the model; the flag is runtime state, so it lives
//! here with the stores it seals, not in the plain data of `mpa-protocol`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Identity and cancellation flag of one background learning review. One token is shared by every
/// store the review writes to, so a single `cancel()` seals all of its later writes.
#[derive(Debug, Clone)]
pub struct ReviewToken {
    id: String,
    cancelled: Arc<AtomicBool>,
}

impl ReviewToken {
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            cancelled: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

/// Who asked for a write to memory or skills. Set by the host, never derived from tool arguments.
#[derive(Debug, Clone, Default)]
pub enum WriteOrigin {
    /// The user's own turn.
    #[default]
    Foreground,
    /// A background learning review: guarded writes, replace/remove staged as proposals, nothing
    /// written once the token is cancelled.
    BackgroundReview(ReviewToken),
}
