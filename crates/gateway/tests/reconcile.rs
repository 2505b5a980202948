//! Reconciliation against the recorded real MoviePilot v2 OpenAPI.
#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]

use mpa_gateway::{Reconciliation, ServerApi, catalogue};

pub fn recorded() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../catalog/openapi/moviepilot-v2-2025-06.json"
    ))
    .unwrap()
}

#[test]
fn dump() {
    let api = ServerApi::parse(&recorded()).unwrap();
    let r = Reconciliation::new(catalogue(), api);
    println!("{}", r.counts());
    for o in r.operations() {
        let op = catalogue().get(o.id).unwrap();
        if !o.availability.is_available() {
            println!(
                "{} {}: {}",
                o.id,
                o.availability.status(),
                o.availability.reason(op)
            );
        }
    }
}
