//! Requests are checked before anything runs; signal names and numbers.

use mpa_exec::{CommandSpec, ExecError, Signal, StartRequest};
use std::time::Duration;

#[test]
fn signal_names_and_numbers() {
    assert_eq!(Signal::from_name("kill"), Some(Signal::KILL));
    assert_eq!(Signal::from_name("SIGINT"), Some(Signal::INT));
    assert_eq!(Signal::from_name(" 15 "), Some(Signal::TERM));
    assert_eq!(Signal::from_number(9).map(Signal::name), Some("SIGKILL"));
    for bad in ["STOP", "19", "0", "-9", "SIGFOO", "", "SIG"] {
        assert_eq!(Signal::from_name(bad), None, "{bad}");
    }
    assert_eq!(Signal::from_number(19), None);
}

#[test]
fn specs_are_checked_before_anything_runs() {
    let spec = |command: &str, env: &[(&str, &str)]| CommandSpec {
        command: command.into(),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..CommandSpec::default()
    };
    assert!(spec("ls", &[("A", "1")]).validate().is_ok());
    for bad in [
        spec("  ", &[]),
        spec("ls", &[("", "1")]),
        spec("ls", &[("A=B", "1")]),
        spec("ls", &[("A", "x\0y")]),
    ] {
        assert!(
            matches!(bad.validate(), Err(ExecError::InvalidArgument(_))),
            "{bad:?}"
        );
    }
    let start = StartRequest {
        spec: spec("ls", &[]),
        use_pty: false,
        yield_time: Duration::ZERO,
        since_offset: Some(4),
        max_bytes: 10,
    };
    assert_eq!(
        start.validate().unwrap_err().to_string(),
        "invalid argument: since_offset for start may only be 0 or null"
    );
}
