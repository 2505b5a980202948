//! The actions of [`Processes`]: one-shot [`run`](Processes::run), session
//! [`start`](Processes::start), the session actions and [`list`](Processes::list). Every action
//! checks its request and the access rule before it changes anything, and re-checks access after
//! every suspension point.

use crate::danger::dangerous_reason;
use crate::error::{ExecError, Result};
use crate::launch;
use crate::output_log::{Cursor, Page, PageError};
use crate::processes::Processes;
use crate::reports::{
    Access, ActionDetail, ListReport, ListedSession, OutputError, RunReport, RunStatus,
    SessionReport, SessionStatus, WaitReason, clip_json_escaped, pretty_json_chars,
};
use crate::requests::{
    Action, CommandSpec, MAX_PAGE_BYTES, OutputCursor, RunRequest, SessionAction, SessionRequest,
    StartRequest,
};
use crate::run::{self, RunEnd};
use crate::scope::{GrantAction, ScopeId};
use crate::session::Session;
use mpa_protocol::Outcome;
use std::sync::Arc;
use std::time::Duration;

/// Removes a session that was started but whose report never reached the caller.
struct StartGuard {
    processes: Processes,
    session: Option<Arc<Session>>,
}

impl Drop for StartGuard {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            session.kill_now();
            self.processes.lock().sessions.remove(&session.id);
        }
    }
}

/// Decrements a scope's active-run counter however the run ends (including cancellation).
struct RunTicket {
    processes: Processes,
    scope: u64,
}

impl Drop for RunTicket {
    fn drop(&mut self) {
        let mut st = self.processes.lock();
        if let Some(rec) = st.scopes.get_mut(&self.scope) {
            rec.active_runs = rec.active_runs.saturating_sub(1);
        }
        // The end of a run is activity too: the idle clock starts when it finishes.
        st.touch(self.scope);
    }
}

impl From<PageError> for ExecError {
    fn from(err: PageError) -> Self {
        match err {
            PageError::InvalidCursor(msg) => ExecError::InvalidCursor(msg),
            PageError::LimitTooSmall { minimum } => ExecError::ReadLimitTooSmall { minimum },
        }
    }
}

fn check_danger(spec: &CommandSpec) -> Result<()> {
    if spec.confirm_dangerous {
        return Ok(());
    }
    match dangerous_reason(&spec.command) {
        Some(reason) => Err(ExecError::DangerousCommand(reason)),
        None => Ok(()),
    }
}

fn page_size(max_bytes: usize) -> usize {
    max_bytes.clamp(1, MAX_PAGE_BYTES)
}

impl Processes {
    /// A one-shot run (spec runtime.md §5.3). Waits for one of the run slots; a scope closed
    /// meanwhile cancels it (reported, not an error). Failures before the spawn are errors.
    pub async fn run(&self, scope: &ScopeId, req: RunRequest) -> Result<RunReport> {
        self.purge();
        req.spec.validate()?;
        check_danger(&req.spec)?;
        let launch = launch::resolve(&self.inner.cfg, &req.spec, false)?;
        let (sealed, ticket) = {
            let mut st = self.lock();
            st.touch(scope.0);
            let Some(rec) = st.live_scope_mut(scope.0) else {
                return Err(ExecError::AccessDenied);
            };
            rec.active_runs += 1;
            (
                rec.sealed_tx.subscribe(),
                RunTicket {
                    processes: self.clone(),
                    scope: scope.0,
                },
            )
        };
        let timeout_s = req.timeout.as_secs();
        let report = |status, outcome, exit_code, message: String| RunReport {
            action: Action::Run,
            success: outcome == Outcome::Succeeded,
            execution_outcome: outcome,
            status,
            exit_code,
            timed_out: status == RunStatus::TimedOut,
            timeout: timeout_s,
            cwd: launch.cwd_display(),
            shell: launch.shell_display(),
            login: launch.login,
            stdin_closed: true,
            output_truncated: false,
            output_file: None,
            output: String::new(),
            message,
        };
        let mut sealed_wait = sealed.clone();
        let permit = tokio::select! {
            permit = self.inner.run_slots.acquire() => permit.ok(),
            () = run::wait_sealed(&mut sealed_wait) => None,
        };
        let Some(_permit) = permit else {
            return Ok(report(
                RunStatus::Cancelled,
                Outcome::Failed,
                None,
                "the terminal scope was closed while the command waited for a run slot; it was not started".into(),
            ));
        };
        let ran = run::run_once(&launch, req.timeout, &self.inner.cfg.spill_dir, sealed).await?;
        drop(ticket);
        let (status, outcome) = match (ran.end, ran.exit_code) {
            (RunEnd::Exited, Some(0)) => (RunStatus::Exited, Outcome::Succeeded),
            (RunEnd::Exited, Some(_)) => (RunStatus::Exited, Outcome::Failed),
            (RunEnd::Exited | RunEnd::Unknown, None) | (RunEnd::Unknown, Some(_)) => {
                (RunStatus::Unknown, Outcome::Unknown)
            }
            (RunEnd::TimedOut, _) => (RunStatus::TimedOut, Outcome::Failed),
            (RunEnd::Cancelled, _) => (RunStatus::Cancelled, Outcome::Failed),
        };
        let mut message = match (ran.end, ran.exit_code) {
            (RunEnd::Exited, Some(0)) => "command exited with code 0".to_string(),
            (RunEnd::Exited, Some(code)) if code < 0 => {
                format!("command was ended by signal {}", -code)
            }
            (RunEnd::Exited, Some(code)) => format!("command exited with code {code}"),
            (RunEnd::TimedOut, _) => format!(
                "command timed out after {timeout_s} s; its process group was terminated (TERM, then KILL after 3 s). Side effects may already have happened — verify before retrying"
            ),
            (RunEnd::Cancelled, _) => "the terminal scope was closed; the command's process group was terminated and its effects are unknown".to_string(),
            _ => "the command's exit status could not be observed; its outcome is unknown".to_string(),
        };
        if ran.output_truncated {
            message.push_str("; output was long: the preview shows its head and tail");
            if ran.output_file.is_some() {
                message.push_str(", the full output is in output_file");
            }
        }
        if let Some(err) = &ran.spill_error {
            message.push_str("; ");
            message.push_str(err);
        }
        Ok(RunReport {
            output_truncated: ran.output_truncated,
            output_file: ran.output_file.map(|p| p.display().to_string()),
            output: ran.output,
            ..report(status, outcome, ran.exit_code, message)
        })
    }

    /// Starts a background session (spec runtime.md §5.4) and waits up to `yield_time` for its
    /// first output or its end. If the call is dropped before it returns, the process is killed
    /// and unregistered. If the page cannot be built the report still comes back (with
    /// `output_error` and the cursor unconsumed): the session exists and must not be started
    /// again.
    pub async fn start(&self, scope: &ScopeId, req: StartRequest) -> Result<SessionReport> {
        self.purge();
        req.validate()?;
        check_danger(&req.spec)?;
        let launch = launch::resolve(&self.inner.cfg, &req.spec, req.use_pty)?;
        {
            let mut st = self.lock();
            st.touch(scope.0);
            if st.live_scope(scope.0).is_none() {
                return Err(ExecError::AccessDenied);
            }
            let running = st.sessions.values().filter(|s| s.is_running()).count() + st.starting;
            let limit = self.inner.limits.max_running_sessions;
            if running >= limit {
                return Err(ExecError::SessionLimit { running, limit });
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
            req.spec.command.clone(),
            &launch,
            req.use_pty,
            self.inner.limits.max_retained_bytes,
        );
        let session = {
            let mut st = self.lock();
            st.starting = st.starting.saturating_sub(1);
            let open = st.live_scope(scope.0).is_some();
            if let Some(rec) = st.scopes.get_mut(&scope.0) {
                rec.starting = rec.starting.saturating_sub(1);
            }
            let session = spawned?;
            if !open {
                session.kill_now();
                return Err(ExecError::AccessDenied);
            }
            st.sessions.insert(id.clone(), Arc::clone(&session));
            session
        };
        let mut guard = StartGuard {
            processes: self.clone(),
            session: Some(Arc::clone(&session)),
        };
        let cursor = Cursor {
            seq: 0,
            offset: 0,
            partial: req.since_offset.is_some(),
        };
        let reason = self
            .wait_for_news(
                scope,
                &session,
                cursor,
                req.yield_time,
                &[GrantAction::Read],
            )
            .await?;
        let detail = ActionDetail {
            yield_time_ms: Some(millis(req.yield_time)),
            wait_reason: Some(reason),
            ..ActionDetail::default()
        };
        let report = self.paged_report(
            scope,
            &session,
            Action::Start,
            cursor,
            page_size(req.max_bytes),
            &detail,
            true,
        )?;
        guard.session = None;
        Ok(report)
    }

    /// One action on an existing session. Missing, foreign, expired sessions and closed scopes
    /// all answer [`ExecError::AccessDenied`].
    pub async fn session_action(
        &self,
        scope: &ScopeId,
        req: SessionRequest,
    ) -> Result<SessionReport> {
        self.purge();
        let action = req.action.action();
        let wanted: &[GrantAction] = match &req.action {
            SessionAction::Read => &[GrantAction::Read],
            SessionAction::Wait { .. } => &[GrantAction::Wait],
            SessionAction::Status => &[GrantAction::Read, GrantAction::Wait],
            SessionAction::Write { .. } => &[GrantAction::Write],
            SessionAction::Interrupt => &[GrantAction::Interrupt],
            SessionAction::Kill { .. } => &[GrantAction::Kill],
        };
        let session_id = req.session_id.as_str();
        let session = self
            .authorize(scope, session_id, wanted)
            .ok_or(ExecError::AccessDenied)?;
        let cursor = self.resolve_cursor(scope, session_id, req.cursor)?;
        let mut detail = ActionDetail::default();
        match &req.action {
            SessionAction::Read => {}
            SessionAction::Status => {
                let st = session.state();
                return Ok(SessionReport::build(
                    &session, &st, action, None, cursor, &detail,
                ));
            }
            SessionAction::Wait { timeout } => {
                let reason = self
                    .wait_for_news(scope, &session, cursor, *timeout, wanted)
                    .await?;
                detail.wait_timeout_ms = Some(millis(*timeout));
                detail.wait_reason = Some(reason);
            }
            SessionAction::Write { input, close_stdin } => {
                let still_allowed = || self.authorize(scope, session_id, wanted).is_some();
                match session.write(input, *close_stdin, still_allowed).await {
                    Ok(written) => detail.written_bytes = Some(written),
                    Err(refusal) if refusal.written == 0 => return Err(refusal.error),
                    Err(refusal) => {
                        detail.written_bytes = Some(refusal.written);
                        detail.action_error = Some(refusal.error.to_string());
                    }
                }
            }
            SessionAction::Interrupt => {
                detail.signal = Some("SIGINT");
                detail.signal_sent = Some(session.interrupt());
            }
            SessionAction::Kill { signal } => {
                let (sent, escalated, converged) = session.terminate(signal.number()).await;
                detail.signal = Some(signal.name());
                detail.signal_sent = Some(sent);
                detail.kill_escalated = Some(escalated);
                if !converged {
                    detail.action_error = Some(
                        "the process group did not exit after SIGKILL; check again with status"
                            .into(),
                    );
                }
            }
        }
        if self.authorize(scope, session_id, wanted).is_none() {
            return Err(ExecError::AccessDenied);
        }
        if let Some(message) = detail.action_error.take() {
            detail.action_error = Some(clip_json_escaped(&message, 512).0);
        }
        let keep_report_on_page_error = matches!(
            req.action,
            SessionAction::Write { .. } | SessionAction::Interrupt | SessionAction::Kill { .. }
        );
        self.paged_report(
            scope,
            &session,
            action,
            cursor,
            page_size(req.max_bytes),
            &detail,
            keep_report_on_page_error,
        )
    }

    /// The sessions this scope owns or holds grants on, by session id.
    pub fn list(&self, scope: &ScopeId) -> Result<ListReport> {
        self.purge();
        let visible: Vec<(Arc<Session>, Option<Vec<GrantAction>>)> = {
            let mut st = self.lock();
            st.touch(scope.0);
            let Some(caller) = st.live_scope(scope.0) else {
                return Err(ExecError::AccessDenied);
            };
            let mut out = Vec::new();
            for session in st.sessions.values() {
                if st.live_scope(session.owner).is_none() {
                    continue;
                }
                if session.owner == scope.0 {
                    out.push((Arc::clone(session), None));
                } else if let Some(granted) = caller.grants.get(&session.id) {
                    out.push((Arc::clone(session), Some(granted.iter().copied().collect())));
                }
            }
            out
        };
        let mut sessions: Vec<ListedSession> = visible
            .into_iter()
            .map(|(session, granted)| {
                let st = session.state();
                let (command, command_truncated) = clip_json_escaped(&session.command, 256);
                ListedSession {
                    session_id: session.id.clone(),
                    access: if granted.is_some() {
                        Access::Granted
                    } else {
                        Access::Owner
                    },
                    granted_actions: granted,
                    command,
                    command_truncated,
                    pid: session.pid,
                    status: st.status,
                    exit_code: st.exit_code,
                    execution_outcome: st.status.outcome(st.exit_code),
                    use_pty: session.use_pty,
                    last_seq: st.log.last_seq(),
                    output_complete: st.output_complete(),
                }
            })
            .collect();
        sessions.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        let running = sessions
            .iter()
            .filter(|s| s.status == SessionStatus::Running)
            .count();
        Ok(ListReport {
            action: Action::List,
            success: true,
            execution_outcome: Outcome::Succeeded,
            count: sessions.len(),
            running,
            max_running_sessions: self.inner.limits.max_running_sessions,
            sessions,
        })
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
    ) -> Result<WaitReason> {
        let mut rx = session.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            rx.borrow_and_update();
            if self.authorize(scope, &session.id, wanted).is_none() {
                return Err(ExecError::AccessDenied);
            }
            {
                let st = session.state();
                if st.log.has_unread(cursor) {
                    return Ok(WaitReason::Output);
                }
                if st.status != SessionStatus::Running {
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
        requested: OutputCursor,
    ) -> Result<Cursor> {
        let offset = |o: u64| {
            usize::try_from(o)
                .map_err(|_| ExecError::InvalidCursor("since_offset is too large".into()))
        };
        match (requested.since_seq, requested.since_offset) {
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
            (None, Some(off)) if off != 0 => Err(ExecError::InvalidCursor(
                "a non-zero since_offset requires since_seq".into(),
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

    /// Builds the report with the largest page (≤ `max_bytes`) whose pretty JSON fits the
    /// report budget, and records the new cursor for this scope. When the action already
    /// happened (`keep_on_error`), a paging failure is reported inside the report as
    /// `output_error` with the cursor left unconsumed, so the caller reads instead of re-running.
    #[expect(
        clippy::too_many_arguments,
        reason = "one internal call shape shared by all actions"
    )]
    fn paged_report(
        &self,
        scope: &ScopeId,
        session: &Session,
        action: Action,
        cursor: Cursor,
        max_bytes: usize,
        detail: &ActionDetail,
        keep_on_error: bool,
    ) -> Result<SessionReport> {
        let budget = self.inner.limits.report_budget_chars;
        let st = session.state();
        let build = |limit: usize| -> std::result::Result<(SessionReport, Page), PageError> {
            let page = st.log.page(cursor, limit)?;
            let report = SessionReport::build(session, &st, action, Some(&page), cursor, detail);
            Ok((report, page))
        };
        let fitted = match build(max_bytes) {
            Ok((report, page)) if pretty_json_chars(&report) <= budget => Ok((report, page)),
            Ok(_) => {
                let (mut lo, mut hi, mut best) = (1usize, max_bytes.saturating_sub(1), None);
                while lo <= hi {
                    let mid = lo + (hi - lo) / 2;
                    match build(mid) {
                        Ok((report, page)) if pretty_json_chars(&report) <= budget => {
                            best = Some((report, page));
                            lo = mid + 1;
                        }
                        _ => hi = mid - 1,
                    }
                }
                best.ok_or(PageError::LimitTooSmall { minimum: max_bytes })
            }
            Err(err) => Err(err),
        };
        match fitted {
            Ok((report, page)) => {
                drop(st);
                if let Some(rec) = self.lock().scopes.get_mut(&scope.0) {
                    rec.cursors
                        .insert(session.id.clone(), (page.until_seq, page.until_offset));
                }
                Ok(report)
            }
            Err(err) if keep_on_error => {
                let err = ExecError::from(err);
                let mut report = SessionReport::build(session, &st, action, None, cursor, detail);
                report.output_error = Some(OutputError {
                    code: err.code(),
                    message: err.to_string(),
                    minimum_read_bytes: err.minimum_read_bytes(),
                });
                Ok(report)
            }
            Err(err) => Err(err.into()),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
