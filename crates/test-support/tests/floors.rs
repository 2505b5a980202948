//! The floors hold (DESIGN.md §1): `cargo metadata` of the whole workspace shows no dependency
//! edge outside a crate's floor. A deliberate bad edge makes this fail (see the second test).
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_test_support::floors::violations;
use serde_json::json;

fn workspace_metadata() -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn no_crate_depends_on_a_workspace_crate_outside_its_floor() {
    let meta = workspace_metadata();
    assert!(meta["packages"].as_array().unwrap().len() >= 10);
    assert_eq!(violations(&meta), Vec::<String>::new());
}

#[test]
fn a_bad_edge_is_reported() {
    let pkg = |name: &str, deps: serde_json::Value| json!({"name": name, "dependencies": deps});
    let meta = json!({"packages": [
        pkg("mpa-protocol", json!([])),
        pkg("mpa-history", json!([{"name": "mpa-protocol", "kind": null},
                                  {"name": "mpa-exec", "kind": null}])),
        pkg("mpa-exec", json!([{"name": "mpa-protocol", "kind": null}])),
        pkg("mpa-server", json!([{"name": "mpa-core", "kind": null},
                                 {"name": "mpa-store", "kind": null},
                                 {"name": "mpa-test-support", "kind": "dev"}])),
        pkg("mpa-core", json!([])),
        pkg("mpa-store", json!([])),
        pkg("mpa-test-support", json!([])),
    ]});
    assert_eq!(
        violations(&meta),
        vec![
            "mpa-history -> mpa-exec (normal)",
            "mpa-server -> mpa-store (normal)"
        ]
    );
}

#[test]
fn mpa_redact_is_a_leaf_every_crate_below_the_front_ends_may_import() {
    let pkg = |name: &str, deps: serde_json::Value| json!({"name": name, "dependencies": deps});
    let redact = json!({"name": "mpa-redact", "kind": null});
    let meta = json!({"packages": [
        pkg("mpa-protocol", json!([])),
        pkg("mpa-redact", json!([{"name": "mpa-protocol", "kind": null}])),
        pkg("mpa-history", json!([redact.clone()])),
        pkg("mpa-core", json!([redact.clone()])),
        pkg("mpa-server", json!([redact.clone()])),
        pkg("mpa-cli", json!([redact])),
    ]});
    assert_eq!(
        violations(&meta),
        vec![
            "mpa-cli -> mpa-redact (normal)",
            "mpa-redact -> mpa-protocol (normal)",
            "mpa-server -> mpa-redact (normal)",
        ]
    );
}

/// `mpa-protocol` is plain serde data: a crypto, runtime or I/O dependency in its product code
/// fails the floors (tests may use anything).
#[test]
fn mpa_protocol_gaining_a_dependency_is_reported() {
    let dep = |name: &str, kind: Option<&str>| json!({"name": name, "kind": kind});
    let meta = json!({"packages": [
        {"name": "mpa-protocol", "dependencies": [
            dep("serde", None), dep("serde_json", None), dep("schemars", None),
            dep("thiserror", None), dep("sha2", None), dep("tokio", Some("build")),
            dep("proptest", Some("dev")),
        ]},
        // Other crates may use any external crate.
        {"name": "mpa-history", "dependencies": [dep("sha2", None)]},
    ]});
    assert_eq!(
        violations(&meta),
        vec![
            "mpa-protocol -> sha2 (normal)",
            "mpa-protocol -> tokio (normal)"
        ]
    );
}
