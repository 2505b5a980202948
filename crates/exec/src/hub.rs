//! [`ExecHub`]: the one per-process registry of scopes, sessions and run slots, and the
//! `execute_command` dispatcher that turns tool JSON into actions and actions into result JSON.
//!
//! Lock order: the hub state lock may be taken before a session's state lock, never after.

use crate::args::{self, Action, Args};
use crate::danger::dangerous_reason;
use crate::error::{ExecError, Result};
use crate::launch::{self, LaunchRequest};
use crate::output_log::{Cursor, Page, PageError};
use crate::payload::{clip, error_json, json_chars, session_outcome};
use crate::process;
use crate::run::{self, RunEnd};
use crate::scope::{CloseReport, GrantAction, ScopeId, ScopeOwner, TerminalGrant};
use crate::session::{Session, SessionState, Status};
use crate::{ExecConfig, ExecLimits};
use serde_json::{Map, Value, json};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, watch};

/// The one message for missing, closed, expired and foreign sessions alike: nothing about the
/// session (command, output, owner) leaks through it.
pub(crate) const ACCESS_DENIED_MESSAGE: &str =
    "terminal session not found or not accessible from this conversation";
const START_WAIT_LIMIT: Duration = Duration::from_secs(3);
const RUN_CLOSE_WAIT: Duration = Duration::from_secs(6);

struct ScopeRecord {
    owner: ScopeOwner,
    sealed: bool,
    sealed_tx: watch::Sender<bool>,
    grants: HashMap<String, BTreeSet<GrantAction>>,
    /// Where this scope's last reply left each session's output (used when no cursor is passed).
    cursors: HashMap<String, (u64, usize)>,
    active_runs: usize,
    starting: usize,
}

#[derive(Default)]
struct HubState {
    shut_down: bool,
    next_scope: u64,
    scopes: HashMap<u64, ScopeRecord>,
    sessions: HashMap<String, Arc<Session>>,
    starting: usize,
}

impl HubState {
    /// The scope if it may still act: registered, not sealed, and the hub not shut down.
    fn live_scope(&self, id: u64) -> Option<&ScopeRecord> {
        self.scopes
            .get(&id)
            .filter(|r| !r.sealed && !self.shut_down)
    }

    fn live_scope_mut(&mut self, id: u64) -> Option<&mut ScopeRecord> {
        let shut_down = self.shut_down;
        self.scopes.get_mut(&id).filter(|r| !r.sealed && !shut_down)
    }
}

struct Inner {
    cfg: ExecConfig,
    limits: ExecLimits,
    state: Mutex<HubState>,
    run_slots: Semaphore,
}

/// Process-wide owner of every terminal. Cheap to clone.
#[derive(Clone)]
pub struct ExecHub {
    inner: Arc<Inner>,
}

/// A tool failure that becomes an error payload.
struct Failure {
    code: &'static str,
    message: String,
    minimum: Option<usize>,
}

impl Failure {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            minimum: None,
        }
    }

    fn denied() -> Self {
        Self::new("terminal_access_denied", ACCESS_DENIED_MESSAGE)
    }

    fn from_exec(err: &ExecError) -> Self {
        Self::new(err.code(), err.to_string())
    }

    fn from_page(err: PageError) -> Self {
        match err {
            PageError::InvalidCursor(msg) => Self::new("invalid_output_cursor", msg),
            PageError::LimitTooSmall { minimum } => Self {
                code: "read_limit_too_small",
                message: format!(
                    "max_bytes is too small for the next output; pass since_offset=0 and a max_bytes of at least {minimum}; do not repeat the action"
                ),
                minimum: Some(minimum),
            },
        }
    }

    fn into_json(self, action: Action) -> Value {
        error_json(action.as_str(), self.code, &self.message, self.minimum)
    }
}

/// Removes a session that was started but whose id never reached the caller.
struct StartGuard {
    hub: ExecHub,
    session: Option<Arc<Session>>,
}

impl Drop for StartGuard {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            session.kill_now();
            self.hub.lock().sessions.remove(&session.id);
        }
    }
}

/// Decrements a scope's active-run counter however the run ends (including cancellation).
struct RunTicket {
    hub: ExecHub,
    scope: u64,
}

impl Drop for RunTicket {
    fn drop(&mut self) {
        if let Some(rec) = self.hub.lock().scopes.get_mut(&self.scope) {
            rec.active_runs = rec.active_runs.saturating_sub(1);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum WaitReason {
    Output,
    Completed,
    Timeout,
}

impl WaitReason {
    fn as_str(self) -> &'static str {
        match self {
            WaitReason::Output => "output",
            WaitReason::Completed => "completed",
            WaitReason::Timeout => "timeout",
        }
    }
}

impl ExecHub {
    pub fn new(cfg: ExecConfig) -> Self {
        Self::with_limits(cfg, ExecLimits::default())
    }

    /// Like [`ExecHub::new`] with non-default limits (tests and benchmarks).
    pub fn with_limits(cfg: ExecConfig, limits: ExecLimits) -> Self {
        let slots = limits.run_concurrency.max(1);
        Self {
            inner: Arc::new(Inner {
                cfg,
                limits,
                state: Mutex::new(HubState::default()),
                run_slots: Semaphore::new(slots),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens a fresh scope. Scopes come from the host, never from tool JSON.
    pub fn open_scope(&self, owner: ScopeOwner) -> ScopeId {
        let mut st = self.lock();
        st.next_scope += 1;
        let id = st.next_scope;
        let shut_down = st.shut_down;
        let (sealed_tx, _) = watch::channel(shut_down);
        st.scopes.insert(
            id,
            ScopeRecord {
                owner,
                sealed: shut_down,
                sealed_tx,
                grants: HashMap::new(),
                cursors: HashMap::new(),
                active_runs: 0,
                starting: 0,
            },
        );
        ScopeId(id)
    }

    /// Opens a subtask scope of the same user holding `grants` on sessions the parent owns.
    /// Grants are not transitive (a child's grants never flow to its own children) and end with
    /// the child scope or the parent's.
    pub fn open_child_scope(
        &self,
        parent: &ScopeId,
        grants: Vec<TerminalGrant>,
    ) -> Result<ScopeId> {
        let mut merged: HashMap<String, BTreeSet<GrantAction>> = HashMap::new();
        let owner = {
            let st = self.lock();
            let Some(rec) = st.live_scope(parent.0) else {
                return Err(ExecError::ScopeClosed);
            };
            for grant in grants {
                if grant.actions.is_empty() {
                    return Err(ExecError::GrantRejected(format!(
                        "grant for {} lists no actions",
                        grant.session_id
                    )));
                }
                let owned = st
                    .sessions
                    .get(&grant.session_id)
                    .is_some_and(|s| s.owner == parent.0);
                if !owned {
                    return Err(ExecError::GrantRejected(format!(
                        "{} is not a session of the parent scope",
                        clip(&grant.session_id, 64).0
                    )));
                }
                merged
                    .entry(grant.session_id)
                    .or_default()
                    .extend(grant.actions);
            }
            ScopeOwner {
                user_key: rec.owner.user_key.clone(),
                label: format!("{}/subtask", rec.owner.label),
            }
        };
        let child = self.open_scope(owner);
        if let Some(rec) = self.lock().scopes.get_mut(&child.0) {
            rec.grants = merged;
        }
        Ok(child)
    }

    /// Seals the scope, revokes its grants, waits for its in-flight starts and one-shot runs,
    /// and terminates the sessions it owns (TERM → 3 s → KILL). Sessions of other scopes are not
    /// touched. Records that did not converge are kept; calling again retries them.
    pub async fn close_scope(&self, scope: &ScopeId) -> CloseReport {
        let owned: Vec<Arc<Session>> = {
            let mut st = self.lock();
            let Some(rec) = st.scopes.get_mut(&scope.0) else {
                return CloseReport {
                    already_closed: true,
                    ..CloseReport::default()
                };
            };
            rec.sealed = true;
            rec.sealed_tx.send_replace(true);
            rec.grants.clear();
            rec.cursors.clear();
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
        let mut tasks = Vec::new();
        for session in owned {
            tasks.push(tokio::spawn(async move {
                let was_running = session.is_running();
                let (_, _, converged) = session.terminate(libc::SIGTERM).await;
                (session.id.clone(), was_running, converged)
            }));
        }
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
        report
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
            for rec in st.scopes.values_mut() {
                rec.sealed = true;
                rec.sealed_tx.send_replace(true);
                rec.grants.clear();
            }
            (
                st.sessions.values().cloned().collect(),
                st.scopes.keys().copied().collect(),
            )
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
        let mut st = self.lock();
        st.sessions.clear();
    }

    fn wake_all(&self) {
        let sessions: Vec<Arc<Session>> = self.lock().sessions.values().cloned().collect();
        for session in sessions {
            session.notify();
        }
    }

    /// Drops finished sessions past their retention.
    fn purge(&self) {
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

    /// The access rule, re-evaluated at every suspension point: hub open, caller scope open,
    /// session registered, owner scope open, and caller is the owner or holds a matching grant.
    fn authorize(
        &self,
        scope: &ScopeId,
        session_id: &str,
        wanted: &[GrantAction],
    ) -> Option<Arc<Session>> {
        let st = self.lock();
        let caller = st.live_scope(scope.0)?;
        let session = st.sessions.get(session_id)?;
        st.live_scope(session.owner)?;
        if session.owner == scope.0 {
            return Some(Arc::clone(session));
        }
        let granted = caller.grants.get(session_id)?;
        wanted
            .iter()
            .any(|a| granted.contains(a))
            .then(|| Arc::clone(session))
    }

    /// The whole `execute_command` tool: validates the arguments, runs the action and returns
    /// the result JSON. Failures are JSON too; this never panics on bad input.
    pub async fn execute(&self, scope: &ScopeId, args: Value) -> Value {
        let parsed = match args::parse(&args) {
            Ok(parsed) => parsed,
            Err(err) => {
                return error_json(
                    &args::action_name(&args),
                    err.code(),
                    &err.to_string(),
                    None,
                );
            }
        };
        self.purge();
        let action = parsed.action;
        let result = match action {
            Action::Run => self.run(scope, parsed).await,
            Action::Start => self.start(scope, parsed).await,
            Action::List => self.list(scope),
            Action::Read
            | Action::Wait
            | Action::Status
            | Action::Write
            | Action::Interrupt
            | Action::Kill => self.session_action(scope, parsed).await,
        };
        result.unwrap_or_else(|failure| failure.into_json(action))
    }

    fn check_danger(args: &Args, command: &str) -> std::result::Result<(), Failure> {
        if args.confirm_dangerous {
            return Ok(());
        }
        match dangerous_reason(command) {
            Some(reason) => Err(Failure::new(
                "dangerous_command_blocked",
                format!(
                    "refused: the command looks destructive ({reason}). If this is really intended, repeat with confirm_dangerous=true."
                ),
            )),
            None => Ok(()),
        }
    }

    fn launch_request(args: &Args, command: &str, use_pty: bool) -> LaunchRequest {
        LaunchRequest {
            command: command.to_string(),
            cwd: args.cwd.clone(),
            shell: args.shell.clone(),
            login: args.login,
            env: args.env.clone(),
            use_pty,
        }
    }

    async fn run(&self, scope: &ScopeId, args: Args) -> std::result::Result<Value, Failure> {
        let command = args.command.clone().unwrap_or_default();
        Self::check_danger(&args, &command)?;
        let launch = launch::resolve(
            &self.inner.cfg,
            &Self::launch_request(&args, &command, false),
        )
        .map_err(|e| Failure::from_exec(&e))?;
        let (sealed, ticket) = {
            let mut st = self.lock();
            let Some(rec) = st.live_scope_mut(scope.0) else {
                return Err(Failure::denied());
            };
            rec.active_runs += 1;
            (
                rec.sealed_tx.subscribe(),
                RunTicket {
                    hub: self.clone(),
                    scope: scope.0,
                },
            )
        };
        let timeout = Duration::from_secs(args.timeout_s);
        let mut sealed_wait = sealed.clone();
        let permit = tokio::select! {
            permit = self.inner.run_slots.acquire() => permit.ok(),
            () = run::wait_sealed(&mut sealed_wait) => None,
        };
        let base = |status: &str, outcome: &str| {
            let mut obj = Map::new();
            obj.insert("action".into(), json!("run"));
            obj.insert("success".into(), json!(false));
            obj.insert("execution_outcome".into(), json!(outcome));
            obj.insert("status".into(), json!(status));
            obj
        };
        let Some(_permit) = permit else {
            let mut obj = base("cancelled", "failed");
            fill_run_fields(
                &mut obj,
                None,
                false,
                args.timeout_s,
                &launch,
                false,
                None,
                "",
            );
            obj.insert(
                "message".into(),
                json!("the terminal scope was closed while the command waited for a run slot; it was not started"),
            );
            return Ok(Value::Object(obj));
        };
        let report = run::run_once(&launch, timeout, &self.inner.cfg.spill_dir, sealed)
            .await
            .map_err(|e| Failure::from_exec(&e))?;
        drop(ticket);
        let (status, outcome) = match (report.end, report.exit_code) {
            (RunEnd::Exited, Some(0)) => ("exited", "succeeded"),
            (RunEnd::Exited, Some(_)) => ("exited", "failed"),
            (RunEnd::Exited | RunEnd::Unknown, None) => ("unknown", "unknown"),
            (RunEnd::Unknown, Some(_)) => ("unknown", "unknown"),
            (RunEnd::TimedOut, _) => ("timed_out", "failed"),
            (RunEnd::Cancelled, _) => ("cancelled", "failed"),
        };
        let mut obj = base(status, outcome);
        obj.insert("success".into(), json!(outcome == "succeeded"));
        fill_run_fields(
            &mut obj,
            report.exit_code,
            report.end == RunEnd::TimedOut,
            args.timeout_s,
            &launch,
            report.output_truncated,
            report.output_file.as_deref(),
            &report.output,
        );
        let mut message = match (report.end, report.exit_code) {
            (RunEnd::Exited, Some(0)) => "command exited with code 0".to_string(),
            (RunEnd::Exited, Some(code)) if code < 0 => {
                format!("command was ended by signal {}", -code)
            }
            (RunEnd::Exited, Some(code)) => format!("command exited with code {code}"),
            (RunEnd::TimedOut, _) => format!(
                "command timed out after {} s; its process group was terminated (TERM, then KILL after 3 s). Side effects may already have happened — verify before retrying",
                args.timeout_s
            ),
            (RunEnd::Cancelled, _) => "the terminal scope was closed; the command's process group was terminated and its effects are unknown".to_string(),
            _ => "the command's exit status could not be observed; its outcome is unknown".to_string(),
        };
        if report.output_truncated {
            message.push_str("; output was long: the preview shows its head and tail");
            if report.output_file.is_some() {
                message.push_str(", the full output is in output_file");
            }
        }
        if let Some(note) = &args.timeout_note {
            message.push_str("; ");
            message.push_str(note);
        }
        if let Some(err) = &report.spill_error {
            message.push_str("; ");
            message.push_str(err);
        }
        obj.insert("message".into(), json!(message));
        Ok(Value::Object(obj))
    }

    async fn start(&self, scope: &ScopeId, args: Args) -> std::result::Result<Value, Failure> {
        let command = args.command.clone().unwrap_or_default();
        Self::check_danger(&args, &command)?;
        let launch = launch::resolve(
            &self.inner.cfg,
            &Self::launch_request(&args, &command, args.use_pty),
        )
        .map_err(|e| Failure::from_exec(&e))?;
        {
            let mut st = self.lock();
            if st.live_scope(scope.0).is_none() {
                return Err(Failure::denied());
            }
            let running = st.sessions.values().filter(|s| s.is_running()).count() + st.starting;
            if running >= self.inner.limits.max_running_sessions {
                return Err(Failure::new(
                    "terminal_limit_reached",
                    format!(
                        "{running} terminal sessions are already running (limit {}); wait for one to finish or kill one first",
                        self.inner.limits.max_running_sessions
                    ),
                ));
            }
            st.starting += 1;
            if let Some(rec) = st.scopes.get_mut(&scope.0) {
                rec.starting += 1;
            }
        }
        let id = format!("term_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let spawned = Session::spawn(
            id.clone(),
            scope.0,
            command,
            &launch,
            args.use_pty,
            self.inner.limits.max_retained_bytes,
        );
        let session = {
            let mut st = self.lock();
            st.starting = st.starting.saturating_sub(1);
            let open = st.live_scope(scope.0).is_some();
            if let Some(rec) = st.scopes.get_mut(&scope.0) {
                rec.starting = rec.starting.saturating_sub(1);
            }
            let session = spawned.map_err(|e| Failure::from_exec(&e))?;
            if !open {
                session.kill_now();
                return Err(Failure::denied());
            }
            st.sessions.insert(id.clone(), Arc::clone(&session));
            session
        };
        let mut guard = StartGuard {
            hub: self.clone(),
            session: Some(Arc::clone(&session)),
        };
        let cursor = Cursor {
            seq: 0,
            offset: 0,
            partial: args.since_offset.is_some(),
        };
        let reason = self
            .wait_for_news(
                scope,
                &session,
                cursor,
                Duration::from_millis(args.yield_time_ms),
                &[GrantAction::Read],
            )
            .await?;
        let mut extras = Map::new();
        extras.insert("yield_time_ms".into(), json!(args.yield_time_ms));
        extras.insert("wait_reason".into(), json!(reason.as_str()));
        let value = self.paged_payload(
            scope,
            &session,
            Action::Start,
            cursor,
            args.max_bytes,
            extras,
            true,
        )?;
        guard.session = None;
        Ok(value)
    }

    /// Waits until unread output exists, the session finished, `timeout` passes, or access is
    /// lost (a scope sealed) — re-checking access after every wake-up.
    async fn wait_for_news(
        &self,
        scope: &ScopeId,
        session: &Session,
        cursor: Cursor,
        timeout: Duration,
        wanted: &[GrantAction],
    ) -> std::result::Result<WaitReason, Failure> {
        let mut rx = session.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            rx.borrow_and_update();
            if self.authorize(scope, &session.id, wanted).is_none() {
                return Err(Failure::denied());
            }
            {
                let st = session.state();
                if st.log.has_unread(cursor) {
                    return Ok(WaitReason::Output);
                }
                if st.status != Status::Running {
                    return Ok(WaitReason::Completed);
                }
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                return Ok(WaitReason::Timeout);
            }
        }
    }

    fn resolve_cursor(
        &self,
        scope: &ScopeId,
        session_id: &str,
        args: &Args,
    ) -> std::result::Result<Cursor, Failure> {
        let offset = |o: u64| {
            usize::try_from(o)
                .map_err(|_| Failure::new("invalid_output_cursor", "since_offset is too large"))
        };
        match (args.since_seq, args.since_offset) {
            (Some(seq), None) => Ok(Cursor {
                seq,
                offset: 0,
                partial: false,
            }),
            (Some(seq), Some(off)) => Ok(Cursor {
                seq,
                offset: offset(off)?,
                partial: true,
            }),
            (None, Some(off)) if off != 0 => Err(Failure::new(
                "invalid_output_cursor",
                "a non-zero since_offset requires since_seq",
            )),
            (None, _) => {
                let (seq, offset) = self
                    .lock()
                    .scopes
                    .get(&scope.0)
                    .and_then(|r| r.cursors.get(session_id).copied())
                    .unwrap_or((0, 0));
                Ok(Cursor {
                    seq,
                    offset,
                    partial: true,
                })
            }
        }
    }

    async fn session_action(
        &self,
        scope: &ScopeId,
        args: Args,
    ) -> std::result::Result<Value, Failure> {
        let action = args.action;
        let wanted: &[GrantAction] = match action {
            Action::Read => &[GrantAction::Read],
            Action::Wait => &[GrantAction::Wait],
            Action::Status => &[GrantAction::Read, GrantAction::Wait],
            Action::Write => &[GrantAction::Write],
            Action::Interrupt => &[GrantAction::Interrupt],
            _ => &[GrantAction::Kill],
        };
        // The signal is validated before anything else can change state.
        let signal = if action == Action::Kill {
            Some(
                process::parse_signal(args.signal_name.as_ref())
                    .map_err(|e| Failure::from_exec(&e))?,
            )
        } else {
            None
        };
        let session_id = args.session_id.clone().unwrap_or_default();
        let session = self
            .authorize(scope, &session_id, wanted)
            .ok_or_else(Failure::denied)?;
        let cursor = self.resolve_cursor(scope, &session_id, &args)?;
        let mut extras = Map::new();
        let mut action_error = None;
        match action {
            Action::Read => {}
            Action::Status => return Ok(self.status_payload(&session, cursor)),
            Action::Wait => {
                let reason = self
                    .wait_for_news(
                        scope,
                        &session,
                        cursor,
                        Duration::from_millis(args.timeout_ms),
                        wanted,
                    )
                    .await?;
                extras.insert("wait_timeout_ms".into(), json!(args.timeout_ms));
                extras.insert("wait_reason".into(), json!(reason.as_str()));
            }
            Action::Write => {
                let still_allowed = || self.authorize(scope, &session_id, wanted).is_some();
                match session
                    .write(&args.input_text, args.close_stdin, still_allowed)
                    .await
                {
                    Ok(written) => {
                        extras.insert("written_bytes".into(), json!(written));
                    }
                    Err(refusal) if refusal.written == 0 => {
                        return Err(Failure::new(refusal.code, refusal.message));
                    }
                    Err(refusal) => {
                        extras.insert("written_bytes".into(), json!(refusal.written));
                        action_error = Some(refusal.message);
                    }
                }
            }
            Action::Interrupt => {
                let sent = session.interrupt();
                extras.insert("signal".into(), json!("SIGINT"));
                extras.insert("signal_sent".into(), json!(sent));
            }
            Action::Kill => {
                let (number, name) = signal.unwrap_or((libc::SIGTERM, "SIGTERM".into()));
                let (sent, escalated, converged) = session.terminate(number).await;
                extras.insert("signal".into(), json!(name));
                extras.insert("signal_sent".into(), json!(sent));
                extras.insert("kill_escalated".into(), json!(escalated));
                if !converged {
                    action_error = Some(
                        "the process group did not exit after SIGKILL; check again with status"
                            .into(),
                    );
                }
            }
            _ => {}
        }
        if self.authorize(scope, &session_id, wanted).is_none() {
            return Err(Failure::denied());
        }
        if let Some(message) = action_error {
            extras.insert("action_error".into(), json!(clip(&message, 512).0));
        }
        let keep_payload_on_page_error =
            matches!(action, Action::Write | Action::Interrupt | Action::Kill);
        self.paged_payload(
            scope,
            &session,
            action,
            cursor,
            args.max_bytes,
            extras,
            keep_payload_on_page_error,
        )
    }

    /// Builds the session payload with the largest page (≤ `max_bytes`) whose pretty JSON fits
    /// the character budget, and records the new cursor for this scope. When the action already
    /// happened (`keep_on_error`), a paging failure is reported inside the payload as
    /// `output_error` with the cursor left unconsumed, so the model reads instead of re-running.
    #[expect(
        clippy::too_many_arguments,
        reason = "one internal call shape shared by all actions"
    )]
    fn paged_payload(
        &self,
        scope: &ScopeId,
        session: &Session,
        action: Action,
        cursor: Cursor,
        max_bytes: usize,
        extras: Map<String, Value>,
        keep_on_error: bool,
    ) -> std::result::Result<Value, Failure> {
        let budget = self.inner.limits.json_budget_chars;
        let outcome = {
            let st = session.state();
            let build = |limit: usize| -> std::result::Result<(Value, Page), PageError> {
                let page = st.log.page(cursor, limit)?;
                let value = session_payload(session, &st, action, Some(&page), cursor, &extras);
                Ok((value, page))
            };
            match build(max_bytes) {
                Ok((value, page)) if json_chars(&value) <= budget => Ok((value, page)),
                Ok(_) => {
                    let (mut lo, mut hi, mut best) = (1usize, max_bytes.saturating_sub(1), None);
                    while lo <= hi {
                        let mid = lo + (hi - lo) / 2;
                        match build(mid) {
                            Ok((value, page)) if json_chars(&value) <= budget => {
                                best = Some((value, page));
                                lo = mid + 1;
                            }
                            _ => hi = mid - 1,
                        }
                    }
                    best.ok_or(PageError::LimitTooSmall { minimum: max_bytes })
                }
                Err(err) => Err(err),
            }
            .map_err(|err| {
                let failure = Failure::from_page(err);
                if keep_on_error {
                    let mut value = session_payload(session, &st, action, None, cursor, &extras);
                    if let Value::Object(obj) = &mut value {
                        let mut detail = Map::new();
                        detail.insert("code".into(), json!(failure.code));
                        detail.insert("message".into(), json!(failure.message));
                        if let Some(min) = failure.minimum {
                            detail.insert("minimum_read_bytes".into(), json!(min));
                        }
                        obj.insert("output_error".into(), Value::Object(detail));
                    }
                    Ok(value)
                } else {
                    Err(failure)
                }
            })
        };
        match outcome {
            Ok((value, page)) => {
                if let Some(rec) = self.lock().scopes.get_mut(&scope.0) {
                    rec.cursors
                        .insert(session.id.clone(), (page.until_seq, page.until_offset));
                }
                Ok(value)
            }
            Err(Ok(value)) => Ok(value),
            Err(Err(failure)) => Err(failure),
        }
    }

    fn status_payload(&self, session: &Session, cursor: Cursor) -> Value {
        let st = session.state();
        session_payload(session, &st, Action::Status, None, cursor, &Map::new())
    }

    fn list(&self, scope: &ScopeId) -> std::result::Result<Value, Failure> {
        let visible: Vec<(Arc<Session>, Option<Vec<&'static str>>)> = {
            let st = self.lock();
            let Some(caller) = st.live_scope(scope.0) else {
                return Err(Failure::denied());
            };
            let mut out: Vec<(Arc<Session>, Option<Vec<&'static str>>)> = Vec::new();
            for session in st.sessions.values() {
                if st.live_scope(session.owner).is_none() {
                    continue;
                }
                if session.owner == scope.0 {
                    out.push((Arc::clone(session), None));
                } else if let Some(granted) = caller.grants.get(&session.id) {
                    out.push((
                        Arc::clone(session),
                        Some(granted.iter().map(|a| a.as_str()).collect()),
                    ));
                }
            }
            out
        };
        let mut rows = Vec::new();
        let mut running = 0;
        for (session, granted) in visible {
            let st = session.state();
            if st.status == Status::Running {
                running += 1;
            }
            let (command, command_truncated) = clip(&session.command, 256);
            let status = st.status.as_str();
            rows.push(json!({
                "session_id": session.id,
                "access": if granted.is_some() { "granted" } else { "owner" },
                "granted_actions": granted,
                "command": command,
                "command_truncated": command_truncated,
                "pid": session.pid,
                "status": status,
                "exit_code": st.exit_code,
                "execution_outcome": session_outcome(status, st.exit_code),
                "use_pty": session.use_pty,
                "last_seq": st.log.last_seq(),
                "output_complete": st.output_complete(),
            }));
        }
        rows.sort_by(|a, b| a["session_id"].as_str().cmp(&b["session_id"].as_str()));
        Ok(json!({
            "action": "list",
            "success": true,
            "execution_outcome": "succeeded",
            "count": rows.len(),
            "running": running,
            "max_running_sessions": self.inner.limits.max_running_sessions,
            "sessions": rows,
        }))
    }
}

#[expect(clippy::too_many_arguments, reason = "flat list of the §5.3 fields")]
fn fill_run_fields(
    obj: &mut Map<String, Value>,
    exit_code: Option<i32>,
    timed_out: bool,
    timeout_s: u64,
    launch: &launch::Launch,
    output_truncated: bool,
    output_file: Option<&std::path::Path>,
    output: &str,
) {
    obj.insert("exit_code".into(), json!(exit_code));
    obj.insert("timed_out".into(), json!(timed_out));
    obj.insert("timeout".into(), json!(timeout_s));
    obj.insert("cwd".into(), json!(launch.cwd_display()));
    obj.insert("shell".into(), json!(launch.shell_display()));
    obj.insert("login".into(), json!(launch.login));
    obj.insert("stdin_closed".into(), json!(true));
    obj.insert("output_truncated".into(), json!(output_truncated));
    obj.insert(
        "output_file".into(),
        json!(output_file.map(|p| p.display().to_string())),
    );
    obj.insert("output".into(), json!(output));
}

/// The session payload of spec runtime.md §5.4. With `page == None` no output is delivered and
/// the cursor handed back is the one that came in.
fn session_payload(
    session: &Session,
    st: &SessionState,
    action: Action,
    page: Option<&Page>,
    cursor: Cursor,
    extras: &Map<String, Value>,
) -> Value {
    let (command, command_truncated) = clip(&session.command, 1024);
    let (cwd, cwd_truncated) = clip(&session.cwd, 1024);
    let (shell, shell_truncated) = clip(&session.shell, 256);
    let (error, error_truncated) = match &st.error {
        Some(e) => {
            let (e, t) = clip(e, 512);
            (Some(e), t)
        }
        None => (None, false),
    };
    let status = st.status.as_str();
    let (output, until_seq, until_offset, more, lost) = match page {
        Some(p) => (p.text.as_str(), p.until_seq, p.until_offset, p.more, p.lost),
        None => (
            "",
            cursor.seq,
            if cursor.partial { cursor.offset } else { 0 },
            st.log.has_unread(cursor),
            false,
        ),
    };
    let mut obj = Map::new();
    obj.insert("action".into(), json!(action.as_str()));
    obj.insert("session_id".into(), json!(session.id));
    obj.insert("command".into(), json!(command));
    obj.insert("command_truncated".into(), json!(command_truncated));
    obj.insert(
        "command_total_chars".into(),
        json!(session.command.chars().count()),
    );
    obj.insert("cwd".into(), json!(cwd));
    obj.insert("cwd_truncated".into(), json!(cwd_truncated));
    obj.insert("pid".into(), json!(session.pid));
    obj.insert("status".into(), json!(status));
    obj.insert("exit_code".into(), json!(st.exit_code));
    obj.insert(
        "execution_outcome".into(),
        json!(session_outcome(status, st.exit_code)),
    );
    obj.insert("use_pty".into(), json!(session.use_pty));
    obj.insert("shell".into(), json!(shell));
    obj.insert("shell_truncated".into(), json!(shell_truncated));
    obj.insert("login".into(), json!(session.login));
    obj.insert("stdin_closed".into(), json!(st.stdin_closed));
    obj.insert("last_seq".into(), json!(st.log.last_seq()));
    obj.insert(
        "retained_from_seq".into(),
        json!(st.log.retained_from_seq()),
    );
    obj.insert("output_complete".into(), json!(st.output_complete()));
    obj.insert("error".into(), json!(error));
    obj.insert("error_truncated".into(), json!(error_truncated));
    obj.insert("output".into(), json!(output));
    obj.insert("output_until_seq".into(), json!(until_seq));
    obj.insert("output_until_offset".into(), json!(until_offset));
    obj.insert("output_truncated".into(), json!(more || lost));
    obj.insert("output_lost".into(), json!(lost || st.reader_failed));
    for (key, value) in extras {
        obj.insert(key.clone(), value.clone());
    }
    Value::Object(obj)
}
