//! The crate floor (DESIGN.md §1): a capability crate imports only `mpa-protocol` among the
//! workspace crates, in normal and dev dependencies alike.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[test]
fn depends_on_no_workspace_crate_but_protocol() {
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
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let package = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "mpa-gateway")
        .unwrap();
    let workspace_deps: Vec<&str> = package["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["name"].as_str())
        .filter(|n| n.starts_with("mpa-"))
        .collect();
    assert_eq!(workspace_deps, ["mpa-protocol"]);
}
