//! One session actor (a tokio task) per live `(user, session_id)`: it owns the transcript and the
//! plan, runs turns one at a time from a bounded FIFO queue, and emits [`Event`]s to whoever
//! submitted the turn. Stop goes around the queue so it reaches the running turn at once.

pub mod data;
pub mod recovery;

use crate::error::{CoreError, Result};
use crate::review::RunningReview;
use crate::services::Services;
use crate::turn::{StopCause, TurnInput, run_turn};
pub use data::{PersistedState, SessionData};
use mpa_protocol::{Actor, Event, Op, UserId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What the actor's queue carries: a client's [`Op`], who sent it, and where this op's events go.
struct Submission {
    actor: Option<Actor>,
    op: Op,
    events: Option<mpsc::UnboundedSender<Event>>,
}

struct Shared {
    session_id: String,
    owner: UserId,
    processing: AtomicBool,
    /// Set by shutdown: queued turns are answered without running, new ones are refused.
    closing: AtomicBool,
    current: Mutex<Option<CancellationToken>>,
    task: tokio::sync::Mutex<Option<JoinHandle<()>>>,
    /// True while a background review runs.
    reviewing: tokio::sync::watch::Sender<bool>,
    /// True once the actor has ended (its last snapshot written, its terminals closed).
    finished: tokio::sync::watch::Sender<bool>,
}

#[derive(Clone)]
pub struct SessionHandle {
    tx: mpsc::Sender<Submission>,
    shared: Arc<Shared>,
}

pub(crate) fn spawn_session(services: Arc<Services>, data: SessionData) -> SessionHandle {
    let (tx, rx) = mpsc::channel(services.cfg.queue_capacity.max(1));
    let shared = Arc::new(Shared {
        session_id: data.session_id.clone(),
        owner: data.owner.clone(),
        processing: AtomicBool::new(false),
        closing: AtomicBool::new(false),
        current: Mutex::new(None),
        task: tokio::sync::Mutex::new(None),
        reviewing: tokio::sync::watch::Sender::new(false),
        finished: tokio::sync::watch::Sender::new(false),
    });
    let task = tokio::spawn(actor_loop(services, data, rx, Arc::clone(&shared)));
    if let Ok(mut slot) = shared.task.try_lock() {
        *slot = Some(task);
    }
    SessionHandle { tx, shared }
}

async fn actor_loop(
    services: Arc<Services>,
    mut data: SessionData,
    mut rx: mpsc::Receiver<Submission>,
    shared: Arc<Shared>,
) {
    let mut review: Option<RunningReview> = None;
    let mut closed_by_request = false;
    let idle = services.cfg.session_idle;
    loop {
        let cmd = match tokio::time::timeout(idle, rx.recv()).await {
            Ok(Some(cmd)) => cmd,
            Ok(None) => break,
            Err(_) => {
                if review.as_ref().is_some_and(|r| !r.is_finished()) {
                    continue;
                }
                // Idle: refuse new work and finish what is already queued; the session is
                // loaded again from its snapshot on next use.
                rx.close();
                continue;
            }
        };
        let (actor, text, images, client_context, events) = match cmd.op {
            Op::UserInput {
                text,
                images,
                client_context,
            } => match (cmd.actor, cmd.events) {
                (Some(actor), Some(events)) => (actor, text, images, client_context, events),
                _ => continue,
            },
            // A stop never waits in the queue (see `SessionHandle::send`).
            Op::Stop => continue,
            Op::Close => {
                closed_by_request = true;
                break;
            }
        };
        if shared.closing.load(Ordering::SeqCst) {
            let _ = events.send(Event::Error {
                code: CoreError::SessionClosed.code().into(),
                message: "the host is shutting down; this message was not processed".into(),
            });
            let _ = events.send(Event::TurnEnded {
                status: mpa_protocol::TurnStatus::Stopped,
                final_text: String::new(),
            });
            continue;
        }
        let cancel = CancellationToken::new();
        if let Ok(mut cur) = shared.current.lock() {
            *cur = Some(cancel.clone());
        }
        shared.processing.store(true, Ordering::SeqCst);
        // Self-improvement never blocks a user-facing turn: cancel, wait at most 2 s.
        if let Some(r) = review.take() {
            if !r.is_finished() {
                r.cancel().await;
            }
            shared.reviewing.send_replace(false);
        }
        let input = TurnInput {
            actor: actor.clone(),
            text,
            images,
            client_context,
        };
        let closing = Arc::clone(&shared);
        let stop_cause = move || {
            if closing.closing.load(Ordering::SeqCst) {
                StopCause::Shutdown
            } else {
                StopCause::User
            }
        };
        // A conversation recovered from a killed turn first learns which writes are unresolved.
        recovery::annotate(&services.store, &actor, &mut data).await;
        let outcome = run_turn(&services, &mut data, input, &events, cancel, stop_cause).await;
        if let Some(start) = outcome.review {
            let reviewing = shared.reviewing.clone();
            reviewing.send_replace(true);
            review = Some(crate::review::spawn(
                Arc::clone(&services),
                actor,
                data.session_id.clone(),
                start,
                Box::new(move || {
                    reviewing.send_replace(false);
                }),
            ));
        }
        shared.processing.store(false, Ordering::SeqCst);
        if let Ok(mut cur) = shared.current.lock() {
            *cur = None;
        }
    }
    if let Some(r) = review.take() {
        r.cancel().await;
        shared.reviewing.send_replace(false);
    }
    // The terminal scope belongs to the conversation: an actor reclaimed for idleness leaves it
    // running (the next actor finds it again); a requested close — the chat is deleted, or the
    // host shuts down — seals it and terminates only what it owns.
    if closed_by_request && let Some(exec) = &services.caps.exec {
        // The owner's scope, found by owner and label even when this actor never used it, plus
        // one an admin opened in this session (tools run as the admin there).
        let mut scopes = vec![exec.open_scope(mpa_exec::ScopeOwner {
            user_key: mpa_redact::UserKey::for_user(&data.owner),
            label: crate::tools::execute_command::scope_label(&data.session_id),
        })];
        if let Some(s) = data.tools.lock().ok().and_then(|mut s| s.exec_scope.take())
            && !scopes.contains(&s)
        {
            scopes.push(s);
        }
        for scope in scopes {
            let report = exec.close_scope(&scope).await;
            if !report.is_complete() {
                tracing::warn!(session = %data.session_id, "terminal scope did not fully close");
            }
        }
    }
    shared.finished.send_replace(true);
}

impl SessionHandle {
    pub fn session_id(&self) -> &str {
        &self.shared.session_id
    }

    pub fn owner(&self) -> &UserId {
        &self.shared.owner
    }

    pub fn is_processing(&self) -> bool {
        self.shared.processing.load(Ordering::SeqCst)
    }

    /// Sends a client's op: `UserInput` queues a turn (the receiver gets exactly that turn's
    /// events, ending with `TurnEnded`; dropping it does not stop the turn), `Stop` goes around
    /// the queue to the running turn, `Close` ends the actor after the queued turns.
    pub fn send(&self, actor: &Actor, op: Op) -> Result<Option<mpsc::UnboundedReceiver<Event>>> {
        match op {
            Op::Stop => {
                self.stop();
                Ok(None)
            }
            Op::Close => {
                let _ = self.tx.try_send(Submission {
                    actor: None,
                    op: Op::Close,
                    events: None,
                });
                Ok(None)
            }
            op @ Op::UserInput { .. } => {
                if self.shared.closing.load(Ordering::SeqCst) {
                    return Err(CoreError::SessionClosed);
                }
                let (etx, erx) = mpsc::unbounded_channel();
                let sub = Submission {
                    actor: Some(actor.clone()),
                    op,
                    events: Some(etx),
                };
                match self.tx.try_send(sub) {
                    Ok(()) => Ok(Some(erx)),
                    Err(mpsc::error::TrySendError::Full(_)) => Err(CoreError::QueueFull {
                        capacity: self.tx.max_capacity(),
                    }),
                    Err(mpsc::error::TrySendError::Closed(_)) => Err(CoreError::SessionClosed),
                }
            }
        }
    }

    /// Queues a turn (`Op::UserInput`) and returns its event stream.
    pub fn submit(
        &self,
        actor: Actor,
        text: String,
        images: Vec<String>,
    ) -> Result<mpsc::UnboundedReceiver<Event>> {
        self.send(
            &actor,
            Op::UserInput {
                text,
                images,
                client_context: None,
            },
        )?
        .ok_or(CoreError::SessionClosed)
    }

    /// Stops the running turn: its model call is cancelled and no further tool call is dispatched.
    /// Returns whether a turn was running.
    pub fn stop(&self) -> bool {
        match self.shared.current.lock() {
            Ok(cur) => match cur.as_ref() {
                Some(token) => {
                    token.cancel();
                    true
                }
                None => false,
            },
            Err(_) => false,
        }
    }

    /// Waits until no turn is running and no background review is running (or `limit` passes);
    /// returns whether the session became idle.
    pub async fn wait_idle(&self, limit: std::time::Duration) -> bool {
        let mut rx = self.shared.reviewing.subscribe();
        tokio::time::timeout(limit, async {
            loop {
                if !self.is_processing() && !*rx.borrow_and_update() {
                    return;
                }
                tokio::select! {
                    _ = rx.changed() => {}
                    _ = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
                }
            }
        })
        .await
        .is_ok()
    }

    /// Whether the actor has stopped taking turns (idle reclamation or close).
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Whether the actor has ended (after closing, it may still be running queued turns).
    pub fn is_finished(&self) -> bool {
        *self.shared.finished.borrow()
    }

    /// Waits until the actor has ended.
    pub async fn finished(&self) {
        let mut rx = self.shared.finished.subscribe();
        let _ = rx.wait_for(|done| *done).await;
    }

    /// Whether two handles drive the same actor.
    pub fn same_actor(&self, other: &SessionHandle) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shared.closing.load(Ordering::SeqCst)
    }

    /// Marks the session as shutting down: queued turns will not run and new ones are refused.
    pub fn begin_shutdown(&self) {
        self.shared.closing.store(true, Ordering::SeqCst);
    }

    /// Lets queued turns finish, then ends the actor and waits for it.
    pub async fn close(&self) {
        let _ = self
            .tx
            .send(Submission {
                actor: None,
                op: Op::Close,
                events: None,
            })
            .await;
        let task = self.shared.task.lock().await.take();
        if let Some(t) = task {
            let _ = t.await;
        }
    }
}
