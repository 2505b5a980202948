//! The kernel's process: `python3 kernel.py` leading its own session and process group, with a
//! parent-death pipe on descriptor 3 and an environment without the host's secrets. Every
//! `unsafe` block of the crate lives here.

use crate::KernelConfig;
use crate::error::{KernelError, Result};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The descriptor number the kernel finds the parent-death pipe on.
const PARENT_FD: RawFd = 3;

/// Environment variables never passed to a kernel: the host's own credentials.
const HOST_SECRETS: [&str; 6] = [
    "LLM_API_KEY",
    "MOVIEPILOT_SECRET_KEY",
    "MPA_ADMIN_TOKEN",
    "OPENAI_API_KEY",
    "API_TOKEN",
    "SUPERUSER_PASSWORD",
];

/// A running kernel process.
pub(crate) struct KernelProcess {
    pub child: tokio::process::Child,
    pub pgid: u32,
    /// The write end of the parent-death pipe: when the host dies it closes, and the kernel
    /// kills its own group.
    _parent_pipe: OwnedFd,
}

pub(crate) struct SpawnPlan<'a> {
    pub cfg: &'a KernelConfig,
    pub script: &'a Path,
    pub env: Vec<(&'static str, String)>,
}

/// The interpreter: the configured one, the venv's, or `python3` on the PATH.
pub(crate) fn interpreter(cfg: &KernelConfig) -> PathBuf {
    if let Some(p) = &cfg.interpreter {
        return p.clone();
    }
    let venv = cfg
        .venv_path
        .clone()
        .filter(|p| p.is_dir())
        .or_else(|| Some(cfg.cwd.join("venv")).filter(|p| p.is_dir()));
    if let Some(v) = venv {
        let py = v.join("bin/python3");
        if py.is_file() {
            return py;
        }
    }
    host_python().clone()
}

/// `python3` on the PATH, resolved once to the executable itself (`sys.executable`): a version
/// manager's shim (pyenv) is a shell script that would cost every cold start its own startup.
fn host_python() -> &'static PathBuf {
    static RESOLVED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    RESOLVED.get_or_init(|| {
        std::process::Command::new("python3")
            .args(["-E", "-c", "import sys; print(sys.executable)"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| PathBuf::from(s.trim()))
            .filter(|p| p.is_absolute() && p.is_file())
            .unwrap_or_else(|| PathBuf::from("python3"))
    })
}

/// Whether an inherited variable may reach the kernel.
fn inherited(key: &str) -> bool {
    !(HOST_SECRETS.contains(&key)
        || key == "PYTHONPATH"
        || key.starts_with("MOVIEPILOT_RPC_")
        || key.starts_with("MOVIEPILOT_KERNEL_")
        || mpa_redact::is_secret_key(key))
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill; O_CLOEXEC keeps both ends
    // out of every other child the host starts.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub(crate) fn spawn(plan: SpawnPlan<'_>) -> Result<KernelProcess> {
    let program = interpreter(plan.cfg);
    let (read_end, write_end) = pipe().map_err(|e| KernelError::io("creating a pipe", e))?;
    let mut cmd = std::process::Command::new(&program);
    // -E: no PYTHONPATH or other PYTHON* settings of the host; UTF-8 whatever the locale.
    cmd.arg("-E")
        .args(["-X", "utf8", "-u"])
        .arg(plan.script)
        .current_dir(&plan.cfg.cwd)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| k.to_str().is_some_and(inherited))
        .collect();
    cmd.envs(env);
    if let Some(venv) = program.parent().and_then(Path::parent)
        && venv.join("pyvenv.cfg").is_file()
    {
        cmd.env("VIRTUAL_ENV", venv);
    }
    cmd.env("PYTHONIOENCODING", "utf-8")
        .env("PYTHONUTF8", "1")
        .env("MOVIEPILOT_RPC_PERSISTENT", "1")
        .env("MOVIEPILOT_KERNEL_PARENT_FD", PARENT_FD.to_string());
    for (k, v) in &plan.env {
        cmd.env(k, v);
    }
    let read_fd = read_end.as_raw_fd();
    // SAFETY: the hook runs in the forked child before exec and calls only async-signal-safe
    // functions (setsid, dup2, fcntl); it allocates nothing and touches no locks. dup2 onto a
    // new number clears FD_CLOEXEC there, so exactly the pipe's read end survives exec as fd 3.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            // dup2 onto itself would keep FD_CLOEXEC (and exec would close the pipe): when the
            // read end already is fd 3, clear the flag instead.
            let kept = if read_fd == PARENT_FD {
                libc::fcntl(PARENT_FD, libc::F_SETFD, 0)
            } else {
                libc::dup2(read_fd, PARENT_FD)
            };
            if kept == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    let child = cmd.spawn().map_err(|source| KernelError::Spawn {
        program: program.display().to_string(),
        source,
    })?;
    drop(read_end);
    let pgid = child.id().unwrap_or(0);
    Ok(KernelProcess {
        child,
        pgid,
        _parent_pipe: write_end,
    })
}

/// Sends SIGKILL to every process of group `pgid`.
pub(crate) fn kill_group(pgid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        // Never signal "every process" (0/-1 semantics) by accident.
        return;
    }
    // SAFETY: kill(2) has no memory effects; a negative pid addresses one process group.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}
