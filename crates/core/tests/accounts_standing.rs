//! Accounts that follow MoviePilot (issue 25): with MoviePilot sign-in the host checks a user's
//! standing at least every 10 minutes while they are active (an injected clock moves the
//! minutes), and an opaque MoviePilot token is used until MoviePilot refuses it.

use crate::common::host::{demo_world, mock_model};
use mpa_core::CoreError;
use mpa_core::moviepilot::identity::{AccountResolver, IdentityResolver};
use mpa_core::moviepilot::standing::{Clock, Ended, Standing};
use mpa_core::moviepilot::{AuthMode, MoviePilotConfig};
use mpa_eval::{FakeConfig, FakeMoviePilot};
use mpa_test_support::MockModelServer;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

const SECRET: &str = "standing-secret";

/// A clock the test moves.
#[derive(Default)]
struct Manual(AtomicI64);

impl Clock for Manual {
    fn now(&self) -> i64 {
        mpa_gateway::now_epoch() + self.0.load(Ordering::SeqCst)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_disabled_user_kept_their_token_now_the_ten_minute_check_revokes_it() {
    let fake = FakeMoviePilot::start(FakeConfig::new(SECRET), demo_world())
        .await
        .unwrap();
    let mock = MockModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(Manual::default());
    let mut cfg = mpa_core::HostConfig::new(
        dir.path().join("data"),
        mpa_core::AgentConfig::new(mock_model(&mock)),
    );
    cfg.moviepilot = Some(mpa_core::MoviePilotHostConfig {
        config: MoviePilotConfig {
            url: fake.url(),
            secret_key: Some(SECRET.into()),
            auth: AuthMode::MoviePilot,
        },
        identity: None,
        account_clock: Some(Arc::clone(&clock) as Arc<dyn Clock>),
    });
    let host = mpa_core::Host::open(cfg).await.unwrap();
    let accounts = host.accounts();
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let issued = accounts
        .login(
            "alice",
            "alice-demo",
            ip,
            Duration::from_secs(7 * 24 * 3600),
        )
        .await
        .unwrap();
    let checks = || {
        fake.ledger()
            .iter()
            .filter(|a| a.path == mpa_gateway::CURRENT_USER_PATH)
            .count()
    };
    assert!(
        accounts
            .authenticate(&issued.token)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(checks(), 0, "a sign-in is a check of its own");

    assert!(fake.set_user_active("alice", false));
    // Nine minutes later the last check still stands.
    clock.0.store(9 * 60, Ordering::SeqCst);
    assert!(
        accounts
            .authenticate(&issued.token)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(checks(), 0);
    // Past ten minutes the next request asks MoviePilot.
    clock.0.store(10 * 60 + 1, Ordering::SeqCst);
    let ended = accounts.authenticate(&issued.token).await;
    assert!(
        matches!(
            ended,
            Err(CoreError::MoviePilotAccountEnded(Ended::Disabled))
        ),
        "{ended:?}"
    );
    assert_eq!(checks(), 1);
    // Revoked: the next request is told why, without asking again.
    let again = accounts.authenticate(&issued.token).await;
    assert_eq!(again.unwrap_err().code(), "moviepilot_account_disabled");
    assert_eq!(checks(), 1);
    let db = rusqlite::Connection::open(dir.path().join("data/agent.db")).unwrap();
    let tokens: i64 = db
        .query_row("SELECT count(*) FROM auth_tokens", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tokens, 0, "the agent token was revoked");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_opaque_moviepilot_token_was_treated_as_expired_now_it_is_used_until_a_401() {
    let fake = FakeMoviePilot::start(FakeConfig::new(SECRET), demo_world())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = mpa_store::Store::open_in(dir.path()).unwrap();
    let user = store
        .adopt_moviepilot_user(mpa_store::MoviePilotSignIn {
            user_id: "2".into(),
            user_name: "alice".into(),
            super_user: false,
            token: "opaque-session-token-from-a-proxy".into(),
        })
        .await
        .unwrap();
    store
        .insert_token(
            mpa_core::accounts::token_hash("agent-token"),
            &user.id,
            chrono::Utc::now() + chrono::Duration::days(1),
        )
        .await
        .unwrap();
    let client =
        mpa_gateway::GatewayClient::new(mpa_gateway::GatewayConfig::new(fake.url())).unwrap();
    let standing = Arc::new(Standing::new(
        client,
        store.clone(),
        None,
        Arc::new(mpa_core::moviepilot::standing::SystemClock),
    ));
    standing.mark_checked(&user.id);
    let resolver = AccountResolver {
        store: store.clone(),
        secret_key: None,
        mode: AuthMode::MoviePilot,
        standing: Some(Arc::clone(&standing)),
    };
    let actor = mpa_protocol::Actor {
        user_id: user.id.clone(),
        user_name: "alice".into(),
        is_admin: false,
    };
    let token = resolver.bearer(&actor).await.unwrap();
    assert_eq!(token.expose(), "opaque-session-token-from-a-proxy");

    // MoviePilot answers 401 to it: the session ends with it.
    resolver.rejected(&actor).await;
    let again = resolver.bearer(&actor).await;
    assert_eq!(again.unwrap_err().code(), "moviepilot_sign_in_again");
    assert!(
        store
            .token_user(mpa_core::accounts::token_hash("agent-token"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        standing.revoked(&mpa_core::accounts::token_hash("agent-token")),
        Some(Ended::SignInExpired)
    );
}
