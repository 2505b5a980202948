//! The client's configuration checks and retry backoff.

use mpa_model::ModelConfig;
use mpa_model::client::*;
use mpa_model::error::ModelError;

#[test]
fn backoff_stays_within_ceiling() {
    for retry in 0..40 {
        let d = backoff(retry);
        assert!(d <= BACKOFF_CAP);
        assert!(d <= BACKOFF_BASE.saturating_mul(2u32.saturating_pow(retry.min(16))));
    }
}

#[test]
fn new_rejects_bad_config() {
    let cfg = |url: &str, model: &str| ModelConfig {
        base_url: url.into(),
        model: model.into(),
        ..ModelConfig::default()
    };
    assert!(matches!(
        ModelClient::new(cfg("ftp://x", "m")),
        Err(ModelError::Config { .. })
    ));
    assert!(matches!(
        ModelClient::new(cfg("not a url", "m")),
        Err(ModelError::Config { .. })
    ));
    let c = ModelClient::new(cfg("http://user:pw@127.0.0.1:9/v1/", "m")).unwrap();
    assert_eq!(
        c.endpoint_url(),
        "http://user:pw@127.0.0.1:9/v1/chat/completions"
    );
    assert!(!format!("{c:?}").contains("pw"));
}
