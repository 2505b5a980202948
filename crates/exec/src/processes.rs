//! [`Processes`]: the host's one table of terminal scopes, sessions and run slots, and the
//! lifecycle of scopes — open (found again by owner), child scopes with grants, close, the idle
//! sweep and shutdown. The actions themselves are in `actions`.
//!
//! Lock order: the table lock may be taken before a session's state lock, never after.

use crate::error::{ExecError, Result};
use crate::reports::clip_json_escaped;
use crate::scope::{CloseReport, GrantAction, ScopeId, ScopeOwner, TerminalGrant};
use crate::session::Session;
use crate::{ExecConfig, ExecLimits};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, watch};

const START_WAIT_LIMIT: Duration = Duration::from_secs(3);
const RUN_CLOSE_WAIT: Duration = Duration::from_secs(6);
/// Bounds of the idle sweep interval (an eighth of the TTL in between).
const SWEEP_MIN: Duration = Duration::from_millis(10);
const SWEEP_MAX: Duration = Duration::from_secs(60);

pub(crate) struct ScopeRecord {
    pub owner: ScopeOwner,
    pub sealed: bool,
    pub sealed_tx: watch::Sender<bool>,
    pub grants: HashMap<String, BTreeSet<GrantAction>>,
    /// Where this scope's last reply left each session's output (used when no cursor is passed).
    pub cursors: HashMap<String, (u64, usize)>,
    pub active_runs: usize,
    pub starting: usize,
    /// The last tool call through this scope, or on one of its sessions.
    pub last_call: Instant,
    /// Registered under its owner (conversation scopes); subtask scopes are not.
    pub by_owner: bool,
}

#[derive(Default)]
pub(crate) struct State {
    pub shut_down: bool,
    pub next_scope: u64,
    pub scopes: HashMap<u64, ScopeRecord>,
    /// Live conversation scopes by owner, so a reloaded conversation finds its scope again.
    pub by_owner: HashMap<ScopeOwner, u64>,
    pub sessions: HashMap<String, Arc<Session>>,
    pub starting: usize,
}

impl State {
    /// The scope if it may still act: registered, not sealed, and the table not shut down.
    pub fn live_scope(&self, id: u64) -> Option<&ScopeRecord> {
        self.scopes
            .get(&id)
            .filter(|r| !r.sealed && !self.shut_down)
    }

    pub fn live_scope_mut(&mut self, id: u64) -> Option<&mut ScopeRecord> {
        let shut_down = self.shut_down;
        self.scopes.get_mut(&id).filter(|r| !r.sealed && !shut_down)
    }

    /// Marks activity on a scope (a tool call through it or on one of its sessions).
    pub fn touch(&mut self, id: u64) {
        if let Some(rec) = self.live_scope_mut(id) {
            rec.last_call = Instant::now();
        }
    }

    fn insert_scope(&mut self, owner: ScopeOwner, by_owner: bool) -> u64 {
        self.next_scope += 1;
        let id = self.next_scope;
        let (sealed_tx, _) = watch::channel(self.shut_down);
        if by_owner {
            self.by_owner.insert(owner.clone(), id);
        }
        self.scopes.insert(
            id,
            ScopeRecord {
                owner,
                sealed: self.shut_down,
                sealed_tx,
                grants: HashMap::new(),
                cursors: HashMap::new(),
                active_runs: 0,
                starting: 0,
                last_call: Instant::now(),
                by_owner,
            },
        );
        id
    }

    /// Seals a scope for good: it is never found by its owner again.
    fn seal(&mut self, id: u64) {
        let Some(rec) = self.scopes.get_mut(&id) else {
            return;
        };
        rec.sealed = true;
        rec.sealed_tx.send_replace(true);
        rec.grants.clear();
        rec.cursors.clear();
        if rec.by_owner && self.by_owner.get(&rec.owner) == Some(&id) {
            self.by_owner.remove(&rec.owner);
        }
    }

    /// Whether the scope has been quiet for `ttl`: no tool call, no output of its sessions, no
    /// one-shot run or start in flight.
    fn idle_for(&self, id: u64, ttl: Duration) -> bool {
        let Some(rec) = self.scopes.get(&id) else {
            return false;
        };
        if rec.active_runs > 0 || rec.starting > 0 {
            return false;
        }
        let last = self
            .sessions
            .values()
            .filter(|s| s.owner == id)
            .map(|s| s.state().last_output)
            .fold(rec.last_call, Instant::max);
        last.elapsed() >= ttl
    }
}

pub(crate) struct Inner {
    pub cfg: ExecConfig,
    pub limits: ExecLimits,
    pub state: Mutex<State>,
    pub run_slots: Semaphore,
}

/// The host's processes for tools: one per host, cheap to clone. A domain noun rather than a
/// "hub": it is the table of every terminal scope, background session and one-shot run the host
/// owns, and the only way to start, reach or end one.
///
/// Built inside a tokio runtime it also sweeps idle scopes in the background (see
/// [`ExecConfig::idle_scope_ttl`]); [`Processes::close_idle_scopes`] runs one sweep by hand.
#[derive(Clone)]
pub struct Processes {
    pub(crate) inner: Arc<Inner>,
}

impl Processes {
    pub fn new(cfg: ExecConfig) -> Self {
        Self::with_limits(cfg, ExecLimits::default())
    }

    /// Like [`Processes::new`] with non-default limits (tests and benchmarks).
    pub fn with_limits(cfg: ExecConfig, limits: ExecLimits) -> Self {
        let slots = limits.run_concurrency.max(1);
        let ttl = cfg.idle_scope_ttl;
        let processes = Self {
            inner: Arc::new(Inner {
                cfg,
                limits,
                state: Mutex::new(State::default()),
                run_slots: Semaphore::new(slots),
            }),
        };
        if let (Some(ttl), Ok(runtime)) = (ttl, tokio::runtime::Handle::try_current()) {
            runtime.spawn(sweep_idle_scopes(Arc::downgrade(&processes.inner), ttl));
        }
        processes
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The live scope of `owner`, or a new one. A conversation calls this whenever it needs its
    /// terminals (its actor may have been reclaimed and reloaded meanwhile): while the scope
    /// lives, the same id comes back, with its sessions. A closed scope is never reopened.
    /// Scopes come from the host, never from tool arguments.
    pub fn open_scope(&self, owner: ScopeOwner) -> ScopeId {
        let mut st = self.lock();
        if let Some(&id) = st.by_owner.get(&owner)
            && st.live_scope(id).is_some()
        {
            st.touch(id);
            return ScopeId(id);
        }
        ScopeId(st.insert_scope(owner, true))
    }

    /// Opens a new subtask scope of the same user holding `grants` on sessions the parent owns.
    /// Grants are not transitive (a child's grants never flow to its own children) and end with
    /// the child scope or the parent's. Subtask scopes are never found by owner.
    pub fn open_child_scope(
        &self,
        parent: &ScopeId,
        grants: Vec<TerminalGrant>,
    ) -> Result<ScopeId> {
        let mut merged: HashMap<String, BTreeSet<GrantAction>> = HashMap::new();
        let mut st = self.lock();
        let Some(rec) = st.live_scope(parent.0) else {
            return Err(ExecError::ScopeClosed);
        };
        for grant in grants {
            if grant.actions.is_empty() {
                return Err(ExecError::GrantRejected(format!(
                    "grant for {} lists no actions",
                    clip_json_escaped(&grant.session_id, 64).0
                )));
            }
            let owned = st
                .sessions
                .get(&grant.session_id)
                .is_some_and(|s| s.owner == parent.0);
            if !owned {
                return Err(ExecError::GrantRejected(format!(
                    "{} is not a session of the parent scope",
                    clip_json_escaped(&grant.session_id, 64).0
                )));
            }
            merged
                .entry(grant.session_id)
                .or_default()
                .extend(grant.actions);
        }
        let owner = ScopeOwner {
            user_key: rec.owner.user_key.clone(),
            label: format!("{}/subtask", rec.owner.label),
        };
        st.touch(parent.0);
        let child = st.insert_scope(owner, false);
        if let Some(rec) = st.scopes.get_mut(&child) {
            rec.grants = merged;
        }
        Ok(ScopeId(child))
    }

    /// Seals the scope, revokes its grants, waits for its in-flight starts and one-shot runs,
    /// and terminates the sessions it owns (TERM → 3 s → KILL). Sessions of other scopes are not
    /// touched. Records that did not converge are kept; calling again retries them.
    pub async fn close_scope(&self, scope: &ScopeId) -> CloseReport {
        self.close_scope_if(scope, |_| true)
            .await
            .unwrap_or_default()
    }

    /// Closes every scope that has been idle for the configured TTL — no tool call through it
    /// or on its sessions, no output from its sessions, no run or start in flight — and retries
    /// closes that did not converge. A quiet process does not keep its scope alive; a process
    /// with fresh output does. Returns the owner and report of each scope closed.
    pub async fn close_idle_scopes(&self) -> Vec<(ScopeOwner, CloseReport)> {
        let Some(ttl) = self.inner.cfg.idle_scope_ttl else {
            return Vec::new();
        };
        self.purge();
        let candidates: Vec<(u64, ScopeOwner)> = {
            let st = self.lock();
            st.scopes
                .iter()
                .filter(|(id, rec)| rec.sealed || st.idle_for(**id, ttl))
                .map(|(id, rec)| (*id, rec.owner.clone()))
                .collect()
        };
        let mut closed = Vec::new();
        for (id, owner) in candidates {
            // Re-checked under the lock at the moment of sealing: a call may have come in.
            let report = self
                .close_scope_if(&ScopeId(id), |st| {
                    st.scopes.get(&id).is_some_and(|r| r.sealed) || st.idle_for(id, ttl)
                })
                .await;
            if let Some(report) = report {
                tracing::info!(scope = %owner.label, complete = report.is_complete(),
                    "closed an idle terminal scope");
                closed.push((owner, report));
            }
        }
        closed
    }

    /// `close_scope` when `condition` holds at the moment of sealing; `None` when it did not.
    async fn close_scope_if(
        &self,
        scope: &ScopeId,
        condition: impl Fn(&State) -> bool,
    ) -> Option<CloseReport> {
        let owned: Vec<Arc<Session>> = {
            let mut st = self.lock();
            if !st.scopes.contains_key(&scope.0) {
                return Some(CloseReport {
                    already_closed: true,
                    ..CloseReport::default()
                });
            }
            if !condition(&st) {
                return None;
            }
            st.seal(scope.0);
            st.sessions
                .values()
                .filter(|s| s.owner == scope.0)
                .cloned()
                .collect()
        };
        self.wake_all();
        self.wait_scope_counter(scope.0, START_WAIT_LIMIT, |r| r.starting)
            .await;
        // Sessions registered by starts that were in flight.
        let owned: Vec<Arc<Session>> = {
            let st = self.lock();
            let mut all = owned;
            for s in st.sessions.values().filter(|s| s.owner == scope.0) {
                if !all.iter().any(|o| o.id == s.id) {
                    all.push(Arc::clone(s));
                }
            }
            all
        };
        let mut report = CloseReport::default();
        let tasks: Vec<_> = owned
            .into_iter()
            .map(|session| {
                tokio::spawn(async move {
                    let was_running = session.is_running();
                    let (_, _, converged) = session.terminate(libc::SIGTERM).await;
                    (session.id.clone(), was_running, converged)
                })
            })
            .collect();
        let mut converged_ids = Vec::new();
        for task in tasks {
            if let Ok((id, was_running, converged)) = task.await {
                if converged {
                    if was_running {
                        report.terminated.push(id.clone());
                    }
                    converged_ids.push(id);
                } else {
                    report.not_converged.push(id);
                }
            }
        }
        report.runs_still_active = self
            .wait_scope_counter(scope.0, RUN_CLOSE_WAIT, |r| r.active_runs)
            .await;
        let mut st = self.lock();
        for id in &converged_ids {
            st.sessions.remove(id);
        }
        if report.is_complete() {
            st.scopes.remove(&scope.0);
        }
        report.terminated.sort();
        report.not_converged.sort();
        Some(report)
    }

    /// Waits until `counter` of the scope is 0 or `limit` passes; returns the last value.
    async fn wait_scope_counter(
        &self,
        scope: u64,
        limit: Duration,
        counter: impl Fn(&ScopeRecord) -> usize,
    ) -> usize {
        let deadline = Instant::now() + limit;
        loop {
            let value = self.lock().scopes.get(&scope).map_or(0, &counter);
            if value == 0 || Instant::now() >= deadline {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Host exit: seals every scope and terminates every session and run.
    pub async fn shutdown(&self) {
        let (sessions, scopes): (Vec<Arc<Session>>, Vec<u64>) = {
            let mut st = self.lock();
            st.shut_down = true;
            let ids: Vec<u64> = st.scopes.keys().copied().collect();
            for id in &ids {
                st.seal(*id);
            }
            (st.sessions.values().cloned().collect(), ids)
        };
        self.wake_all();
        let tasks: Vec<_> = sessions
            .into_iter()
            .map(|s| tokio::spawn(async move { s.terminate(libc::SIGTERM).await }))
            .collect();
        for task in tasks {
            let _ = task.await;
        }
        for scope in scopes {
            self.wait_scope_counter(scope, RUN_CLOSE_WAIT, |r| r.active_runs)
                .await;
        }
        self.lock().sessions.clear();
    }

    pub(crate) fn wake_all(&self) {
        let sessions: Vec<Arc<Session>> = self.lock().sessions.values().cloned().collect();
        for session in sessions {
            session.notify();
        }
    }

    /// Drops finished sessions past their retention.
    pub(crate) fn purge(&self) {
        let retention = self.inner.limits.finished_retention;
        let mut st = self.lock();
        let expired: Vec<String> = st
            .sessions
            .values()
            .filter(|s| {
                s.state()
                    .finished_at
                    .is_some_and(|at| at.elapsed() >= retention)
            })
            .map(|s| s.id.clone())
            .collect();
        for id in &expired {
            st.sessions.remove(id);
        }
        if !expired.is_empty() {
            for rec in st.scopes.values_mut() {
                rec.cursors.retain(|id, _| !expired.contains(id));
                rec.grants.retain(|id, _| !expired.contains(id));
            }
        }
    }

    /// The access rule, re-evaluated at every suspension point: table open, caller scope open,
    /// session registered, owner scope open, and caller is the owner or holds a matching grant.
    /// An allowed access counts as activity of both scopes.
    pub(crate) fn authorize(
        &self,
        scope: &ScopeId,
        session_id: &str,
        wanted: &[GrantAction],
    ) -> Option<Arc<Session>> {
        let mut st = self.lock();
        let caller = st.live_scope(scope.0)?;
        let session = st.sessions.get(session_id)?;
        st.live_scope(session.owner)?;
        let allowed = session.owner == scope.0
            || caller
                .grants
                .get(session_id)
                .is_some_and(|granted| wanted.iter().any(|a| granted.contains(a)));
        if !allowed {
            return None;
        }
        let session = Arc::clone(session);
        st.touch(scope.0);
        st.touch(session.owner);
        Some(session)
    }
}

/// The background idle sweep; ends when the table is dropped or shut down.
async fn sweep_idle_scopes(table: Weak<Inner>, ttl: Duration) {
    let every = (ttl / 8).clamp(SWEEP_MIN, SWEEP_MAX);
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = table.upgrade() else {
            return;
        };
        let processes = Processes { inner };
        if processes.lock().shut_down {
            return;
        }
        processes.close_idle_scopes().await;
    }
}
