//! Resolving a spawn: cwd, shell, venv, environment.

use mpa_exec::{CommandSpec, ExecConfig, ExecError, resolve};
use std::ffi::{OsStr, OsString};
use std::path::Path;

fn cfg(dir: &Path) -> ExecConfig {
    ExecConfig::new(dir.to_path_buf(), dir.to_path_buf())
}

fn req(command: &str) -> CommandSpec {
    CommandSpec {
        command: command.into(),
        ..CommandSpec::default()
    }
}

#[test]
fn relative_cwd_is_resolved_against_the_workdir_and_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let mut r = req("true");
    r.cwd = Some("sub".into());
    let launch = resolve(&cfg(dir.path()), &r, false).unwrap();
    assert_eq!(launch.cwd, dir.path().join("sub"));
    r.cwd = Some("missing".into());
    assert!(matches!(
        resolve(&cfg(dir.path()), &r, false),
        Err(ExecError::InvalidCwd(_))
    ));
}

#[test]
fn unknown_interpreters_are_rejected_before_spawn() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = req("true");
    r.shell = Some("python3".into());
    assert!(matches!(
        resolve(&cfg(dir.path()), &r, false),
        Err(ExecError::UnsupportedShell(_))
    ));
    r.shell = Some("bash".into());
    let launch = resolve(&cfg(dir.path()), &r, false).unwrap();
    assert!(launch.program.ends_with("bash"));
    assert_eq!(launch.args, vec!["-c".to_string(), "true".to_string()]);
    r.login = Some(true);
    let launch = resolve(&cfg(dir.path()), &r, false).unwrap();
    assert_eq!(launch.args[..2], ["-l".to_string(), "-c".to_string()]);
}

#[test]
fn a_symlink_to_a_known_shell_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("myshell");
    std::os::unix::fs::symlink("/bin/sh", &link).unwrap();
    let mut r = req("true");
    r.shell = Some(link.display().to_string());
    let launch = resolve(&cfg(dir.path()), &r, false).unwrap();
    assert_eq!(launch.program, link);
}

#[test]
fn venv_bin_goes_first_on_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("venv/bin")).unwrap();
    let launch = resolve(&cfg(dir.path()), &req("true"), false).unwrap();
    let path = launch
        .env
        .get(OsStr::new("PATH"))
        .unwrap()
        .to_string_lossy();
    assert!(path.starts_with(&dir.path().join("venv/bin").display().to_string()));
    assert_eq!(
        launch.env.get(OsStr::new("VIRTUAL_ENV")),
        Some(&dir.path().join("venv").into_os_string())
    );
    assert_eq!(
        launch.env.get(OsStr::new("TERM")),
        Some(&OsString::from("dumb"))
    );
}
