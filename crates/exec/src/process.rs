//! The OS layer: PTY allocation, spawning into a new session/process group, signals, and the
//! subreaper calls. All `unsafe` of the crate lives here, each block with its `SAFETY:` argument.

use crate::error::{ExecError, Result};
use crate::launch::Launch;
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
    // functions (signal, setsid, ioctl); it allocates nothing and touches no locks.
    // `last_os_error` only reads errno.
    unsafe {
        cmd.pre_exec(move || {
            // A command starts as in a fresh terminal, whatever the host inherited: a host
            // started in the background of a script, under `nohup` or by a supervisor that
            // ignores SIGINT/SIGQUIT/SIGHUP would otherwise pass the ignoring on through exec,
            // and `interrupt` (SIGINT), a closed terminal (SIGHUP) or a shell's own job control
            // would reach nothing. (Handlers are reset by exec itself; only "ignore" survives.
            // 1..32 are the standard signals; glibc refuses to touch the ones it reserves.)
            for signal in 1..32 {
                if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                    libc::signal(signal, libc::SIG_DFL);
                }
            }
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

/// Makes this process the reaper of its orphaned descendants (`PR_SET_CHILD_SUBREAPER`): they are
/// re-parented to us instead of to init, so their exit statuses are ours to collect.
pub(crate) fn set_child_subreaper() -> io::Result<()> {
    // prctl(2) reads its arguments as unsigned longs; pass them at that width.
    const ON: libc::c_ulong = 1;
    const OFF: libc::c_ulong = 0;
    // SAFETY: PR_SET_CHILD_SUBREAPER takes one integer flag and no pointers; the unused
    // arguments are passed as 0 as prctl(2) asks. It only sets a flag on this process.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, ON, OFF, OFF, OFF) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Collects the exit status of child `pid` if it has exited (`WNOHANG`). True when reaped.
pub(crate) fn reap_exited_child(pid: libc::pid_t) -> bool {
    if pid <= 0 {
        // 0 and negative pids mean "any child" / "a group": never reap what we did not name.
        return false;
    }
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a live local for the whole call; waitpid(2) on one positive pid with
    // WNOHANG neither blocks nor touches any other child.
    let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    rc == pid
}
