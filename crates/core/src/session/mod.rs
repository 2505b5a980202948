//! One session actor (a tokio task) per live `(user, session_id)`: it owns the transcript and the
//! plan, runs turns one at a time from a bounded FIFO queue, and emits [`Event`]s to whoever
//! submitted the turn. Stop goes around the queue so it reaches the running turn at once; it
//! also discards the turns queued before it. A message sent while its user's turn runs goes
//! around the queue too, into the [`steering`] inbox the running turn reads at its next model
//! call.

pub mod data;
pub mod recovery;
pub mod steering;

use crate::error::{CoreError, Result};
use crate::review::{ReviewReport, ReviewState, RunningReview};
use crate::services::Services;
use crate::sync::lock;
use crate::turn::{StopCause, TurnInput, run_turn};
pub use data::{PersistedState, SessionData, StateLost};
use mpa_protocol::{Actor, Event, Op, UserId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What the actor's queue carries: a client's turn, who sent it, and where its events go. Boxed
/// in the queue: its channel reserves a block of slots up front for every live session, and a
/// pointer per slot is all an idle one should pay for.
struct Submission {
    actor: Actor,
    op: Op,
    events: mpsc::UnboundedSender<Event>,
    /// The stops counted when it was queued: a stop after that discards it.
    stops: u64,
    /// When it was queued (the queue wait of §14.4's session status).
    queued_at: std::time::Instant,
}

/// What a message sent with [`SessionHandle::steer`] became.
#[derive(Debug)]
pub enum Steered {
    /// In the running turn's inbox: `event` is the `queued` acknowledgement; `applied` (or
    /// `discarded`, after a stop) follows on the running turn's own stream.
    Queued { event: Event, message_id: String },
    /// No turn of this user could take it (none running, another user's, stopped, or a full
    /// inbox): queued as an ordinary turn, whose events these are.
    Turn(mpsc::UnboundedReceiver<Event>),
}

/// The live sessions of an agent, by id; an actor removes its own entry when it ends.
/// The error code a queued turn gets when a stop discarded it before it started.
pub const DISCARDED_BY_STOP: &str = "discarded_by_stop";

pub(crate) type LiveSessions = Mutex<HashMap<String, SessionHandle>>;

struct Shared {
    session_id: String,
    owner: UserId,
    processing: AtomicBool,
    /// Set by shutdown: queued turns are answered without running, new ones are refused.
    closing: AtomicBool,
    /// A close was requested: the actor takes no new turns, finishes the queued ones and ends.
    /// Goes around the queue, so a full queue can never drop it.
    close: Notify,
    current: Mutex<Option<CancellationToken>>,
    /// Stops so far; a queued turn from before the latest one is discarded unrun.
    stops: AtomicU64,
    /// Messages for the running turn (spec runtime.md §2).
    steering: steering::SteeringInbox,
    task: tokio::sync::Mutex<Option<JoinHandle<()>>>,
    /// The background review: running, or how the last one ended.
    review: tokio::sync::watch::Sender<ReviewState>,
    /// True once the actor has ended (its last snapshot written, its terminals closed).
    finished: tokio::sync::watch::Sender<bool>,
    /// Messages refused because the queue was full.
    queue_rejections: AtomicU64,
    /// How long the latest turn waited in the queue, in milliseconds.
    last_queue_wait_ms: AtomicU64,
}

/// The session status fields of spec runtime.md §14.4, as the session detail shows them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QueueStatus {
    pub is_processing: bool,
    pub pending_messages: usize,
    pub queue_capacity: usize,
    pub queue_saturated: bool,
    pub queue_rejections: u64,
    pub last_queue_wait_ms: u64,
    pub shutdown_pending: bool,
    pub steering_pending: usize,
    /// A turn is running that takes steering messages at its next model call.
    pub steering_active: bool,
}

impl QueueStatus {
    /// The status of a session with no live actor (idle, nothing queued) on a host whose queues
    /// hold `queue_capacity`.
    pub fn idle(queue_capacity: usize) -> Self {
        Self {
            is_processing: false,
            pending_messages: 0,
            queue_capacity,
            queue_saturated: false,
            queue_rejections: 0,
            last_queue_wait_ms: 0,
            shutdown_pending: false,
            steering_pending: 0,
            steering_active: false,
        }
    }
}

#[derive(Clone)]
pub struct SessionHandle {
    tx: mpsc::Sender<Box<Submission>>,
    shared: Arc<Shared>,
}

pub(crate) fn spawn_session(
    services: Arc<Services>,
    data: SessionData,
    live: Weak<LiveSessions>,
) -> SessionHandle {
    let (tx, rx) = mpsc::channel(services.cfg.queue_capacity.max(1));
    let shared = Arc::new(Shared {
        session_id: data.session_id.clone(),
        owner: data.owner.clone(),
        processing: AtomicBool::new(false),
        closing: AtomicBool::new(false),
        close: Notify::new(),
        current: Mutex::new(None),
        stops: AtomicU64::new(0),
        steering: steering::SteeringInbox::new(),
        task: tokio::sync::Mutex::new(None),
        review: tokio::sync::watch::Sender::new(ReviewState::Idle),
        finished: tokio::sync::watch::Sender::new(false),
        queue_rejections: AtomicU64::new(0),
        last_queue_wait_ms: AtomicU64::new(0),
    });
    data.open_capabilities(&services.caps);
    let task = tokio::spawn(actor_loop(services, data, rx, Arc::clone(&shared), live));
    if let Ok(mut slot) = shared.task.try_lock() {
        *slot = Some(task);
    }
    SessionHandle { tx, shared }
}

async fn actor_loop(
    services: Arc<Services>,
    mut data: SessionData,
    mut rx: mpsc::Receiver<Box<Submission>>,
    shared: Arc<Shared>,
    live: Weak<LiveSessions>,
) {
    let mut review: Option<RunningReview> = None;
    let mut closed_by_request = false;
    let idle = services.cfg.session_idle;
    loop {
        let next = tokio::select! {
            next = tokio::time::timeout(idle, rx.recv()) => next,
            () = shared.close.notified(), if !closed_by_request => {
                // No new turns; the queued ones still run, then `recv` ends the loop.
                closed_by_request = true;
                rx.close();
                continue;
            }
            report = review_done(&mut review), if review.is_some() => {
                review = None;
                add_review_usage(&services, &mut data, report).await;
                shared.review.send_replace(ReviewState::Finished);
                continue;
            }
        };
        let cmd = match next {
            Ok(Some(cmd)) => cmd,
            Ok(None) => break,
            Err(_) => {
                if review.as_ref().is_some_and(|r| !r.is_finished()) {
                    continue;
                }
                // A turn whose snapshot failed lives only here: retire once it is saved.
                if data.unsaved {
                    data.unsaved = Box::pin(crate::turn::end::save(&services, &data))
                        .await
                        .is_err();
                    if data.unsaved {
                        continue;
                    }
                }
                // Idle: refuse new work and finish what is already queued; the session is
                // loaded again from its snapshot on next use.
                rx.close();
                continue;
            }
        };
        let Submission {
            actor,
            op,
            events,
            stops,
            queued_at,
        } = *cmd;
        shared.last_queue_wait_ms.store(
            u64::try_from(queued_at.elapsed().as_millis()).unwrap_or(u64::MAX),
            Ordering::SeqCst,
        );
        let (text, images, client_context, lang) = match op {
            Op::UserInput {
                text,
                images,
                client_context,
                lang,
            } => (text, images, client_context, lang),
            // Between turns, so no turn's messages are in flight; the caller waits for `events`
            // to close.
            Op::Rename { title } => {
                data.title = title;
                data.unsaved = Box::pin(crate::turn::end::save(&services, &data))
                    .await
                    .is_err();
                continue;
            }
            Op::Redo { text } => match crate::web::redo::rewind(&mut data, text) {
                Some(r) => {
                    let target = crate::turn::capture::CaptureTarget::for_session(
                        services.caps.history(),
                        &data,
                        &services.cfg.model.model,
                    );
                    if let Some(target) = target {
                        crate::turn::capture::mark_rewound(&target, r.dropped).await;
                    }
                    (r.text, r.images, None, None)
                }
                None => {
                    let e = CoreError::NothingToRegenerate;
                    let _ = events.send(Event::Error {
                        kind: mpa_protocol::ErrorKind::Session,
                        code: e.code().into(),
                        message: e.to_string(),
                    });
                    let _ = events.send(Event::TurnEnded {
                        status: mpa_protocol::TurnStatus::Failed,
                        final_text: String::new(),
                        halt: None,
                    });
                    continue;
                }
            },
            // Stop, close and steering never wait in the queue (see `SessionHandle::send`).
            Op::Stop | Op::Close | Op::Steer { .. } => continue,
        };
        // Shutting down, or a stop came after it was queued (spec runtime.md §2.7): answered,
        // never run.
        let unrun = if shared.closing.load(Ordering::SeqCst) {
            Some((
                CoreError::SessionClosed.code(),
                "the host is shutting down; this message was not processed / 服务正在关闭，这条消息未处理",
            ))
        } else if stops < shared.stops.load(Ordering::SeqCst) {
            Some((
                DISCARDED_BY_STOP,
                "a stop came before this message's turn started; it was not processed / \
                 在这条消息开始处理前已停止，未处理",
            ))
        } else {
            None
        };
        if let Some((code, message)) = unrun {
            let _ = events.send(Event::Error {
                kind: mpa_protocol::ErrorKind::Session,
                code: code.into(),
                message: message.into(),
            });
            let _ = events.send(Event::TurnEnded {
                status: mpa_protocol::TurnStatus::Stopped,
                final_text: String::new(),
                halt: None,
            });
            continue;
        }
        let cancel = CancellationToken::new();
        *lock(&shared.current) = Some(cancel.clone());
        shared.processing.store(true, Ordering::SeqCst);
        // Self-improvement never blocks a user-facing turn: cancel, wait at most 2 s.
        if let Some(r) = review.take() {
            let (ended, report) = Box::pin(r.cancel()).await;
            add_review_usage(&services, &mut data, report).await;
            shared.review.send_replace(ended);
        }
        let input = TurnInput {
            actor: actor.clone(),
            text,
            images,
            client_context,
            lang,
        };
        let closing = Arc::clone(&shared);
        let stop_cause = move || {
            if closing.closing.load(Ordering::SeqCst) {
                StopCause::Shutdown
            } else {
                StopCause::User
            }
        };
        // The turn's state lives on the heap for the turn only: an idle actor keeps just its
        // own loop (a few hundred bytes) instead of room for the deepest turn (several KB).
        let outcome = Box::pin(async {
            // A conversation recovered from a killed turn first learns which writes are
            // unresolved.
            recovery::annotate(&services.store, &actor, &mut data).await;
            run_turn(
                &services,
                &mut data,
                input,
                &events,
                cancel,
                stop_cause,
                &shared.steering,
            )
            .await
        })
        .await;
        if let Some(start) = outcome.review {
            shared.review.send_replace(ReviewState::Running);
            review = Some(crate::review::spawn(
                Arc::clone(&services),
                actor,
                data.session_id.clone(),
                start,
            ));
        }
        shared.processing.store(false, Ordering::SeqCst);
        *lock(&shared.current) = None;
        // Idle until the next turn: keep only what that turn needs, give the rest back.
        data.release_turn_memory();
        crate::heap::turn_ended();
    }
    if let Some(r) = review.take() {
        let (ended, report) = Box::pin(r.cancel()).await;
        add_review_usage(&services, &mut data, report).await;
        shared.review.send_replace(ended);
    }
    // Every run finished before this point, so nothing waits here: later messages fail over to
    // the (closed) queue, whose callers open the session again.
    shared.steering.close();
    // A last try for a turn that could not be saved (the host is closing the session).
    if data.unsaved
        && Box::pin(crate::turn::end::save(&services, &data))
            .await
            .is_err()
    {
        tracing::error!(session = %shared.session_id, "the session ends with its last turn unsaved");
    }
    // What belongs to the conversation (its terminal scope) outlives an actor reclaimed for
    // idleness (the next actor finds it again); a requested close — the chat is deleted, or the
    // host shuts down — lets every capability close the session's part.
    if closed_by_request {
        for c in services.caps.iter() {
            c.close_session(data.info(), &data.state).await;
        }
    }
    // The agent forgets this actor now, not when someone next looks the session up.
    if let Some(live) = live.upgrade() {
        let mut map = lock(&live);
        if map
            .get(&shared.session_id)
            .is_some_and(|h| Arc::ptr_eq(&h.shared, &shared))
        {
            map.remove(&shared.session_id);
        }
    }
    shared.finished.send_replace(true);
}

/// The running review's end (never, when none runs; the `select!` guards it).
async fn review_done(review: &mut Option<RunningReview>) -> Option<ReviewReport> {
    match review {
        Some(r) => r.done().await,
        None => std::future::pending().await,
    }
}

/// A background review's model calls are the session's too: they join its usage totals and the
/// saved state, so the session detail shows what the conversation cost.
async fn add_review_usage(
    services: &Services,
    data: &mut SessionData,
    report: Option<ReviewReport>,
) {
    let Some(report) = report.filter(|r| r.model_calls > 0) else {
        return;
    };
    data.persisted
        .usage
        .record_review(&report.usage, report.model_calls);
    if let Err(e) = services
        .store
        .update_session_state(&data.session_id, &data.persisted.to_json())
        .await
    {
        tracing::warn!(session = %data.session_id, error = %e, "review usage not saved");
    }
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

    /// The session status fields of spec runtime.md §14.4.
    pub fn queue_status(&self) -> QueueStatus {
        let capacity = self.tx.max_capacity();
        let pending = capacity.saturating_sub(self.tx.capacity());
        let processing = self.is_processing();
        QueueStatus {
            is_processing: processing,
            pending_messages: pending,
            queue_capacity: capacity,
            queue_saturated: pending >= capacity,
            queue_rejections: self.shared.queue_rejections.load(Ordering::SeqCst),
            last_queue_wait_ms: self.shared.last_queue_wait_ms.load(Ordering::SeqCst),
            shutdown_pending: self.shared.closing.load(Ordering::SeqCst),
            steering_pending: self.steering_pending(),
            steering_active: processing,
        }
    }

    /// Steering messages waiting for the running turn's next model call.
    pub fn steering_pending(&self) -> usize {
        self.shared.steering.pending()
    }

    /// Sends a client's op: `UserInput` queues a turn (the receiver gets exactly that turn's
    /// events, ending with `TurnEnded`; dropping it does not stop the turn), `Stop` goes around
    /// the queue to the running turn, `Close` goes around it too and ends the actor after the
    /// queued turns (a full queue never drops it).
    pub fn send(&self, actor: &Actor, op: Op) -> Result<Option<mpsc::UnboundedReceiver<Event>>> {
        match op {
            Op::Stop => {
                self.stop();
                Ok(None)
            }
            Op::Close => {
                self.shared.close.notify_one();
                Ok(None)
            }
            Op::Steer { text, images } => match self.steer(actor, text, images)? {
                Steered::Queued { event, .. } => {
                    let (etx, erx) = mpsc::unbounded_channel();
                    let _ = etx.send(event);
                    Ok(Some(erx))
                }
                Steered::Turn(rx) => Ok(Some(rx)),
            },
            op @ (Op::UserInput { .. } | Op::Rename { .. } | Op::Redo { .. }) => {
                if self.shared.closing.load(Ordering::SeqCst) {
                    return Err(CoreError::SessionClosed);
                }
                let (etx, erx) = mpsc::unbounded_channel();
                let sub = Box::new(Submission {
                    actor: actor.clone(),
                    op,
                    events: etx,
                    stops: self.shared.stops.load(Ordering::SeqCst),
                    queued_at: std::time::Instant::now(),
                });
                match self.tx.try_send(sub) {
                    Ok(()) => Ok(Some(erx)),
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        self.shared.queue_rejections.fetch_add(1, Ordering::SeqCst);
                        Err(CoreError::QueueFull {
                            capacity: self.tx.max_capacity(),
                        })
                    }
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
                lang: None,
            },
        )?
        .ok_or(CoreError::SessionClosed)
    }

    /// A message for the running turn of `actor` (spec runtime.md §2): queued in the steering
    /// inbox and acknowledged at once, or — when no turn of this user can take it — queued as an
    /// ordinary turn. Never dropped.
    pub fn steer(&self, actor: &Actor, text: String, images: Vec<String>) -> Result<Steered> {
        if self.shared.closing.load(Ordering::SeqCst) {
            return Err(CoreError::SessionClosed);
        }
        // A host command is the host's to answer at a turn's start, never the model's.
        if crate::turn::host_command::is_command(&text) {
            return Ok(Steered::Turn(self.submit(actor.clone(), text, images)?));
        }
        match self.shared.steering.enqueue(actor, text, images) {
            Ok(m) => Ok(Steered::Queued {
                event: crate::turn::steering::queued_event(&m),
                message_id: m.message_id,
            }),
            Err((text, images)) => Ok(Steered::Turn(self.submit(actor.clone(), text, images)?)),
        }
    }

    /// Stops the running turn: its model call is cancelled, no further tool call is dispatched,
    /// its waiting steering messages and the turns queued so far are discarded (each told so).
    /// Returns whether a turn was running.
    pub fn stop(&self) -> bool {
        self.shared.stops.fetch_add(1, Ordering::SeqCst);
        self.shared.steering.stop();
        match lock(&self.shared.current).as_ref() {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// The background review: running, or how the last one ended.
    pub fn review_state(&self) -> ReviewState {
        *self.shared.review.borrow()
    }

    /// Waits until no turn is running and no background review is running (or `limit` passes);
    /// returns whether the session became idle.
    pub async fn wait_idle(&self, limit: std::time::Duration) -> bool {
        let mut rx = self.shared.review.subscribe();
        tokio::time::timeout(limit, async {
            loop {
                if !self.is_processing() && *rx.borrow_and_update() != ReviewState::Running {
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
        self.shared.close.notify_one();
        let task = self.shared.task.lock().await.take();
        match task {
            Some(t) => {
                let _ = t.await;
            }
            // Another caller holds the task: wait for the actor's end instead.
            None => self.finished().await,
        }
    }
}
