//! The steering inbox (spec runtime.md §2.1–§2.4): messages a user sends while their turn runs
//! wait here, bounded, until the turn takes them into the conversation at its next model-call
//! boundary ([`crate::turn::steering`]).
//!
//! One inbox per session, owned by the session handle so a sender reaches it without queueing
//! behind the running turn. It is bound to the running turn's user: only that user steers it.
//!
//! States: idle → [`SteeringInbox::begin_run`] → running → [`SteeringInbox::finish_run`] →
//! idle; [`SteeringInbox::stop`] marks a running turn stopped; [`SteeringInbox::close`] seals
//! it for good. Every transition and every [`SteeringInbox::enqueue`] happen under one lock,
//! which is the atomic boundary with the turn's end: a message is either accepted before the
//! turn's last look (and then always applied, or discarded by a stop, and said so) or refused
//! (and then the caller queues it as an ordinary turn). Nothing is ever dropped silently.

use crate::sync::lock;
use chrono::{DateTime, Utc};
use mpa_protocol::{Actor, UserId};
use std::collections::VecDeque;
use std::sync::Mutex;

/// Pending messages one running turn takes (`STEERING_QUEUE_MAX_SIZE`): beyond them a message
/// becomes an ordinary queued turn.
pub const CAPACITY: usize = 8;

/// One message sent while a turn ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteeringMessage {
    /// Host generated, 32 hex characters.
    pub message_id: String,
    pub user_id: UserId,
    pub text: String,
    /// Image URLs or data URLs.
    pub images: Vec<String>,
    pub created_at: DateTime<Utc>,
}

/// A message taken at a boundary, with the assistant segment it closes and the one it opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub message: SteeringMessage,
    pub assistant_message_id: String,
    pub continuation_message_id: String,
}

/// How a turn's run ends ([`SteeringInbox::finish_run`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// Messages arrived after the loop's last boundary: the turn goes on with them.
    More,
    /// The run is over; a stop discarded these messages (never applied).
    Done { discarded: Vec<SteeringMessage> },
}

#[derive(Debug)]
struct Run {
    user: UserId,
    pending: VecDeque<SteeringMessage>,
    /// The assistant segment being streamed (the turn's first, then each continuation).
    segment: String,
    /// A stop came: nothing more is taken, what waits is discarded.
    stopped: bool,
    discarded: Vec<SteeringMessage>,
}

#[derive(Debug, Default)]
struct Inbox {
    run: Option<Run>,
    closed: bool,
}

#[derive(Debug, Default)]
pub struct SteeringInbox {
    inner: Mutex<Inbox>,
}

impl SteeringInbox {
    pub fn new() -> Self {
        Self::default()
    }

    /// A turn of `user` starts streaming into `assistant_message_id`.
    pub fn begin_run(&self, user: &UserId, assistant_message_id: &str) {
        let mut inbox = lock(&self.inner);
        if inbox.closed {
            return;
        }
        inbox.run = Some(Run {
            user: user.clone(),
            pending: VecDeque::new(),
            segment: assistant_message_id.to_string(),
            stopped: false,
            discarded: Vec::new(),
        });
    }

    /// Accepts a message for the running turn; gives it back when the inbox is closed, no turn
    /// runs, the turn is another user's or stopped, or [`CAPACITY`] messages already wait (the
    /// caller then queues it as an ordinary turn).
    pub fn enqueue(
        &self,
        actor: &Actor,
        text: String,
        images: Vec<String>,
    ) -> Result<SteeringMessage, (String, Vec<String>)> {
        let mut inbox = lock(&self.inner);
        if inbox.closed {
            return Err((text, images));
        }
        let Some(run) = inbox.run.as_mut() else {
            return Err((text, images));
        };
        if run.stopped || run.user != actor.user_id || run.pending.len() >= CAPACITY {
            return Err((text, images));
        }
        let message = SteeringMessage {
            message_id: uuid::Uuid::new_v4().simple().to_string(),
            user_id: actor.user_id.clone(),
            text,
            images,
            created_at: Utc::now(),
        };
        run.pending.push_back(message.clone());
        Ok(message)
    }

    /// Takes every waiting message, in order, each closing the current assistant segment and
    /// opening a new one.
    pub fn take(&self) -> Vec<Taken> {
        let mut inbox = lock(&self.inner);
        let Some(run) = inbox.run.as_mut().filter(|r| !r.stopped) else {
            return Vec::new();
        };
        let mut taken = Vec::with_capacity(run.pending.len());
        while let Some(message) = run.pending.pop_front() {
            let continuation = uuid::Uuid::new_v4().simple().to_string();
            let closed = std::mem::replace(&mut run.segment, continuation.clone());
            taken.push(Taken {
                message,
                assistant_message_id: closed,
                continuation_message_id: continuation,
            });
        }
        taken
    }

    /// The turn is stopping: nothing more is taken and what waits now will be discarded;
    /// later messages become ordinary turns.
    pub fn stop(&self) {
        let mut inbox = lock(&self.inner);
        if let Some(run) = inbox.run.as_mut() {
            run.stopped = true;
            let waiting: Vec<SteeringMessage> = run.pending.drain(..).collect();
            run.discarded.extend(waiting);
        }
    }

    /// The turn's loop ended with `stopped` or not. Atomically with every [`enqueue`]: without
    /// a stop, messages still waiting keep the run going ([`Finish::More`]); otherwise the run
    /// ends and later messages are refused (ordinary turns), and a stop's discarded messages are
    /// returned for the turn to report.
    ///
    /// [`enqueue`]: SteeringInbox::enqueue
    pub fn finish_run(&self, stopped: bool) -> Finish {
        let mut inbox = lock(&self.inner);
        let Some(run) = inbox.run.as_mut() else {
            return Finish::Done {
                discarded: Vec::new(),
            };
        };
        if !stopped && !run.stopped && !run.pending.is_empty() {
            return Finish::More;
        }
        let Some(run) = inbox.run.take() else {
            return Finish::Done {
                discarded: Vec::new(),
            };
        };
        let mut discarded = run.discarded;
        discarded.extend(run.pending);
        Finish::Done { discarded }
    }

    /// Seals the inbox for good (the actor ends); returns what still waited.
    pub fn close(&self) -> Vec<SteeringMessage> {
        let mut inbox = lock(&self.inner);
        inbox.closed = true;
        inbox
            .run
            .take()
            .map(|r| r.discarded.into_iter().chain(r.pending).collect())
            .unwrap_or_default()
    }

    /// Messages waiting for the running turn.
    pub fn pending(&self) -> usize {
        lock(&self.inner)
            .run
            .as_ref()
            .map_or(0, |r| r.pending.len())
    }

    /// Whether a turn that can be steered is running.
    pub fn is_active(&self) -> bool {
        lock(&self.inner).run.as_ref().is_some_and(|r| !r.stopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actor(id: &str) -> Actor {
        Actor {
            user_id: UserId(id.into()),
            user_name: id.into(),
            is_admin: false,
        }
    }

    #[test]
    fn only_a_running_turn_of_the_same_user_takes_messages_up_to_the_capacity() {
        let inbox = SteeringInbox::new();
        let kim = actor("kim");
        assert!(inbox.enqueue(&kim, "idle".into(), vec![]).is_err());
        inbox.begin_run(&kim.user_id, "a0");
        assert_eq!(
            inbox.enqueue(&actor("lee"), "not yours".into(), vec![]),
            Err(("not yours".into(), vec![]))
        );
        for i in 0..CAPACITY {
            let m = inbox.enqueue(&kim, format!("m{i}"), vec![]).unwrap();
            assert_eq!(m.message_id.len(), 32);
        }
        assert!(inbox.enqueue(&kim, "ninth".into(), vec![]).is_err());
        let taken = inbox.take();
        assert_eq!(taken.len(), CAPACITY);
        // Each message closes the segment the one before it opened.
        assert_eq!(taken[0].assistant_message_id, "a0");
        for pair in taken.windows(2) {
            assert_eq!(
                pair[1].assistant_message_id,
                pair[0].continuation_message_id
            );
        }
        assert_eq!(inbox.finish_run(false), Finish::Done { discarded: vec![] });
        assert!(inbox.enqueue(&kim, "after".into(), vec![]).is_err());
    }

    #[test]
    fn a_message_accepted_before_the_end_keeps_the_run_going() {
        let inbox = SteeringInbox::new();
        let kim = actor("kim");
        inbox.begin_run(&kim.user_id, "a0");
        inbox.enqueue(&kim, "late".into(), vec![]).unwrap();
        assert_eq!(inbox.finish_run(false), Finish::More);
        assert_eq!(inbox.take().len(), 1);
        assert_eq!(inbox.finish_run(false), Finish::Done { discarded: vec![] });
    }

    #[test]
    fn a_stop_discards_what_waits_and_refuses_what_comes_after() {
        let inbox = SteeringInbox::new();
        let kim = actor("kim");
        inbox.begin_run(&kim.user_id, "a0");
        let first = inbox.enqueue(&kim, "one".into(), vec![]).unwrap();
        inbox.stop();
        assert!(inbox.take().is_empty());
        assert!(inbox.enqueue(&kim, "after stop".into(), vec![]).is_err());
        assert_eq!(
            inbox.finish_run(false),
            Finish::Done {
                discarded: vec![first]
            }
        );
        inbox.begin_run(&kim.user_id, "b0");
        inbox.enqueue(&kim, "two".into(), vec![]).unwrap();
        assert_eq!(inbox.close().len(), 1);
        inbox.begin_run(&kim.user_id, "c0");
        assert!(inbox.enqueue(&kim, "closed".into(), vec![]).is_err());
    }
}
