//! One session's subagent controller (spec runtime.md §8.1, §8.3): the tasks it owns, the limits
//! (8 per submission, 8 active, 4 executing), waiting, cancelling with a grace period, and the
//! seal. It lives in a slot of the session state, so every turn of the conversation finds the
//! same one; a child runs on a task of its own and outlives the tool call that started it, never
//! the turn (the turn end drains it, [`Controller::drain`]).

use serde::Serialize;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

pub const MAX_TASKS_PER_SUBMISSION: usize = 8;
pub const MAX_ACTIVE_TASKS: usize = 8;
pub const MAX_CONCURRENT_TASKS: usize = 4;
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);
pub const RESULT_CLIP: usize = 12_000;
pub const DESCRIPTION_CLIP: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// A task as the model reads it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    pub task_id: String,
    pub subagent_type: String,
    pub status: TaskStatus,
    pub description: String,
    pub description_truncated: bool,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How a child's run ended.
#[derive(Debug, Clone)]
pub enum ChildEnd {
    Completed(String),
    Failed(String),
    Cancelled,
}

/// Why the controller takes no new tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seal {
    /// A turn ended with tasks that did not stop within the grace period; the controller keeps
    /// them (and takes nothing new) until they have.
    Unconverged(Vec<String>),
    /// The conversation was closed.
    Closed,
    /// The host is shutting down.
    ShutDown,
}

impl Seal {
    pub fn message(&self) -> String {
        match self {
            Seal::Unconverged(ids) => format!(
                "the subagent controller is sealed: {} did not stop within the cancel grace \
                 period and still belong to this conversation; no new subagent can start until \
                 they have ended. Do the work yourself or tell the user.",
                ids.join(", ")
            ),
            Seal::Closed => "the conversation was closed; no subagent can start in it".into(),
            Seal::ShutDown => "the host is shutting down; no subagent can start".into(),
        }
    }
}

struct Record {
    view: TaskView,
    cancel: CancellationToken,
    cancel_requested: bool,
    /// Its task has ended (a cancelled child that has not is still running).
    converged: bool,
    /// Its final state was in a reply to the model already.
    reported: bool,
}

#[derive(Default)]
struct State {
    tasks: Vec<Record>,
    seal: Option<Seal>,
}

struct Inner {
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    executing: Arc<Semaphore>,
    grace: Duration,
}

/// A session's controller. Cheap to clone.
#[derive(Clone)]
pub struct Controller(Arc<Inner>);

/// A controller that does not keep its session's tasks alive (the host's list for shutdown).
#[derive(Clone)]
pub struct WeakController(std::sync::Weak<Inner>);

impl WeakController {
    pub fn upgrade(&self) -> Option<Controller> {
        self.0.upgrade().map(Controller)
    }
}

/// The session slot holding the controller (created on first use).
#[derive(Default)]
pub struct ControllerSlot(pub Option<Controller>);

/// Which tasks an empty selection means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implied {
    /// Every task (`status`).
    All,
    /// Every task still running (`cancel`).
    Active,
    /// Every task still running or whose end the model has not been told yet (`wait`).
    Unreported,
}

/// Which tasks an action is about: the named ones (and which of those are unknown), or, for an
/// empty selection, the [`Implied`] ones.
pub struct Selection {
    pub ids: Vec<String>,
    pub missing: Vec<String>,
}

/// What a wait ended with.
pub struct Waited {
    pub tasks: Vec<TaskView>,
    pub timed_out: bool,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The first `max` characters of `text`, and whether it was cut.
pub fn clip(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (text[..at].to_string(), true),
        None => (text.to_string(), false),
    }
}

pub fn new_task_id() -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("subagent-{}", &hex[..12])
}

impl Controller {
    pub fn new(grace: Duration) -> Self {
        Controller(Arc::new(Inner {
            state: Mutex::new(State::default()),
            changed: watch::channel(0).0,
            executing: Arc::new(Semaphore::new(MAX_CONCURRENT_TASKS)),
            grace,
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change is one assignment; a panicking holder left a whole state.
        self.0
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn notify(&self) {
        self.0.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    pub fn downgrade(&self) -> WeakController {
        WeakController(Arc::downgrade(&self.0))
    }

    pub fn grace(&self) -> Duration {
        self.0.grace
    }

    /// Why nothing new may start, if so. A controller sealed by unconverged tasks opens again
    /// once they have all ended.
    pub fn seal(&self) -> Option<Seal> {
        let mut st = self.lock();
        if let Some(Seal::Unconverged(ids)) = &st.seal {
            let open = ids.iter().all(|id| {
                st.tasks
                    .iter()
                    .any(|t| &t.view.task_id == id && t.converged)
            });
            if open {
                st.seal = None;
            }
        }
        st.seal.clone()
    }

    /// Admits `descriptions` as pending tasks, all or none: refused when sealed, when the
    /// submission holds more than 8, or when more than 8 would be active.
    pub fn admit(
        &self,
        profile: &str,
        descriptions: &[String],
    ) -> Result<Vec<(String, CancellationToken)>, (&'static str, String)> {
        if let Some(seal) = self.seal() {
            return Err(("subagent_controller_sealed", seal.message()));
        }
        if descriptions.is_empty() {
            return Err((
                "invalid_arguments",
                "give a description (or tasks with descriptions) to start".into(),
            ));
        }
        if descriptions.len() > MAX_TASKS_PER_SUBMISSION {
            return Err((
                "too_many_tasks",
                format!(
                    "{} tasks in one submission; at most {MAX_TASKS_PER_SUBMISSION}",
                    descriptions.len()
                ),
            ));
        }
        let mut st = self.lock();
        let active = st.tasks.iter().filter(|t| !t.converged).count();
        if active + descriptions.len() > MAX_ACTIVE_TASKS {
            return Err((
                "too_many_active_tasks",
                format!(
                    "{active} subagent tasks are active and {} more were asked for; at most \
                     {MAX_ACTIVE_TASKS} may be active — wait for or cancel some first",
                    descriptions.len()
                ),
            ));
        }
        let created_at = now();
        let admitted: Vec<(String, CancellationToken)> = descriptions
            .iter()
            .map(|d| {
                let id = new_task_id();
                let cancel = CancellationToken::new();
                let (description, description_truncated) = clip(d, DESCRIPTION_CLIP);
                st.tasks.push(Record {
                    view: TaskView {
                        task_id: id.clone(),
                        subagent_type: profile.to_string(),
                        status: TaskStatus::Pending,
                        description,
                        description_truncated,
                        created_at: created_at.clone(),
                        started_at: None,
                        finished_at: None,
                        result: None,
                        result_truncated: None,
                        error: None,
                    },
                    cancel: cancel.clone(),
                    cancel_requested: false,
                    converged: false,
                    reported: false,
                });
                (id, cancel)
            })
            .collect();
        drop(st);
        self.notify();
        Ok(admitted)
    }

    /// Withdraws admitted tasks that were never spawned (their setup failed).
    pub fn withdraw(&self, ids: &[String]) {
        self.lock().tasks.retain(|t| !ids.contains(&t.view.task_id));
        self.notify();
    }

    /// Runs task `id`: it waits for one of the executing places (4), then `work`, and records
    /// how it ended. A cancel before it got a place ends it without running.
    pub fn spawn(
        &self,
        id: String,
        cancel: CancellationToken,
        work: impl Future<Output = ChildEnd> + Send + 'static,
    ) {
        let this = self.clone();
        tokio::spawn(async move {
            let permit = tokio::select! {
                biased;
                _ = cancel.cancelled() => None,
                p = Arc::clone(&this.0.executing).acquire_owned() => p.ok(),
            };
            let end = match permit {
                None => ChildEnd::Cancelled,
                Some(permit) => {
                    this.update(&id, |v| {
                        v.status = TaskStatus::Running;
                        v.started_at = Some(now());
                    });
                    let end = work.await;
                    drop(permit);
                    end
                }
            };
            this.finish(&id, end);
        });
    }

    fn update(&self, id: &str, f: impl FnOnce(&mut TaskView)) {
        if let Some(t) = self.lock().tasks.iter_mut().find(|t| t.view.task_id == id) {
            f(&mut t.view);
        }
        self.notify();
    }

    fn finish(&self, id: &str, end: ChildEnd) {
        {
            let mut st = self.lock();
            if let Some(t) = st.tasks.iter_mut().find(|t| t.view.task_id == id) {
                let v = &mut t.view;
                v.finished_at = Some(now());
                // A child cancelled by its parent ends cancelled, whatever it managed to say.
                let end = if t.cancel_requested {
                    ChildEnd::Cancelled
                } else {
                    end
                };
                match end {
                    ChildEnd::Completed(text) => {
                        let (result, cut) = clip(&text, RESULT_CLIP);
                        v.status = TaskStatus::Completed;
                        v.result = Some(result);
                        v.result_truncated = Some(cut);
                    }
                    ChildEnd::Failed(error) => {
                        v.status = TaskStatus::Failed;
                        v.error = Some(error);
                    }
                    ChildEnd::Cancelled => {
                        v.status = TaskStatus::Cancelled;
                        v.error = Some("cancelled by the main agent".into());
                    }
                }
                t.converged = true;
            }
        }
        self.notify();
    }

    /// The selection for `requested` ids; empty means the `implied` ones.
    pub fn select(&self, requested: &[String], implied: Implied) -> Selection {
        let st = self.lock();
        if requested.is_empty() {
            return Selection {
                ids: st
                    .tasks
                    .iter()
                    .filter(|t| match implied {
                        Implied::All => true,
                        Implied::Active => !t.converged,
                        Implied::Unreported => !t.converged || !t.reported,
                    })
                    .map(|t| t.view.task_id.clone())
                    .collect(),
                missing: Vec::new(),
            };
        }
        let mut sel = Selection {
            ids: Vec::new(),
            missing: Vec::new(),
        };
        for id in requested {
            if sel.ids.contains(id) || sel.missing.contains(id) {
                continue;
            }
            if st.tasks.iter().any(|t| &t.view.task_id == id) {
                sel.ids.push(id.clone());
            } else {
                sel.missing.push(id.clone());
            }
        }
        sel
    }

    /// The tasks of `ids` as a reply shows them; the ended ones count as reported.
    pub fn views(&self, ids: &[String]) -> Vec<TaskView> {
        let mut st = self.lock();
        ids.iter()
            .filter_map(|id| {
                let t = st.tasks.iter_mut().find(|t| &t.view.task_id == id)?;
                if t.converged {
                    t.reported = true;
                }
                Some(t.view.clone())
            })
            .collect()
    }

    fn all_converged(&self, ids: &[String]) -> bool {
        let st = self.lock();
        ids.iter().all(|id| {
            st.tasks
                .iter()
                .find(|t| &t.view.task_id == id)
                .is_none_or(|t| t.converged)
        })
    }

    fn any_converged(&self, ids: &[String]) -> bool {
        let st = self.lock();
        ids.iter().any(|id| {
            st.tasks
                .iter()
                .find(|t| &t.view.task_id == id)
                .is_some_and(|t| t.converged)
        })
    }

    /// Waits until every task of `ids` (`any`: one of them) has ended, `timeout` passed, or
    /// `cancel` fired.
    pub async fn wait(
        &self,
        ids: &[String],
        any: bool,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Waited {
        let done = |c: &Controller| {
            ids.is_empty()
                || if any {
                    c.any_converged(ids)
                } else {
                    c.all_converged(ids)
                }
        };
        let reached = self.until(timeout, cancel, done).await;
        Waited {
            tasks: self.views(ids),
            timed_out: !reached,
        }
    }

    /// Polls `done` at every change until it holds (true), or the deadline or `cancel` (false).
    async fn until(
        &self,
        timeout: Duration,
        cancel: &CancellationToken,
        done: impl Fn(&Controller) -> bool,
    ) -> bool {
        let mut changed = self.0.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            changed.borrow_and_update();
            if done(self) {
                return true;
            }
            tokio::select! {
                r = changed.changed() => if r.is_err() { return done(self) },
                _ = tokio::time::sleep_until(deadline) => return done(self),
                _ = cancel.cancelled() => return done(self),
            }
        }
    }

    /// Cancels the active tasks of `ids` without waiting; returns them.
    pub fn cancel_now(&self, ids: &[String]) -> Vec<String> {
        let mut st = self.lock();
        st.tasks
            .iter_mut()
            .filter(|t| ids.contains(&t.view.task_id) && !t.converged)
            .map(|t| {
                t.cancel_requested = true;
                t.cancel.cancel();
                t.view.task_id.clone()
            })
            .collect()
    }

    /// Cancels the active tasks of `ids` and waits up to the grace period for them to end.
    /// Returns the ids that did not.
    pub async fn cancel(&self, ids: &[String]) -> Vec<String> {
        let targets = self.cancel_now(ids);
        let never = CancellationToken::new();
        self.until(self.0.grace, &never, |c| c.all_converged(&targets))
            .await;
        let st = self.lock();
        targets
            .into_iter()
            .filter(|id| {
                st.tasks
                    .iter()
                    .any(|t| &t.view.task_id == id && !t.converged)
            })
            .collect()
    }

    /// The end of a parent turn: every unfinished task is cancelled with the grace period; the
    /// ones that do not end seal the controller (they stay its own; nothing stacks on them).
    pub async fn drain(&self) {
        let active = self.select(&[], Implied::Active).ids;
        if active.is_empty() {
            return;
        }
        let stuck = self.cancel(&active).await;
        if !stuck.is_empty() {
            tracing::warn!(tasks = ?stuck, "subagents did not stop within the grace period");
            let mut st = self.lock();
            if st.seal.is_none() {
                st.seal = Some(Seal::Unconverged(stuck));
            }
        }
    }

    /// Seals for good (the conversation closed, the host shutting down) and cancels every task,
    /// without waiting.
    pub fn seal_for_good(&self, seal: Seal) {
        let mut st = self.lock();
        st.seal = Some(seal);
        for t in st.tasks.iter_mut().filter(|t| !t.converged) {
            t.cancel_requested = true;
            t.cancel.cancel();
        }
    }

    /// Seals for good and waits up to the grace period for the tasks to end.
    pub async fn close(&self, seal: Seal) {
        self.seal_for_good(seal);
        let active = self.select(&[], Implied::Active).ids;
        let never = CancellationToken::new();
        self.until(self.0.grace, &never, |c| c.all_converged(&active))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptions(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("task {i}")).collect()
    }

    #[tokio::test]
    async fn limits_per_submission_and_active_refuse_the_whole_submission() {
        let c = Controller::new(Duration::from_millis(50));
        let err = c.admit("general-purpose", &descriptions(9)).unwrap_err();
        assert_eq!(err.0, "too_many_tasks");
        let first = c.admit("general-purpose", &descriptions(6)).unwrap();
        assert_eq!(first.len(), 6);
        assert!(
            first
                .iter()
                .all(|(id, _)| id.len() == "subagent-".len() + 12)
        );
        let err = c.admit("general-purpose", &descriptions(3)).unwrap_err();
        assert_eq!(err.0, "too_many_active_tasks");
        // Nothing of the refused submission was kept.
        assert_eq!(c.select(&[], Implied::All).ids.len(), 6);
        let long = "字".repeat(600);
        let (id, _) = c.admit("general-purpose", &[long]).unwrap().remove(0);
        let v = &c.views(&[id])[0];
        assert_eq!(v.description.chars().count(), DESCRIPTION_CLIP);
        assert!(v.description_truncated);
        assert_eq!(v.status, TaskStatus::Pending);
    }

    #[tokio::test]
    async fn a_drained_controller_whose_tasks_end_takes_tasks_again() {
        let c = Controller::new(Duration::from_secs(5));
        let (id, cancel) = c
            .admit("general-purpose", &descriptions(1))
            .unwrap()
            .remove(0);
        let token = cancel.clone();
        c.spawn(id.clone(), cancel, async move {
            token.cancelled().await;
            ChildEnd::Failed("stopped".into())
        });
        c.drain().await;
        assert_eq!(c.seal(), None);
        let v = &c.views(std::slice::from_ref(&id))[0];
        assert_eq!(v.status, TaskStatus::Cancelled);
        assert!(v.finished_at.is_some());
        assert!(c.admit("general-purpose", &descriptions(1)).is_ok());
    }

    #[tokio::test]
    async fn closing_seals_for_good_and_cancels_running_children() {
        let c = Controller::new(Duration::from_secs(5));
        let (id, cancel) = c
            .admit("general-purpose", &descriptions(1))
            .unwrap()
            .remove(0);
        let token = cancel.clone();
        c.spawn(id.clone(), cancel, async move {
            token.cancelled().await;
            ChildEnd::Cancelled
        });
        c.close(Seal::Closed).await;
        assert_eq!(c.views(&[id])[0].status, TaskStatus::Cancelled);
        // Every task ended, and still nothing new starts.
        let err = c.admit("general-purpose", &descriptions(1)).unwrap_err();
        assert_eq!(err.0, "subagent_controller_sealed");
        assert!(err.1.contains("closed"), "{}", err.1);
    }

    #[tokio::test]
    async fn a_long_result_is_clipped_and_marked() {
        let c = Controller::new(Duration::from_secs(5));
        let (id, cancel) = c
            .admit("general-purpose", &descriptions(1))
            .unwrap()
            .remove(0);
        c.spawn(id.clone(), cancel, async {
            ChildEnd::Completed("x".repeat(RESULT_CLIP + 5))
        });
        let never = CancellationToken::new();
        let w = c
            .wait(
                std::slice::from_ref(&id),
                false,
                Duration::from_secs(30),
                &never,
            )
            .await;
        assert!(!w.timed_out);
        let v = &w.tasks[0];
        assert_eq!(v.result.as_ref().map(String::len), Some(RESULT_CLIP));
        assert_eq!(v.result_truncated, Some(true));
    }
}
