//! Giving back what a finished turn freed (issue 24 item 9).
//!
//! A turn allocates far more than its session keeps afterwards: the request body, the streamed
//! answer, token counting, the snapshot's JSON. The session's own part is small (≈ 19 KB of live
//! heap for a one-turn chat), but glibc's allocator keeps the pages a turn freed resident, spread
//! over its per-thread arenas: 1,000 chats that each ran one turn at once held ≈ 400 KB of RSS
//! apiece until the idle reclaim. So when a turn ends the allocator is asked to return its free
//! pages, once for every turn that ended in the last [`QUIET`] — on a thread of its own, since a
//! trim walks every arena and should not hold up the runtime.

use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

/// How long after a turn ends its memory is given back; turns ending meanwhile share that trim,
/// so a busy host trims at most this often.
pub const QUIET: Duration = Duration::from_secs(1);

/// The release thread's doorbell: one pending ring is enough, whoever rings while it is pending
/// is served by the same trim.
static BELL: OnceLock<Option<SyncSender<()>>> = OnceLock::new();

/// A turn ended: its freed memory goes back to the system within [`QUIET`].
pub fn turn_ended() {
    let Some(bell) = BELL.get_or_init(start).as_ref() else {
        return;
    };
    match bell.try_send(()) {
        Ok(()) | Err(TrySendError::Full(())) => {}
        Err(TrySendError::Disconnected(())) => {
            tracing::debug!("the memory release thread has ended");
        }
    }
}

fn start() -> Option<SyncSender<()>> {
    if !TRIMS {
        return None;
    }
    let (tx, rx) = sync_channel(1);
    let started = std::thread::Builder::new()
        .name("mpa-heap-release".into())
        .stack_size(64 * 1024)
        .spawn(move || release_loop(&rx));
    match started {
        Ok(_) => Some(tx),
        Err(e) => {
            tracing::warn!(error = %e, "no memory release thread; freed memory stays with the allocator");
            None
        }
    }
}

fn release_loop(rx: &Receiver<()>) {
    // A ring that comes while this trim waits or runs is served by the next one, so the last
    // turn's memory is always given back.
    while rx.recv().is_ok() {
        std::thread::sleep(QUIET);
        trim();
    }
}

/// Whether this build can give freed memory back (glibc's `malloc_trim`).
const TRIMS: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only returns free pages of the allocator's arenas to the system; no
    // live allocation is moved or touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
