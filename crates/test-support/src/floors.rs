//! The crate floors of DESIGN.md §1, as data, and the check the floors test runs over
//! `cargo metadata`: who may import whom among the workspace crates.

use serde_json::Value;

/// Capability crates: they import only `mpa-protocol` (and external crates).
pub const CAPABILITY: &[&str] = &[
    "mpa-history",
    "mpa-learning",
    "mpa-memory",
    "mpa-skills",
    "mpa-exec",
    "mpa-kernel",
    "mpa-model",
    "mpa-gateway",
    "mpa-mcp",
    "mpa-browser",
    "mpa-store",
    "mpa-eval",
];

/// The bottom floor: leaves that import no workspace crate and that every crate below the front
/// ends may import — the plain data of `mpa-protocol` and the one redactor, `mpa-redact` (the
/// front ends reach it through core).
pub const LEAVES: &[&str] = &["mpa-protocol", "mpa-redact"];

/// The only crates `mpa-protocol` may depend on for its product code: it is plain serde data,
/// with no crypto, no runtime and no I/O.
pub const PROTOCOL_DEPENDENCIES: &[&str] = &["serde", "serde_json", "schemars", "thiserror"];

/// The workspace crates `package` may depend on, normally (`dev` = false) or for its tests.
pub fn allowed(package: &str, dev: bool) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = match package {
        p if LEAVES.contains(&p) => vec![],
        "mpa-core" => {
            let mut v = LEAVES.to_vec();
            v.extend(CAPABILITY.iter().copied().filter(|c| *c != "mpa-eval"));
            v
        }
        "mpa-server" => vec!["mpa-protocol", "mpa-core"],
        "mpa-cli" => vec!["mpa-protocol", "mpa-core", "mpa-server", "mpa-eval"],
        "mpa-test-support" => LEAVES.to_vec(),
        p if CAPABILITY.contains(&p) => LEAVES.to_vec(),
        // A crate nobody placed yet has no floor: refuse every workspace dependency.
        _ => vec![],
    };
    if dev {
        // Tests may use the mock model server and the fake MoviePilot (a real HTTP world), and
        // build fixtures with the crates below their own floor; product code may not.
        out.extend(["mpa-test-support", "mpa-eval"]);
        if matches!(package, "mpa-server" | "mpa-cli") {
            out.extend(CAPABILITY.iter().copied());
            out.extend(LEAVES.iter().copied());
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Every dependency edge that breaks a floor, as `"from -> to (normal|dev)"`: a workspace crate
/// outside the importer's floor, or any crate outside [`PROTOCOL_DEPENDENCIES`] under
/// `mpa-protocol`'s product code (a build dependency counts as product code).
pub fn violations(metadata: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let packages = metadata["packages"].as_array().cloned().unwrap_or_default();
    let members: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    for p in &packages {
        let name = p["name"].as_str().unwrap_or_default();
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let dep = d["name"].as_str().unwrap_or_default();
            let dev = d["kind"].as_str() == Some("dev");
            if !members.contains(&dep) {
                if name == "mpa-protocol" && !dev && !PROTOCOL_DEPENDENCIES.contains(&dep) {
                    out.push(format!("{name} -> {dep} (normal)"));
                }
                continue;
            }
            if !allowed(name, dev).contains(&dep) {
                out.push(format!(
                    "{name} -> {dep} ({})",
                    if dev { "dev" } else { "normal" }
                ));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}
