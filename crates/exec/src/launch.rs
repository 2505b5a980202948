//! Everything decided before a spawn (spec runtime.md §5.2): interpreter, login flag, working
//! directory and the child environment. Nothing here starts a process, so every rejection
//! happens before any side effect.

use crate::ExecConfig;
use crate::error::{ExecError, Result};
use crate::requests::CommandSpec;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// POSIX shells the tool accepts; anything else is rejected before spawning.
const KNOWN_SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ash", "ksh", "mksh", "fish", "csh", "tcsh",
];

/// A fully resolved spawn.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: BTreeMap<OsString, OsString>,
    pub login: bool,
}

impl Launch {
    pub(crate) fn shell_display(&self) -> String {
        self.program.display().to_string()
    }

    pub(crate) fn cwd_display(&self) -> String {
        self.cwd.display().to_string()
    }

    /// A std command with env, cwd and arguments applied (stdio and process group left to the caller).
    pub(crate) fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args)
            .current_dir(&self.cwd)
            .env_clear()
            .envs(&self.env);
        cmd
    }
}

/// Resolves what `req` asks for; `use_pty` decides the terminal defaults of the environment.
pub fn resolve(cfg: &ExecConfig, req: &CommandSpec, use_pty: bool) -> Result<Launch> {
    let cwd = resolve_cwd(&cfg.workdir, req.cwd.as_deref())?;
    let mut env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    apply_noninteractive_defaults(&mut env, use_pty);
    env.extend(
        req.env
            .iter()
            .map(|(key, value)| (OsString::from(key), OsString::from(value))),
    );
    apply_venv(cfg, &mut env);

    // Without an explicit shell: the child's SHELL (from `env`, else the host's), else /bin/sh.
    let (program, explicit) = match req.shell.as_deref().map(str::trim) {
        Some(shell) if !shell.is_empty() => (shell.to_string(), true),
        _ => (
            env.get(OsStr::new("SHELL"))
                .and_then(|s| s.to_str())
                .filter(|s| !s.is_empty())
                .unwrap_or("/bin/sh")
                .to_string(),
            false,
        ),
    };
    let (program, kind) = match locate_shell(&program, &cwd, &env) {
        Ok(found) => found,
        // A host SHELL we cannot use (nologin, an unknown REPL) must not block every command.
        Err(_) if !explicit => locate_shell("/bin/sh", &cwd, &env)?,
        Err(err) => return Err(err),
    };
    let login = req.login.unwrap_or(false);
    if login && (kind == "csh" || kind == "tcsh") {
        return Err(ExecError::UnsupportedShell(format!(
            "{kind} cannot run a command as a login shell; pass login=false"
        )));
    }
    let mut args = Vec::with_capacity(3);
    if login {
        args.push("-l".to_string());
    }
    args.push("-c".to_string());
    args.push(req.command.clone());
    Ok(Launch {
        program,
        args,
        cwd,
        env,
        login,
    })
}

fn resolve_cwd(workdir: &Path, requested: Option<&str>) -> Result<PathBuf> {
    let path = match requested.map(str::trim) {
        None | Some("") => workdir.to_path_buf(),
        Some(raw) => {
            let expanded = if raw == "~" {
                home_dir()
            } else if let Some(rest) = raw.strip_prefix("~/") {
                home_dir().map(|home| home.join(rest))
            } else {
                Some(PathBuf::from(raw))
            };
            let Some(path) = expanded else {
                return Err(ExecError::InvalidCwd(
                    "`~` cannot be expanded: HOME is not set".into(),
                ));
            };
            if path.is_absolute() {
                path
            } else {
                workdir.join(path)
            }
        }
    };
    if path.is_dir() {
        Ok(path)
    } else {
        Err(ExecError::InvalidCwd(path.display().to_string()))
    }
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn apply_noninteractive_defaults(env: &mut BTreeMap<OsString, OsString>, use_pty: bool) {
    // A PTY is a real terminal: programs may draw, but a pager would block forever.
    let term = if use_pty { "xterm-256color" } else { "dumb" };
    env.insert("TERM".into(), term.into());
    for (key, value) in [
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
        ("NO_COLOR", "1"),
        ("PYTHONUNBUFFERED", "1"),
    ] {
        env.insert(key.into(), value.into());
    }
    let utf8 = ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|key| env.get(OsStr::new(key)).filter(|v| !v.is_empty()))
        .map(|value| {
            let value = value.to_string_lossy().to_ascii_lowercase();
            value.contains("utf-8") || value.contains("utf8")
        })
        .unwrap_or(false);
    if !utf8 {
        env.insert("LC_ALL".into(), "C.UTF-8".into());
        env.insert("LANG".into(), "C.UTF-8".into());
    }
}

/// The venv rule: an explicit `venv_path`, else `<workdir>/venv`, when it exists.
fn apply_venv(cfg: &ExecConfig, env: &mut BTreeMap<OsString, OsString>) {
    let candidate = cfg
        .venv_path
        .clone()
        .filter(|p| p.is_dir())
        .or_else(|| Some(cfg.workdir.join("venv")).filter(|p| p.is_dir()));
    let Some(venv) = candidate else {
        return;
    };
    let bin = venv.join("bin");
    let mut path = OsString::from(bin.as_os_str());
    if let Some(old) = env.get(OsStr::new("PATH")).filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    env.insert("PATH".into(), path);
    env.insert("VIRTUAL_ENV".into(), venv.into_os_string());
    env.remove(OsStr::new("PYTHONHOME"));
}

/// Finds the interpreter and returns its path and the recognised shell name.
fn locate_shell(
    requested: &str,
    cwd: &Path,
    env: &BTreeMap<OsString, OsString>,
) -> Result<(PathBuf, &'static str)> {
    let path = if requested.contains('/') {
        let p = PathBuf::from(requested);
        let p = if p.is_absolute() { p } else { cwd.join(p) };
        Some(p).filter(|p| is_executable(p))
    } else {
        search_path(requested, cwd, env.get(OsStr::new("PATH")))
    };
    let Some(path) = path else {
        return Err(ExecError::UnsupportedShell(format!(
            "{} was not found or is not executable",
            clip_name(requested)
        )));
    };
    let kind = shell_kind(&path).or_else(|| {
        std::fs::canonicalize(&path)
            .ok()
            .and_then(|real| shell_kind(&real))
    });
    match kind {
        Some(kind) => Ok((path, kind)),
        None => Err(ExecError::UnsupportedShell(format!(
            "{} is not a recognised POSIX shell (allowed: {})",
            clip_name(requested),
            KNOWN_SHELLS.join(", ")
        ))),
    }
}

fn clip_name(name: &str) -> String {
    name.chars().take(200).collect()
}

fn shell_kind(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    KNOWN_SHELLS.iter().copied().find(|known| *known == name)
}

fn search_path(name: &str, cwd: &Path, path_var: Option<&OsString>) -> Option<PathBuf> {
    let path_var = path_var?;
    std::env::split_paths(path_var).find_map(|dir| {
        let dir = if dir.as_os_str().is_empty() {
            cwd.to_path_buf()
        } else if dir.is_relative() {
            cwd.join(dir)
        } else {
            dir
        };
        Some(dir.join(name)).filter(|candidate| is_executable(candidate))
    })
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
