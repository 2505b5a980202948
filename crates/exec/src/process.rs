//! The OS layer: PTY allocation, spawning into a new session/process group, and signals.
//! All `unsafe` of the crate lives here, each block with its `SAFETY:` argument.

use crate::error::{ExecError, Result};
use crate::launch::Launch;
use serde_json::Value;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;

/// How the child's stdio is wired.
pub(crate) enum StdioPlan<'a> {
    /// One-shot run: stdin at EOF, stdout/stderr piped.
    RunPipes,
    /// Session over pipes: all three piped.
    SessionPipes,
    /// Session over a PTY: all three on the slave, which becomes the controlling terminal.
    Pty(&'a OwnedFd),
}

/// A freshly opened PTY pair. The master is non-blocking; both ends are close-on-exec so no
/// other child inherits them (the slave reaches our child only through dup2 onto 0/1/2).
pub(crate) struct PtyPair {
    pub master: OwnedFd,
    pub slave: OwnedFd,
}

pub(crate) fn open_pty() -> io::Result<PtyPair> {
    let mut master: libc::c_int = -1;
    let mut slave: libc::c_int = -1;
    // Wide enough that ordinary log lines do not wrap.
    let size = libc::winsize {
        ws_row: 40,
        ws_col: 160,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: both out-pointers point to live locals; a null name and termios are allowed by
    // openpty(3) and mean "no name wanted" and "default terminal settings"; `size` outlives the call.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openpty succeeded, so both descriptors are open and owned by nobody else.
    let pair = unsafe {
        PtyPair {
            master: OwnedFd::from_raw_fd(master),
            slave: OwnedFd::from_raw_fd(slave),
        }
    };
    set_fd_flag(pair.master.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC)?;
    set_fd_flag(pair.slave.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC)?;
    set_fd_flag(pair.master.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK)?;
    Ok(pair)
}

fn set_fd_flag(fd: RawFd, set_cmd: libc::c_int, flag: libc::c_int) -> io::Result<()> {
    let get_cmd = if set_cmd == libc::F_SETFD {
        libc::F_GETFD
    } else {
        libc::F_GETFL
    };
    // SAFETY: fcntl with F_GETFD/F_GETFL on a descriptor we own has no memory effects.
    let flags = unsafe { libc::fcntl(fd, get_cmd) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; F_SETFD/F_SETFL only change descriptor flags.
    if unsafe { libc::fcntl(fd, set_cmd, flags | flag) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Registers a PTY master with the tokio reactor for reading and writing.
pub(crate) fn register_master(master: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;
    // SAFETY: the AsyncFd takes ownership of the OwnedFd, so the descriptor stays open and
    // refers to the same PTY master until the AsyncFd (and with it the OwnedFd) is dropped.
    unsafe { AsyncFd::register_with_interest(master, Interest::READABLE | Interest::WRITABLE) }
        .map_err(|err| err.into_parts().1)
}

/// Spawns `launch` as the leader of a new session (so its pid is also its process-group id and
/// every signal can target the whole group).
pub(crate) fn spawn(launch: &Launch, plan: StdioPlan<'_>) -> Result<tokio::process::Child> {
    let mut cmd = launch.command();
    let with_ctty = matches!(plan, StdioPlan::Pty(_));
    match plan {
        StdioPlan::RunPipes => {
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        }
        StdioPlan::SessionPipes => {
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        }
        StdioPlan::Pty(slave) => {
            let dup = |fd: &OwnedFd| fd.try_clone().map_err(|e| ExecError::io("dup pty", e));
            cmd.stdin(Stdio::from(dup(slave)?))
                .stdout(Stdio::from(dup(slave)?))
                .stderr(Stdio::from(dup(slave)?));
        }
    }
    // SAFETY: the hook runs in the forked child before exec and calls only async-signal-safe
    // functions (setsid, ioctl); it allocates nothing and touches no locks. `last_os_error`
    // only reads errno.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            if with_ctty && libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(false);
    cmd.spawn()
        .map_err(|e| ExecError::io("failed to start the command", e))
}

/// Sends `signal` to every process of group `pgid`. True when at least one process got it.
pub(crate) fn signal_group(pgid: u32, signal: libc::c_int) -> bool {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return false;
    };
    if pgid <= 1 {
        // Never signal "every process" (0/-1 semantics) by accident.
        return false;
    }
    // SAFETY: kill(2) has no memory effects; a negative pid addresses one process group.
    unsafe { libc::kill(-pgid, signal) == 0 }
}

/// The foreground process group of a PTY (an interactive shell moves jobs into their own groups).
pub(crate) fn foreground_group(master: &OwnedFd) -> Option<u32> {
    // SAFETY: tcgetpgrp only reads terminal state of a descriptor we own.
    let pgid = unsafe { libc::tcgetpgrp(master.as_raw_fd()) };
    u32::try_from(pgid).ok().filter(|p| *p > 1)
}

/// Reads from a raw non-blocking descriptor.
pub(crate) fn read_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a valid writable region of `buf.len()` bytes for the whole call.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Writes to a raw non-blocking descriptor.
pub(crate) fn write_fd(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a valid readable region of `buf.len()` bytes for the whole call.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Exit code of a finished child: its status, or `-signal` when a signal ended it.
pub(crate) fn exit_code(status: std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| -s))
}

const SIGNALS: &[(&str, libc::c_int)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ABRT", libc::SIGABRT),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
];

/// Resolves `signal_name` (default TERM): names with or without `SIG`, or numbers, limited to
/// signals that end or notify a process (no STOP/CONT games).
pub(crate) fn parse_signal(value: Option<&Value>) -> Result<(libc::c_int, String)> {
    let bad = |shown: String| {
        ExecError::InvalidArgument(format!(
            "signal_name {shown} is not supported; use one of {}",
            SIGNALS
                .iter()
                .map(|(n, _)| format!("SIG{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    };
    let found = match value {
        None | Some(Value::Null) => SIGNALS.iter().find(|(n, _)| *n == "TERM"),
        Some(Value::Number(n)) => {
            let num = n.as_i64();
            SIGNALS.iter().find(|(_, s)| num == Some(i64::from(*s)))
        }
        Some(Value::String(s)) => {
            let s = s.trim();
            if let Ok(num) = s.parse::<i64>() {
                SIGNALS.iter().find(|(_, sig)| i64::from(*sig) == num)
            } else {
                let upper = s.to_ascii_uppercase();
                let name = upper.strip_prefix("SIG").unwrap_or(&upper);
                SIGNALS.iter().find(|(n, _)| *n == name)
            }
        }
        Some(_) => None,
    };
    match found {
        Some((name, sig)) => Ok((*sig, format!("SIG{name}"))),
        None => Err(bad(value
            .map(|v| v.to_string().chars().take(40).collect())
            .unwrap_or_default())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signal_names_and_numbers() {
        assert_eq!(parse_signal(None).unwrap().1, "SIGTERM");
        assert_eq!(parse_signal(Some(&json!("kill"))).unwrap().0, libc::SIGKILL);
        assert_eq!(
            parse_signal(Some(&json!("SIGINT"))).unwrap().0,
            libc::SIGINT
        );
        assert_eq!(parse_signal(Some(&json!(9))).unwrap().1, "SIGKILL");
        assert_eq!(parse_signal(Some(&json!("15"))).unwrap().1, "SIGTERM");
        for bad in [
            json!("STOP"),
            json!(19),
            json!(0),
            json!(-9),
            json!("SIGFOO"),
            json!([]),
        ] {
            assert!(parse_signal(Some(&bad)).is_err(), "{bad}");
        }
    }
}
