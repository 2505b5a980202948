//! One session actor (a tokio task) per live `(user, session_id)`: it owns the transcript and the
//! plan, runs turns one at a time from a bounded FIFO queue, and emits [`Event`]s to whoever
//! submitted the turn. Stop goes around the queue so it reaches the running turn at once.

use crate::agent::Services;
use crate::error::{CoreError, Result};
use crate::review::{ReviewCounters, RunningReview};
use crate::tools::SessionState;
use crate::turn::{TurnInput, run_turn};
use chrono::{DateTime, Utc};
use mpa_protocol::{Actor, Event, Message, UserId};
use mpa_store::Chat;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The state a session actor owns.
pub struct SessionData {
    pub session_id: String,
    /// The original owner; continuing as an admin never changes it.
    pub owner: UserId,
    pub channel: String,
    pub title: String,
    pub created_at: DateTime<Utc>,
    pub messages: Vec<Message>,
    pub state: Arc<Mutex<SessionState>>,
    pub review_counters: ReviewCounters,
}

impl SessionData {
    pub fn new(session_id: &str, owner: UserId, channel: &str) -> Self {
        Self {
            session_id: session_id.to_string(),
            owner,
            channel: channel.to_string(),
            title: String::new(),
            created_at: Utc::now(),
            messages: Vec::new(),
            state: Arc::new(Mutex::new(SessionState::default())),
            review_counters: ReviewCounters::default(),
        }
    }

    pub fn from_chat(chat: Chat) -> Self {
        Self {
            session_id: chat.session_id,
            owner: chat.user_id,
            channel: chat.channel,
            title: chat.title,
            created_at: chat.created_at,
            messages: chat.agent_messages,
            // The plan is restored from the newest snapshot at the start of the next turn.
            state: Arc::new(Mutex::new(SessionState::default())),
            review_counters: ReviewCounters::default(),
        }
    }
}

enum Command {
    Turn {
        input: TurnInput,
        events: mpsc::UnboundedSender<Event>,
    },
    Close,
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
    tx: mpsc::Sender<Command>,
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
    mut rx: mpsc::Receiver<Command>,
    shared: Arc<Shared>,
) {
    let mut review: Option<RunningReview> = None;
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
        match cmd {
            Command::Turn { input, events } => {
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
                let actor = input.actor.clone();
                let outcome = run_turn(&services, &mut data, input, &events, cancel).await;
                if let Some(start) = outcome.review {
                    let reviewing = shared.reviewing.clone();
                    reviewing.send_replace(true);
                    review = Some(crate::review::spawn(
                        Arc::clone(&services),
                        actor,
                        data.session_id.clone(),
                        start.system,
                        start.messages,
                        start.due,
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
            Command::Close => break,
        }
    }
    if let Some(r) = review.take() {
        r.cancel().await;
        shared.reviewing.send_replace(false);
    }
    // Closing the session seals its terminal scope and terminates only what it owns.
    let scope = data.state.lock().ok().and_then(|mut s| s.exec_scope.take());
    if let (Some(scope), Some(exec)) = (scope, &services.caps.exec) {
        let report = exec.close_scope(&scope).await;
        if !report.is_complete() {
            tracing::warn!(session = %data.session_id, "terminal scope did not fully close");
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

    /// Queues a turn. The receiver gets exactly this turn's events, ending with `TurnEnded`.
    /// Dropping the receiver does not stop the turn.
    pub fn submit(
        &self,
        actor: Actor,
        text: String,
        images: Vec<String>,
    ) -> Result<mpsc::UnboundedReceiver<Event>> {
        if self.shared.closing.load(Ordering::SeqCst) {
            return Err(CoreError::SessionClosed);
        }
        let (etx, erx) = mpsc::unbounded_channel();
        let cmd = Command::Turn {
            input: TurnInput {
                actor,
                text,
                images,
            },
            events: etx,
        };
        match self.tx.try_send(cmd) {
            Ok(()) => Ok(erx),
            Err(mpsc::error::TrySendError::Full(_)) => Err(CoreError::QueueFull {
                capacity: self.tx.max_capacity(),
            }),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(CoreError::SessionClosed),
        }
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
        let _ = self.tx.send(Command::Close).await;
        let task = self.shared.task.lock().await.take();
        if let Some(t) = task {
            let _ = t.await;
        }
    }
}
