//! `mpagent doctor`: is the agent's MoviePilot set up and reachable, which of its routes are
//! known, is the secret key MoviePilot's, and which operations the agent will offer. Runs
//! without opening the data directory, so it can look at a host that is running.

use super::identity::MINTED_TOKEN_TTL;
use super::{AuthMode, MoviePilotConfig};
use mpa_gateway::{
    CallContext, GatewayClient, GatewayConfig, GatewayError, NoOpenApi, ServerKnowledge, catalogue,
};
use serde_json::Value;
use std::fmt;

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Works, with a limitation worth knowing.
    Warn,
    /// Broken: the agent cannot use MoviePilot (or part of it) this way.
    Fail,
    /// Not checked, because an earlier check failed.
    Skip,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
}

/// Every check, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoctorReport {
    pub checks: Vec<Check>,
}

impl DoctorReport {
    /// No check failed (warnings allowed).
    pub fn healthy(&self) -> bool {
        self.checks.iter().all(|c| c.status != Status::Fail)
    }

    fn push(&mut self, name: &'static str, status: Status, detail: impl Into<String>) {
        self.checks.push(Check {
            name,
            status,
            detail: detail.into(),
        });
    }

    fn skip_rest(&mut self, names: &[&'static str], why: &str) {
        for name in names {
            self.push(name, Status::Skip, why);
        }
    }
}

impl fmt::Display for DoctorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "MoviePilot for the agent / 智能体的 MoviePilot")?;
        for c in &self.checks {
            writeln!(f, "  [{:>4}] {:<13} {}", c.status.word(), c.name, c.detail)?;
        }
        let failed = self
            .checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .count();
        let warned = self
            .checks
            .iter()
            .filter(|c| c.status == Status::Warn)
            .count();
        match (failed, warned) {
            (0, 0) => writeln!(f, "result: all good / 一切正常"),
            (0, w) => writeln!(f, "result: usable, {w} warning(s) / 可用，有 {w} 项提醒"),
            (n, _) => writeln!(f, "result: {n} problem(s) to fix / 有 {n} 个问题需要处理"),
        }
    }
}

const AFTER: [&str; 5] = ["reachable", "routes", "version", "secret key", "operations"];

/// Cheap authenticated reads to try the secret key with, in order of preference (the first the
/// server offers is used).
const KEY_PROBES: [&str; 3] = ["dashboard.cpu", "subscription.list", "site.list"];

/// MoviePilot's first user, created at install, is its superuser.
const PROBE_USER: &str = "1";

/// Runs every check for `config` (`None`: `MOVIEPILOT_URL` is not set).
pub async fn examine(config: Option<&MoviePilotConfig>) -> DoctorReport {
    let mut r = DoctorReport { checks: Vec::new() };
    let Some(config) = config else {
        r.push(
            "configuration",
            Status::Fail,
            "MOVIEPILOT_URL is not set: the agent has no MoviePilot and offers no moviepilot_api \
             / 未设置 MOVIEPILOT_URL",
        );
        r.skip_rest(&AFTER, "needs MOVIEPILOT_URL");
        return r;
    };
    let client = match GatewayClient::new(GatewayConfig::new(config.url.clone())) {
        Ok(c) => c,
        Err(e) => {
            r.push("configuration", Status::Fail, e.to_string());
            r.skip_rest(&AFTER, "needs a usable MOVIEPILOT_URL");
            return r;
        }
    };
    r.push(
        "configuration",
        Status::Ok,
        format!(
            "MOVIEPILOT_URL {}, MOVIEPILOT_SECRET_KEY {}, MPA_AUTH {}",
            client.base_url(),
            if config.secret_key.is_some() {
                "set"
            } else {
                "not set"
            },
            match config.auth {
                AuthMode::Local => "local",
                AuthMode::MoviePilot => "moviepilot",
            }
        ),
    );

    let knowledge = client.server().refresh(&client).await;
    match &*knowledge {
        ServerKnowledge::CatalogueOnly(NoOpenApi::Unreachable(why)) => {
            r.push(
                "reachable",
                Status::Fail,
                format!("MoviePilot did not answer: {why} / 无法连接 MoviePilot"),
            );
            r.skip_rest(&AFTER[1..], "needs a reachable MoviePilot");
            return r;
        }
        ServerKnowledge::CatalogueOnly(NoOpenApi::NotServed(why)) => {
            r.push("reachable", Status::Ok, "MoviePilot answered");
            r.push(
                "routes",
                Status::Warn,
                format!(
                    "no usable OpenAPI ({why}): the operation catalogue is used alone, and \
                     operations this MoviePilot does not have fail when called"
                ),
            );
            r.push("version", Status::Skip, "unknown without its OpenAPI");
        }
        ServerKnowledge::Reconciled(t) => {
            r.push("reachable", Status::Ok, "MoviePilot answered");
            r.push(
                "routes",
                Status::Ok,
                format!(
                    "read from its OpenAPI: {} routes ({})",
                    t.server_operations(),
                    t.label()
                ),
            );
            r.push(
                "version",
                Status::Ok,
                match t.version() {
                    Some(v) => v.to_owned(),
                    None => "not stated in its OpenAPI (FastAPI's default)".to_owned(),
                },
            );
        }
        ServerKnowledge::Unchecked => {}
    }

    check_key(&mut r, &client, config, &knowledge).await;

    match &*knowledge {
        ServerKnowledge::Reconciled(t) => {
            r.push("operations", Status::Ok, t.counts().to_string());
        }
        _ => r.push(
            "operations",
            Status::Warn,
            format!(
                "all {} catalogue operations offered, unchecked against this MoviePilot",
                catalogue().len()
            ),
        ),
    }
    r
}

async fn check_key(
    r: &mut DoctorReport,
    client: &GatewayClient,
    config: &MoviePilotConfig,
    knowledge: &ServerKnowledge,
) {
    let Some(key) = &config.secret_key else {
        match config.auth {
            AuthMode::MoviePilot => r.push(
                "secret key",
                Status::Ok,
                "not set: users sign in with MoviePilot and their own tokens are used",
            ),
            AuthMode::Local => r.push(
                "secret key",
                Status::Warn,
                "not set: local accounts cannot call MoviePilot (set MOVIEPILOT_SECRET_KEY, or \
                 MPA_AUTH=moviepilot)",
            ),
        }
        return;
    };
    let token = match mpa_gateway::mint_token(key, PROBE_USER, "admin", true, 2, MINTED_TOKEN_TTL) {
        Ok(t) => t,
        Err(e) => {
            r.push("secret key", Status::Fail, e.to_string());
            return;
        }
    };
    let Some(op) = KEY_PROBES
        .iter()
        .find(|id| knowledge.offers(id))
        .and_then(|id| catalogue().get(id))
    else {
        r.push(
            "secret key",
            Status::Warn,
            "not checked: this MoviePilot offers none of the reads used to check it",
        );
        return;
    };
    let Ok(request) = op.prepare(&Value::Null, &Value::Null, &Value::Null) else {
        return;
    };
    let mut ctx = CallContext::new(token);
    ctx.source = Some("doctor".into());
    let accepted = |how: String| {
        format!("accepted: a token minted with it for MoviePilot user {PROBE_USER} {how}")
    };
    match client.send(&request, &ctx).await {
        Ok(_) => r.push(
            "secret key",
            Status::Ok,
            accepted(format!("read {}", op.id)),
        ),
        Err(GatewayError::Api(api))
            if api.status == 403
                && api
                    .data
                    .get("detail")
                    .and_then(Value::as_str)
                    .is_some_and(|d| d.contains("token")) =>
        {
            r.push(
                "secret key",
                Status::Fail,
                format!(
                    "MoviePilot rejected a token minted with MOVIEPILOT_SECRET_KEY (HTTP 403 {}): \
                     the key is not this MoviePilot's SECRET_KEY / 密钥与 MoviePilot 的 SECRET_KEY 不一致",
                    api.data["detail"].as_str().unwrap_or_default()
                ),
            );
        }
        Err(GatewayError::Api(api)) => r.push(
            "secret key",
            Status::Ok,
            accepted(format!(
                "passed the token check ({} answered HTTP {})",
                op.id, api.status
            )),
        ),
        Err(e) => r.push("secret key", Status::Fail, format!("not checked: {e}")),
    }
}
