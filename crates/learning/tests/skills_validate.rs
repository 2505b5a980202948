//! Skill validation: names, SKILL.md frontmatter, file paths.

use mpa_learning::skills::{FileTarget, check_file_path, check_name, check_skill_md};

fn md(desc: &str, body: &str) -> String {
    format!("---\nname: demo\ndescription: {desc}\n---\n{body}")
}

#[test]
fn names() {
    assert!(check_name("my-skill_2", "name").is_ok());
    assert!(check_name("My Skill", "name").is_err());
    assert!(check_name(&"a".repeat(65), "name").is_err());
    assert!(check_name(&"a".repeat(64), "name").is_ok());
    assert!(check_name("a.b", "name").is_err());
    assert!(check_name("-a", "name").is_err());
}

#[test]
fn skill_md_rules() {
    assert!(check_skill_md(&md("Does X", "# Body\n"), "demo", 60).is_ok());
    assert!(check_skill_md("# no frontmatter", "demo", 60).is_err());
    assert!(check_skill_md("---\nname: demo\n---\nbody", "demo", 60).is_err());
    assert!(check_skill_md(&md("Does X", "  \n"), "demo", 60).is_err());
    assert!(check_skill_md(&md(&"d".repeat(61), "b"), "demo", 60).is_err());
    assert!(check_skill_md(&md(&"d".repeat(61), "b"), "demo", 1024).is_ok());
    assert!(
        check_skill_md(
            "---\nname: demo\ndescription: x\nallowed-tools: [a]\n---\nb",
            "demo",
            60
        )
        .is_err()
    );
    assert!(check_skill_md("---\nname: other\ndescription: x\n---\nb", "demo", 60).is_err());
    assert!(check_skill_md("---\nname: demo\ndescription: x\nb", "demo", 60).is_err());
    assert!(
        check_skill_md(
            "\u{FEFF}---\r\nname: demo\r\ndescription: x\r\n---\r\nb",
            "demo",
            60
        )
        .is_ok()
    );
}

#[test]
fn file_paths() {
    assert_eq!(
        check_file_path("s", Some("SKILL.md")),
        Ok(FileTarget::SkillMd)
    );
    assert_eq!(
        check_file_path("s", Some("s/SKILL.md")),
        Ok(FileTarget::SkillMd)
    );
    assert!(check_file_path("s", Some("notes/x.md")).is_err());
    assert!(check_file_path("s", Some("references/../x.md")).is_err());
    assert!(check_file_path("s", Some("/etc/passwd")).is_err());
    assert!(check_file_path("s", Some("references")).is_err());
    assert!(check_file_path("s", Some(".ownership.json")).is_err());
    assert!(check_file_path("s", Some("references/.ownership.json")).is_err());
    assert_eq!(
        check_file_path("s", Some("references/x.md")),
        Ok(FileTarget::Support(vec![
            "references".into(),
            "x.md".into()
        ]))
    );
}
