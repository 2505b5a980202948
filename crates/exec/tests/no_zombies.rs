#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]
//! Issue 12 item 8, "no zombies": when the host runs as PID 1 or its terminals orphan
//! grandchildren, those became zombies nobody reaped. With [`mpa_exec::become_subreaper`] the
//! orphans of a terminal tree are re-parented to the host and reaped once they exit, so a
//! finished, killed or timed-out tree leaves nothing in /proc.
//!
//! Each test runs in a process of its own (`in_own_process!`): the subreaper flag and the
//! reaper thread are process-wide.

use crate::common::*;
use mpa_exec::{RunRequest, RunStatus, SessionAction, SessionStatus, Signal};
use std::time::{Duration, Instant};

/// State, parent and session of `/proc/<pid>/stat` (zombies keep them until reaped).
fn stat(pid: u32) -> Option<(char, u32, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    Some((
        fields[0].chars().next()?,
        fields[1].parse().ok()?,
        fields[3].parse().ok()?,
    ))
}

/// Every process of session `sid`, zombies included: (pid, state, parent).
fn tree(sid: u32) -> Vec<(u32, char, u32)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let (state, ppid, session) = stat(pid)?;
            (session == sid).then_some((pid, state, ppid))
        })
        .collect()
}

/// Waits until session `sid` has no process left in /proc; returns what is left.
async fn leftovers(sid: u32) -> Vec<(u32, char, u32)> {
    until_gone(|| tree(sid)).await
}

fn subreaper() {
    mpa_exec::become_subreaper().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_that_outlives_its_parent_is_adopted_and_reaped() {
    mpa_test_support::in_own_process!(a_grandchild_that_outlives_its_parent_is_adopted_and_reaped);
    subreaper();
    let f = fixture();
    let s = scope(&f.p, "admin");
    let mark = marker();
    // The subshell forks the sleeper and exits at once: the sleeper is an orphan from the start.
    let id = start(
        &f.p,
        &s,
        "(sleep 2 &); echo forked; exec sleep 1000",
        false,
        &mark,
    )
    .await;
    let leader = status(&f.p, &s, &id).await.pid;
    wait_for_text(&f.p, &s, &id, "forked").await;
    let me = std::process::id();
    let deadline = Instant::now() + Duration::from_secs(10);
    let adopted = loop {
        let orphans: Vec<u32> = tree(leader)
            .into_iter()
            .filter(|(pid, _, ppid)| *pid != leader && *ppid == me)
            .map(|(pid, _, _)| pid)
            .collect();
        if let Some(pid) = orphans.first() {
            break *pid;
        }
        assert!(
            Instant::now() < deadline,
            "the orphan was never re-parented to the host"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // It exits by itself after 2 s; nobody but the host can collect it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while stat(adopted).is_some() {
        assert!(
            Instant::now() < deadline,
            "the adopted orphan stayed in /proc: {:?}",
            stat(adopted)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status(&f.p, &s, &id).await.status, SessionStatus::Running);
    let kill = SessionAction::Kill {
        signal: Signal::TERM,
    };
    act(&f.p, &s, &id, kill).await.unwrap();
    let left = leftovers(leader).await;
    reap(&mark);
    assert!(left.is_empty(), "left in /proc: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_tree_with_orphans_leaves_nothing_in_proc() {
    mpa_test_support::in_own_process!(a_killed_tree_with_orphans_leaves_nothing_in_proc);
    subreaper();
    let f = fixture();
    let s = scope(&f.p, "admin");
    let mark = marker();
    let command = "sleep 1000 & (sleep 1000 &); (sh -c 'sleep 1000 &' &); echo ready; sleep 1000";
    let id = start(&f.p, &s, command, false, &mark).await;
    wait_for_text(&f.p, &s, &id, "ready").await;
    let leader = status(&f.p, &s, &id).await.pid;
    // "ready" can come before the background subshells have forked their sleepers: wait for the
    // whole tree (the leader, its sleeper and the two orphans) before killing it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while tree(leader).len() < 4 {
        assert!(Instant::now() < deadline, "{:?}", tree(leader));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let kill = SessionAction::Kill {
        signal: Signal::TERM,
    };
    let v = act(&f.p, &s, &id, kill).await.unwrap();
    assert_eq!(v.status, SessionStatus::Killed);
    let left = leftovers(leader).await;
    reap(&mark);
    assert!(left.is_empty(), "left in /proc: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_run_with_orphans_leaves_nothing_in_proc() {
    mpa_test_support::in_own_process!(a_timed_out_run_with_orphans_leaves_nothing_in_proc);
    subreaper();
    let f = fixture();
    let s = scope(&f.p, "admin");
    let mark = marker();
    let req = RunRequest {
        spec: marked(
            "echo leader=$$; sleep 1000 & (sleep 1000 &); sleep 1000",
            &mark,
        ),
        timeout: Duration::from_secs(1),
    };
    let v = f.p.run(&s, req).await.unwrap();
    assert_eq!(v.status, RunStatus::TimedOut, "{v:?}");
    let leader: u32 = v
        .output
        .trim()
        .strip_prefix("leader=")
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no leader pid in {:?}", v.output));
    let left = leftovers(leader).await;
    reap(&mark);
    assert!(left.is_empty(), "left in /proc: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reaper_never_takes_an_exit_status_someone_waits_for() {
    mpa_test_support::in_own_process!(the_reaper_never_takes_an_exit_status_someone_waits_for);
    subreaper();
    // Direct children of the host, in its session and in a session of their own, exit and stay
    // zombies until their owners wait: the reaper must leave them alone.
    let mut plain = std::process::Command::new("sh")
        .args(["-c", "exit 7"])
        .spawn()
        .unwrap();
    let mut leader = std::process::Command::new("setsid")
        .args(["sh", "-c", "exit 9"])
        .spawn()
        .unwrap();
    let mut tokio_child = tokio::process::Command::new("sh")
        .args(["-c", "exit 11"])
        .spawn()
        .unwrap();
    let pids = [plain.id(), leader.id()];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pids
        .iter()
        .all(|pid| stat(*pid).is_some_and(|(state, ..)| state == 'Z'))
    {
        assert!(Instant::now() < deadline, "children never exited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..3 {
        mpa_exec::reap_orphans();
    }
    assert_eq!(plain.wait().unwrap().code(), Some(7));
    assert_eq!(leader.wait().unwrap().code(), Some(9));
    assert_eq!(tokio_child.wait().await.unwrap().code(), Some(11));
    // And sessions still see their own exit codes.
    let f = fixture();
    let s = scope(&f.p, "admin");
    let mark = marker();
    let id = start(&f.p, &s, "sleep 0.2; exit 3", false, &mark).await;
    let v = wait_finished(&f.p, &s, &id).await;
    assert_eq!((v.status, v.exit_code), (SessionStatus::Exited, Some(3)));
}
