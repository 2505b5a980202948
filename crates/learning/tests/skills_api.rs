#![expect(clippy::unwrap_used, reason = "a test's panic is its failure report")]
//! The typed skills API on real files: batches, views and read-before-write, listing, the
//! delete and batch rules. (The skill tools' JSON contract is tested in core's `tool_skills.rs`.)

use mpa_learning::skills::{ManageOp, OpResult, Patch, SkillSource};
use mpa_learning::{Error, ReviewToken, Skills, WriteOrigin};
use mpa_protocol::{Actor, UserId};
use std::fs;
use std::path::PathBuf;

struct Env {
    _dir: tempfile::TempDir,
    data: PathBuf,
    skills: Skills,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    fs::create_dir_all(&data).unwrap();
    let skills = Skills::new(data.clone());
    Env {
        _dir: dir,
        data,
        skills,
    }
}

fn actor(id: &str) -> Actor {
    Actor {
        user_id: UserId(id.into()),
        user_name: id.into(),
        is_admin: false,
    }
}

fn md(name: &str, desc: &str) -> String {
    format!("---\nname: {name}\ndescription: {desc}\n---\n# {name}\n\n1. check the downloader\n")
}

fn create(name: &str, category: Option<&str>) -> ManageOp {
    ManageOp::Create {
        name: name.into(),
        content: md(name, "Short description"),
        category: category.map(str::to_string),
    }
}

fn patch(name: &str, old: &str, new: &str) -> ManageOp {
    ManageOp::Patch(Patch {
        name: name.into(),
        old_string: Some(old.into()),
        new_string: Some(new.into()),
        ..Patch::default()
    })
}

const FG: WriteOrigin = WriteOrigin::Foreground;

impl Env {
    fn personal(&self, a: &Actor) -> PathBuf {
        self.data
            .join("agent/runtime/learning/users")
            .join(mpa_redact::UserKey::for_user(&a.user_id).as_str())
            .join("skills")
    }
}

#[test]
fn a_batch_reports_each_operation_and_lists_by_category() {
    let e = env();
    let a = actor("u1");
    let r = e
        .skills
        .manage(
            &a,
            &FG,
            vec![
                create("rename", Some("media")),
                ManageOp::WriteFile {
                    name: "rename".into(),
                    file_path: "references/naming.md".into(),
                    file_content: "S01E01".into(),
                },
                patch("rename", "check the downloader", "check qBittorrent"),
            ],
        )
        .unwrap();
    assert_eq!(
        (r.applied, r.skills.clone()),
        (3, vec!["rename".to_string()])
    );
    assert!(matches!(
        &r.results[2],
        OpResult::Patched {
            replacements: 1,
            strategy: "exact",
            ..
        }
    ));
    let list = e.skills.list(&a, None);
    assert_eq!(list.categories, vec!["media".to_string()]);
    assert_eq!(list.skills[0].source, SkillSource::Personal);
    assert_eq!(list.skills[0].description, "Short description");
    assert!(e.skills.list(&a, Some("other")).skills.is_empty());
    let file = e.skills.view(&a, &FG, "rename", None).unwrap();
    assert!(file.content.contains("check qBittorrent"));
    assert_eq!(
        file.linked_files,
        Some(vec!["references/naming.md".to_string()])
    );
    let file = e
        .skills
        .view(&a, &FG, "rename", Some("references/naming.md"))
        .unwrap();
    assert_eq!((file.content.as_str(), file.linked_files), ("S01E01", None));
    assert!(matches!(
        e.skills.view(&a, &FG, "rename", Some("../x.md")),
        Err(Error::Invalid(_))
    ));
}

#[test]
fn a_failing_operation_names_itself_and_changes_nothing() {
    let e = env();
    let a = actor("u1");
    e.skills.manage(&a, &FG, vec![create("s", None)]).unwrap();
    let before = fs::read(e.personal(&a).join("s/SKILL.md")).unwrap();
    let f = e
        .skills
        .manage(
            &a,
            &FG,
            vec![
                patch("s", "check the downloader", "check twice"),
                patch("s", "no such text zzz", "x"),
            ],
        )
        .unwrap_err();
    assert_eq!(f.operation, Some(2));
    assert!(
        f.error.starts_with("Operation 2: Could not find a match"),
        "{}",
        f.error
    );
    assert!(f.file_preview.unwrap().starts_with("---\nname: s"));
    assert_eq!(fs::read(e.personal(&a).join("s/SKILL.md")).unwrap(), before);

    let f = e.skills.manage(&a, &FG, Vec::new()).unwrap_err();
    assert_eq!(f.error, "operations must hold 1 to 20 items (got 0).");
    let delete = ManageOp::Delete {
        name: "s".into(),
        absorbed_into: None,
    };
    let f = e
        .skills
        .manage(&a, &FG, vec![delete.clone(), create("t", None)])
        .unwrap_err();
    assert_eq!(f.error, "delete must be the only operation in its batch.");
    let f = e
        .skills
        .manage(
            &a,
            &FG,
            vec![ManageOp::WriteFile {
                name: "s".into(),
                file_path: String::new(),
                file_content: "x".into(),
            }],
        )
        .unwrap_err();
    assert_eq!(
        f.error,
        "Operation 1: write_file needs file_path. No operations were applied."
    );
    let r = e.skills.manage(&a, &FG, vec![delete]).unwrap();
    assert_eq!(r.cleanup_pending, Some(false));
    assert!(!e.personal(&a).join("s").exists());
}

#[test]
fn a_review_writes_only_what_it_viewed_and_only_its_own_skills() {
    let e = env();
    let a = actor("u1");
    let rv = WriteOrigin::BackgroundReview(ReviewToken::new("r1"));
    e.skills
        .manage(&a, &rv, vec![create("agent-made", None)])
        .unwrap();
    e.skills
        .manage(&a, &FG, vec![create("mine", None)])
        .unwrap();
    let later = WriteOrigin::BackgroundReview(ReviewToken::new("r2"));
    let edit = || vec![patch("agent-made", "check the downloader", "check twice")];
    let f = e.skills.manage(&a, &later, edit()).unwrap_err();
    assert_eq!(f.read_before_write_required, Some(true));
    e.skills.view(&a, &later, "agent-made", None).unwrap();
    e.skills.manage(&a, &later, edit()).unwrap();
    e.skills.view(&a, &later, "mine", None).unwrap();
    let f = e
        .skills
        .manage(&a, &later, vec![patch("mine", "check the downloader", "x")])
        .unwrap_err();
    assert!(f.error.contains("belongs to the user"), "{}", f.error);
    // The review's marks end with it.
    if let WriteOrigin::BackgroundReview(t) = &later {
        e.skills.end_review(&a, t);
    }
    let f = e
        .skills
        .manage(
            &a,
            &later,
            vec![patch("agent-made", "check twice", "check thrice")],
        )
        .unwrap_err();
    assert_eq!(f.read_before_write_required, Some(true));
}
