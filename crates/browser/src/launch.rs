//! Starting one headless Chromium with a profile of its own and the DevTools pipe on fds 3/4.

use crate::error::{BrowserError, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use tokio::net::unix::pipe;

/// The browsers tried when none is configured, in order.
const CANDIDATES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];

/// The Chromium to run: the configured path, or the first candidate on `PATH`.
pub(crate) fn find_executable(configured: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = configured {
        return if is_executable(p) {
            Ok(p.to_path_buf())
        } else {
            Err(BrowserError::Unavailable(format!(
                "the configured browser `{}` is not an executable file",
                p.display()
            )))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in CANDIDATES {
            let p = dir.join(name);
            if is_executable(&p) {
                return Ok(p);
            }
        }
    }
    Err(BrowserError::Unavailable(
        "no Chromium found (install `chromium` or set MPA_BROWSER_PATH)".into(),
    ))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A started browser process and our ends of its pipe.
pub(crate) struct Launched {
    pub child: tokio::process::Child,
    pub to_browser: pipe::Sender,
    pub from_browser: pipe::Receiver,
}

fn cloexec_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Starts `exe` headless with its profile in `profile` (its own process group, killed when the
/// handle is dropped).
pub(crate) fn launch(exe: &Path, profile: &Path, extra_args: &[String]) -> Result<Launched> {
    let unavailable = |what: &str, e: std::io::Error| {
        BrowserError::Unavailable(format!("{what} `{}`: {e}", exe.display()))
    };
    let (to_child_r, to_child_w) = cloexec_pipe().map_err(|e| unavailable("pipe for", e))?;
    let (from_child_r, from_child_w) = cloexec_pipe().map_err(|e| unavailable("pipe for", e))?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("--headless")
        .arg("--remote-debugging-pipe")
        .arg(format!("--user-data-dir={}", profile.display()))
        .args([
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication",
            "--metrics-recording-only",
            "--password-store=basic",
            "--use-mock-keychain",
            "--mute-audio",
            "--hide-scrollbars",
            "--window-size=1280,720",
            "--force-device-scale-factor=1",
        ]);
    // Chromium's sandbox refuses to start as root; a root host (a container) runs it without.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--no-sandbox");
    }
    cmd.args(extra_args)
        .arg("about:blank")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    let (r, w) = (to_child_r.as_raw_fd(), from_child_w.as_raw_fd());
    // SAFETY: the closure only calls async-signal-safe functions (fcntl, dup2) on descriptors
    // that stay open in the parent until spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            // Move both ends above 3/4 first: one of them may itself be fd 3 or 4.
            let high_r = libc::fcntl(r, libc::F_DUPFD, 10);
            let high_w = libc::fcntl(w, libc::F_DUPFD, 10);
            if high_r < 0 || high_w < 0 || libc::dup2(high_r, 3) < 0 || libc::dup2(high_w, 4) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(high_r);
            libc::close(high_w);
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| unavailable("cannot start", e))?;
    drop((to_child_r, from_child_w));
    let to_browser =
        pipe::Sender::from_owned_fd(to_child_w).map_err(|e| unavailable("pipe to", e))?;
    let from_browser =
        pipe::Receiver::from_owned_fd(from_child_r).map_err(|e| unavailable("pipe from", e))?;
    Ok(Launched {
        child,
        to_browser,
        from_browser,
    })
}
