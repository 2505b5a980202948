//! The ledger stage of the call path (spec runtime.md §6): every write is claimed in the durable
//! invocation ledger before it runs and finished after, so a duplicate call is answered from the
//! record instead of executing again, a crash leaves `unknown` (never "not executed"), and
//! nothing but an observed read-back upgrades `unknown`.
//!
//! Which calls: not internal, and an effect that is not a read — `moviepilot_api` writes by
//! operation, and local tools by their metadata. Commands (`arbitrary_execution`) carry their own
//! receipts (exit codes, session ids) and are not ledgered, as in MoviePilot.

use super::{PreparedCall, ToolContext, ToolMeta, ToolOutput};
use mpa_protocol::{EffectClass, Outcome};
use mpa_store::{Claim, LedgerKey, LedgerRecord, LedgerStatus, Store};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

pub const INVOCATION_ID_KEY: &str = "moviepilot_invocation_id";
pub const OUTCOME_KEY: &str = "moviepilot_execution_outcome";

/// Whether a call is recorded in the ledger.
/// Another program's tools always are: their effect is only what that program claims.
pub fn is_ledgered(meta: &ToolMeta, effect: EffectClass) -> bool {
    meta.external
        || (!meta.internal && !effect.is_read() && effect != EffectClass::ArbitraryExecution)
}

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// Canonical JSON: sorted keys, compact, non-ASCII kept (serde_json keeps insertion order here,
/// so objects are re-sorted explicitly).
pub fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&m[k]));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v).to_string()
}

fn status_of(outcome: Outcome) -> LedgerStatus {
    match outcome {
        Outcome::Succeeded => LedgerStatus::Succeeded,
        Outcome::Failed => LedgerStatus::Failed,
        Outcome::Pending => LedgerStatus::Pending,
        Outcome::Unknown => LedgerStatus::Unknown,
    }
}

/// The code of a duplicate answered while the first call of the same write still runs.
pub const WRITE_STILL_RUNNING: &str = "write_still_running";

fn outcome_of(status: LedgerStatus) -> Outcome {
    match status {
        LedgerStatus::Succeeded => Outcome::Succeeded,
        LedgerStatus::Failed => Outcome::Failed,
        LedgerStatus::Pending => Outcome::Pending,
        // Still running elsewhere: nothing has confirmed the write was even accepted, so a
        // duplicate is never told `pending` (which reads as "submitted") — issue 25.
        LedgerStatus::Running | LedgerStatus::Unknown => Outcome::Unknown,
    }
}

/// What a duplicate is told about the record it was answered from.
fn record_message(rec: &LedgerRecord) -> String {
    let what = match rec.status {
        LedgerStatus::Running => "the first call is still running; not confirmed",
        _ => rec.summary.as_str(),
    };
    format!("existing execution record: {what}; not re-executed; verify actual state when unknown")
}

/// A ledger answer: `{success, execution_outcome, message, …extra}`.
fn answer(outcome: Outcome, message: String, extra: Value) -> ToolOutput {
    let mut m = Map::new();
    m.insert(
        "success".into(),
        json!(matches!(outcome, Outcome::Succeeded | Outcome::Pending)),
    );
    m.insert("execution_outcome".into(), json!(outcome.as_str()));
    m.insert("message".into(), json!(message));
    if let Value::Object(extra) = extra {
        m.extend(extra);
    }
    ToolOutput::object(m, outcome)
}

fn not_recorded() -> ToolOutput {
    answer(
        Outcome::Failed,
        "cannot durably record this write; tool not executed".into(),
        json!({"error": "ledger_unavailable"}),
    )
}

/// Puts `_tool_execution {invocation_id, outcome}` into the result (non-JSON content is wrapped
/// as `{result: …}`) and the metadata keys beside it.
pub fn attach_receipt(out: &mut ToolOutput, invocation_id: &str) {
    let receipt = json!({"invocation_id": invocation_id, "outcome": out.outcome.as_str()});
    let mut v = match serde_json::from_str::<Value>(&out.content) {
        Ok(Value::Object(m)) => m,
        _ => {
            let mut m = Map::new();
            m.insert(
                "result".into(),
                Value::String(std::mem::take(&mut out.content)),
            );
            m
        }
    };
    v.insert("_tool_execution".into(), receipt);
    out.content = Value::Object(v).to_string();
    out.metadata
        .insert(INVOCATION_ID_KEY.into(), json!(invocation_id));
    out.metadata
        .insert(OUTCOME_KEY.into(), json!(out.outcome.as_str()));
}

/// What a read-back found (spec §6.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadBack {
    /// This call cannot be verified by a read (most writes).
    NotApplicable,
    /// The target state is observed exactly as requested.
    Confirmed,
    /// The read could not confirm it.
    NotConfirmed,
}

/// A read-only verification of one write, prepared before it runs.
#[async_trait::async_trait]
pub trait ReadBackCheck: Send + Sync {
    async fn check(&self, ctx: &ToolContext) -> ReadBack;
}

async fn read_back(check: Option<&dyn ReadBackCheck>, ctx: &ToolContext) -> ReadBack {
    match check {
        Some(c) => c.check(ctx).await,
        None => ReadBack::NotApplicable,
    }
}

/// The identity of one ledgered call: identical `moviepilot_api` writes of one user request share
/// one; any other call is identified by its call id within the request.
pub struct Identity {
    pub key: LedgerKey,
    /// Identical writes of one user request share the identity (`moviepilot_api`).
    pub shared: bool,
}

pub fn identity(
    ctx: &ToolContext,
    tool: &str,
    call_id: &str,
    args: &Value,
    prepared: &dyn PreparedCall,
) -> Identity {
    let digest = prepared
        .canonical_digest()
        .unwrap_or_else(|| sha256_hex(&canonical(args)));
    let shared = prepared.shares_identity();
    let invocation_id = if shared {
        sha256_hex(&canonical(&json!([ctx.request_id, tool, digest])))
    } else if call_id.is_empty() {
        uuid::Uuid::new_v4().simple().to_string()
    } else {
        // The call id, scoped to the user request: local model servers number calls per response
        // (`call_0`, or the host fills that in when the server sends no id), so a bare call id
        // would refuse — or answer from an old record — a new write in a later request.
        sha256_hex(&canonical(&json!([ctx.request_id, "call", call_id])))
    };
    Identity {
        key: LedgerKey {
            principal_id: ctx.actor.user_id.0.clone(),
            session_id: ctx.session_id.clone(),
            invocation_id,
            tool_name: tool.to_string(),
            arguments_digest: digest,
        },
        shared,
    }
}

/// Before running: answer from an open record, or claim. `Err` is the answer to give instead of
/// running; `Ok` is the claim to finish.
pub async fn claim(
    store: &Store,
    id: &Identity,
    check: Option<&dyn ReadBackCheck>,
    ctx: &ToolContext,
) -> Result<Held, ToolOutput> {
    let k = &id.key;
    if id.shared {
        match store
            .ledger_unresolved(
                &k.principal_id,
                &k.session_id,
                &k.tool_name,
                &k.arguments_digest,
            )
            .await
        {
            Ok(Some(rec)) => return Err(from_record(store, rec, check, ctx).await),
            Ok(None) => {}
            Err(e) => {
                tracing::error!(error = %e, "ledger lookup failed; write not executed");
                return Err(not_recorded());
            }
        }
    }
    match store.ledger_claim(k.clone()).await {
        Ok(Claim::Acquired { id, claim_token }) => Ok(Held {
            store: store.clone(),
            id,
            token: claim_token,
            invocation_id: k.invocation_id.clone(),
            finished: false,
        }),
        Ok(Claim::Existing(rec))
            if rec.tool_name != k.tool_name || rec.arguments_digest != k.arguments_digest =>
        {
            Err(answer(
                Outcome::Failed,
                "same call id with changed tool or arguments; not executed".into(),
                json!({"error": "invocation_conflict", "invocation_id": rec.invocation_id}),
            ))
        }
        Ok(Claim::Existing(rec)) => Err(from_record(store, rec, check, ctx).await),
        Err(e) => {
            tracing::error!(error = %e, "ledger claim failed; write not executed");
            Err(not_recorded())
        }
    }
}

/// Answers a duplicate from its record (§6.5); an `unknown` reconcilable write is verified first.
async fn from_record(
    store: &Store,
    rec: LedgerRecord,
    check: Option<&dyn ReadBackCheck>,
    ctx: &ToolContext,
) -> ToolOutput {
    if rec.status == LedgerStatus::Unknown
        && read_back(check, ctx).await == ReadBack::Confirmed
        && store
            .ledger_resolve(rec.id, LedgerStatus::Succeeded)
            .await
            .unwrap_or(false)
    {
        return reconciled(&rec.invocation_id);
    }
    let outcome = outcome_of(rec.status);
    let mut extra = json!({"invocation_id": rec.invocation_id, "replayed": true});
    if rec.status == LedgerStatus::Running {
        // Says nothing of the write itself: the first call's own result does (the turn's
        // status follows that one, see `guardrails::outcomes`).
        extra["error"] = json!(WRITE_STILL_RUNNING);
    }
    let mut out = answer(outcome, record_message(&rec), extra);
    out.metadata
        .insert(INVOCATION_ID_KEY.into(), json!(rec.invocation_id));
    out.metadata
        .insert(OUTCOME_KEY.into(), json!(outcome.as_str()));
    out
}

fn reconciled(invocation_id: &str) -> ToolOutput {
    let mut out = answer(
        Outcome::Succeeded,
        "verified read-only that the target setting is in effect; no repeat write".into(),
        json!({"invocation_id": invocation_id, "reconciled": true}),
    );
    out.metadata
        .insert(INVOCATION_ID_KEY.into(), json!(invocation_id));
    out.metadata.insert(OUTCOME_KEY.into(), json!("succeeded"));
    out
}

/// A claimed execution right. Dropped unfinished (the turn was stopped, the task aborted), it
/// records `unknown` — the write may or may not have happened.
pub struct Held {
    store: Store,
    id: i64,
    token: String,
    invocation_id: String,
    finished: bool,
}

impl Held {
    pub fn invocation_id(&self) -> &str {
        &self.invocation_id
    }

    /// Finishes the row with the call's outcome and puts the receipt into the result. An
    /// `unknown` reconcilable write is read back first.
    pub async fn finish(
        mut self,
        mut out: ToolOutput,
        check: Option<&dyn ReadBackCheck>,
        ctx: &ToolContext,
    ) -> ToolOutput {
        self.finished = true;
        if out.outcome == Outcome::Unknown && read_back(check, ctx).await == ReadBack::Confirmed {
            if self
                .store
                .ledger_finish(self.id, &self.token, LedgerStatus::Succeeded)
                .await
                .unwrap_or(false)
            {
                return reconciled(&self.invocation_id);
            }
        } else {
            let finished = self
                .store
                .ledger_finish(self.id, &self.token, status_of(out.outcome))
                .await;
            if let Ok(true) = finished {
                attach_receipt(&mut out, &self.invocation_id);
                return out;
            }
        }
        let mut unconfirmed = answer(
            Outcome::Unknown,
            "tool returned but receipt not confirmed; verify, do not retry".into(),
            json!({"invocation_id": self.invocation_id}),
        );
        attach_receipt(&mut unconfirmed, &self.invocation_id);
        unconfirmed
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let (store, id, token) = (self.store.clone(), self.id, std::mem::take(&mut self.token));
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = store.ledger_finish(id, &token, LedgerStatus::Unknown).await {
                    tracing::error!(error = %e, "interrupted write not marked unknown");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_and_keeps_non_ascii() {
        let v = json!({"b": 1, "a": {"d": [2, {"z": 1, "y": 2}], "c": "三体"}});
        assert_eq!(
            canonical(&v),
            r#"{"a":{"c":"三体","d":[2,{"y":2,"z":1}]},"b":1}"#
        );
    }

    #[test]
    fn receipts_wrap_text_and_extend_objects() {
        let mut out = ToolOutput::json(&json!({"success": true}), Outcome::Succeeded);
        attach_receipt(&mut out, "inv1");
        let v: Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(
            v["_tool_execution"],
            json!({"invocation_id": "inv1", "outcome": "succeeded"})
        );
        let mut text = ToolOutput::classified("done".into(), false);
        attach_receipt(&mut text, "inv2");
        let v: Value = serde_json::from_str(&text.content).unwrap();
        assert_eq!(v["result"], "done");
        assert_eq!(text.metadata[INVOCATION_ID_KEY], "inv2");
    }

    #[test]
    fn a_ledger_refusal_carries_its_error_code() {
        let out = not_recorded();
        assert_eq!(out.error.as_deref(), Some("ledger_unavailable"));
        let v: Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(v["error"], "ledger_unavailable");
        assert_eq!(v["execution_outcome"], "failed");
    }
}
