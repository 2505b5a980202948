//! No zombies: the host as child subreaper, and a reaper of the orphans it adopts.
//!
//! When a terminal's shell exits before its background jobs (`sleep 30 &`, a double fork), the
//! jobs are orphaned. As PID 1 in a container, or once [`become_subreaper`] ran, they are
//! re-parented to the host, and when they exit nobody but the host can collect them: without a
//! reaper they stay zombies forever.
//!
//! The reaper must not steal the exit status of a child that something else in the process will
//! `wait` for (tokio::process, std::process — this crate's sessions and runs, and whatever other
//! parts of the host spawn). It never calls `waitpid(-1)`; it reaps one named pid at a time, and
//! only pids that cannot be a child this process forked itself:
//!
//! * a forked child starts in its parent's session, and the only way to change a session is
//!   `setsid()`, which makes the caller the leader (`sid == pid`);
//! * so a child of ours whose session id is neither ours nor its own pid was forked by someone
//!   else — an adopted orphan, typically from a terminal session (whose leader we spawned).
//!
//! A zombie child matching that rule is reaped with `waitpid(pid, WNOHANG)`. Orphans that made
//! themselves session leaders and then lost their parent (`setsid cmd &` in a shell that exits)
//! look exactly like a child spawned with `setsid`, and are left alone — the same processes
//! also escape the process-group kill, so nothing in this crate claims them. The rule needs no
//! registry shared with other crates and holds for children spawned anywhere in the process.
//!
//! Passes run on a thread of their own on every SIGCHLD (an adopted zombie is announced by one
//! too) and every 30 s.

use crate::error::{ExecError, Result};
use crate::process;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};

/// A pass also runs this often, in case a signal was coalesced away before a zombie appeared.
const PERIODIC_PASS: Duration = Duration::from_secs(30);

static REAPER_STARTED: AtomicBool = AtomicBool::new(false);

/// Makes the host the subreaper of its descendants and starts the orphan reaper, once per
/// process (later calls only repeat the flag). Call it at start, before any terminal runs. The
/// reaper lives on its own thread with its own small runtime, so it outlives whichever runtime
/// the caller uses. As PID 1 the flag is redundant but harmless.
pub fn become_subreaper() -> Result<()> {
    process::set_child_subreaper()
        .map_err(|e| ExecError::io("cannot become the child subreaper", e))?;
    if REAPER_STARTED.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    let started = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .and_then(|runtime| {
            std::thread::Builder::new()
                .name("mpa-orphan-reaper".into())
                .spawn(move || runtime.block_on(reap_forever()))
        });
    match started {
        Ok(_) => Ok(()),
        Err(e) => {
            REAPER_STARTED.store(false, Ordering::SeqCst);
            Err(ExecError::io("cannot start the orphan reaper", e))
        }
    }
}

async fn reap_forever() {
    // Without a SIGCHLD stream (it cannot fail on Linux short of resource exhaustion) the
    // periodic pass still collects everything, only later.
    let mut children = signal(SignalKind::child())
        .map_err(|e| tracing::warn!(error = %e, "orphan reaper: no SIGCHLD stream"))
        .ok();
    loop {
        let reaped = reap_orphans();
        if reaped > 0 {
            tracing::debug!(reaped, "reaped adopted orphans");
        }
        match &mut children {
            Some(stream) => {
                tokio::select! {
                    _ = stream.recv() => {}
                    () = tokio::time::sleep(PERIODIC_PASS) => {}
                }
            }
            None => tokio::time::sleep(PERIODIC_PASS).await,
        }
    }
}

/// One pass: reaps every exited orphan this process adopted (see the module rule) and returns
/// how many. Blocking (reads `/proc`); the reaper thread calls it on every SIGCHLD.
pub fn reap_orphans() -> usize {
    let me = std::process::id();
    let Some(own) = read_stat("self") else {
        return 0;
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut reaped = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Some(stat) = read_stat(&pid.to_string()) else {
            continue;
        };
        if stat.is_adopted_zombie_of(me, own.session, pid)
            && let Ok(pid) = libc::pid_t::try_from(pid)
            && process::reap_exited_child(pid)
        {
            reaped += 1;
        }
    }
    reaped
}

/// The fields of `/proc/<pid>/stat` the rule needs. A zombie keeps its parent, group and
/// session until it is reaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub state: char,
    pub ppid: u32,
    pub session: u32,
}

impl Stat {
    pub fn is_adopted_zombie_of(self, parent: u32, parent_session: u32, pid: u32) -> bool {
        self.state == 'Z'
            && self.ppid == parent
            && self.session != parent_session
            && self.session != pid
    }
}

fn read_stat(pid: &str) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// `pid (comm) state ppid pgrp session …` — `comm` may hold spaces and parentheses, so fields
/// are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let _pgrp = fields.next()?;
    let session = fields.next()?.parse().ok()?;
    Some(Stat {
        state,
        ppid,
        session,
    })
}
