#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]
//! kill -9 in the middle of a [`Skills::manage`] commit: every file is either old or new, and the
//! next start rolls the batch back and cleans quarantine directories.
//!
//! The parent test re-runs this test binary as a child process (`crash_child`, ignored in
//! normal runs) that pauses inside the commit hook; the parent SIGKILLs it there.

use mpa_learning::skills::{ManageOp, Patch};
use mpa_learning::{Skills, WriteOrigin};
use mpa_protocol::{Actor, UserId};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

const DATA_ENV: &str = "MPA_SKILLS_CRASH_DATA";
const STEP_ENV: &str = "MPA_SKILLS_CRASH_STEP";
const MODE_ENV: &str = "MPA_SKILLS_CRASH_MODE";
const CHECKPOINT: &str = "CHECKPOINT";

fn actor() -> Actor {
    Actor {
        user_id: UserId("crash-user".into()),
        user_name: "crash".into(),
        is_admin: false,
    }
}

fn md(name: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: Demo skill\n---\n# {name}\n{body}\n")
}

fn personal(data: &Path) -> PathBuf {
    data.join("agent/runtime/learning/users")
        .join(mpa_redact::UserKey::for_user(&actor().user_id).as_str())
        .join("skills")
}

fn write_file(name: &str, path: &str, content: &str) -> ManageOp {
    ManageOp::WriteFile {
        name: name.into(),
        file_path: path.into(),
        file_content: content.into(),
    }
}

fn create(name: &str, content: String) -> ManageOp {
    ManageOp::Create {
        name: name.into(),
        content,
        category: None,
    }
}

fn batch() -> Vec<ManageOp> {
    vec![
        ManageOp::Patch(Patch {
            name: "s".into(),
            old_string: Some("old body".into()),
            new_string: Some("new body".into()),
            ..Patch::default()
        }),
        write_file("s", "references/a.md", "new a"),
        write_file("s", "references/b.md", "new b"),
        create("t", md("t", "fresh")),
    ]
}

/// Child side: run the batch (or a delete) and park forever at the requested step.
#[test]
#[ignore = "helper process for the crash tests; runs only when spawned by them"]
fn crash_child() {
    let (Ok(data), Ok(step)) = (std::env::var(DATA_ENV), std::env::var(STEP_ENV)) else {
        return;
    };
    let step: usize = step.parse().unwrap();
    let marker = PathBuf::from(&data).join(CHECKPOINT);
    let hook = Arc::new(move |n: usize| {
        if n == step {
            // A file, not stdout: the test harness may capture the child's output.
            fs::write(&marker, n.to_string()).unwrap();
            loop {
                std::thread::sleep(std::time::Duration::from_secs(60));
            }
        }
    });
    let skills = Skills::new(PathBuf::from(data)).with_commit_hook(hook);
    let ops = if std::env::var(MODE_ENV).as_deref() == Ok("delete") {
        vec![ManageOp::Delete {
            name: "s".into(),
            absorbed_into: None,
        }]
    } else {
        batch()
    };
    let r = skills.manage(&actor(), &WriteOrigin::Foreground, ops);
    panic!("child finished without reaching the checkpoint: {r:?}");
}

fn seed(data: &Path) {
    let skills = Skills::new(data.to_path_buf());
    let r = skills.manage(
        &actor(),
        &WriteOrigin::Foreground,
        vec![
            create("s", md("s", "old body")),
            write_file("s", "references/a.md", "old a"),
        ],
    );
    assert!(r.is_ok(), "{r:?}");
}

/// Spawn the child and SIGKILL it once it reports the checkpoint.
fn run_child_and_kill(data: &Path, step: usize, mode: &str) {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "skills_crash_recovery::crash_child",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DATA_ENV, data)
        .env(STEP_ENV, step.to_string())
        .env(MODE_ENV, mode)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let marker = data.join(CHECKPOINT);
    // Wait for the checkpoint file, or for the child to exit without reaching it.
    loop {
        if marker.exists() {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("child exited ({status}) before reaching step {step}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL on Unix
    let status = child.wait().unwrap();
    assert!(!status.success());
}

fn read(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok()
}

#[test]
fn kill9_mid_batch_leaves_old_or_new_and_start_rolls_back() {
    // Steps 1..=4 are the four file writes; step 5 is the ownership sidecar.
    for step in 1..=5 {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        seed(&data);
        let root = personal(&data);
        let old_md = read(&root.join("s/SKILL.md")).unwrap();
        let old_sidecar = read(&root.join(".ownership.json")).unwrap();
        run_child_and_kill(&data, step, "batch");

        // Every file is either its old or its new complete content.
        let s_md = read(&root.join("s/SKILL.md")).unwrap();
        assert!(
            s_md == old_md || s_md == md("s", "new body"),
            "step {step}: {s_md:?}"
        );
        let a = read(&root.join("s/references/a.md")).unwrap();
        assert!(a == "old a" || a == "new a", "step {step}");
        let b = read(&root.join("s/references/b.md"));
        assert!(b.is_none() || b.as_deref() == Some("new b"), "step {step}");
        let t = read(&root.join("t/SKILL.md"));
        assert!(t.is_none() || t == Some(md("t", "fresh")), "step {step}");
        // Exactly the first `step` writes landed, in batch order, the sidecar last.
        assert_ne!(s_md, old_md, "step {step}: write 1 landed");
        assert_eq!(a == "new a", step >= 2, "step {step}: write 2");
        assert_eq!(b.is_some(), step >= 3, "step {step}: write 3");
        assert_eq!(t.is_some(), step >= 4, "step {step}: write 4");
        let sidecar = read(&root.join(".ownership.json")).unwrap();
        assert_eq!(sidecar != old_sidecar, step >= 5, "step {step}: sidecar");

        // The next start rolls the interrupted batch back completely.
        let report = Skills::new(data.clone()).recover_on_start();
        assert!(
            report
                .iter()
                .any(|l| l.contains("rolled back interrupted skill batch")),
            "step {step}: {report:?}"
        );
        assert_eq!(read(&root.join("s/SKILL.md")).unwrap(), old_md);
        assert_eq!(read(&root.join("s/references/a.md")).unwrap(), "old a");
        assert!(!root.join("s/references/b.md").exists());
        assert!(!root.join("t").exists(), "step {step}: created dir removed");
        assert_eq!(read(&root.join(".ownership.json")).unwrap(), old_sidecar);
        let learning = root.parent().unwrap();
        assert_eq!(
            fs::read_dir(learning.join(".skills-txn")).unwrap().count(),
            0
        );
        // A second start has nothing left to do.
        assert!(Skills::new(data.clone()).recover_on_start().is_empty());
    }
}

#[test]
fn kill9_mid_delete_leaves_quarantine_that_start_cleans() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    seed(&data);
    let root = personal(&data);
    run_child_and_kill(&data, 1, "delete");
    assert!(!root.join("s").exists());
    let quarantined: Vec<String> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".deleted-"))
        .collect();
    assert_eq!(quarantined.len(), 1);
    let report = Skills::new(data.clone()).recover_on_start();
    assert!(
        report
            .iter()
            .any(|l| l.contains("removed quarantine directory")),
        "{report:?}"
    );
    assert!(
        report
            .iter()
            .any(|l| l.contains("dropped 1 ownership record")),
        "{report:?}"
    );
    assert!(!root.join(&quarantined[0]).exists());
}
