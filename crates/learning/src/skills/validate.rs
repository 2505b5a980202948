//! Validation of skill names, support-file paths and `SKILL.md` structure.

/// Largest SKILL.md / support file, in characters.
pub const MAX_CONTENT_CHARS: usize = 100_000;
/// Largest support file in bytes.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;
/// Description budget of a new personal skill (routing budget in the prompt block).
pub const NEW_DESCRIPTION_CHARS: usize = 60;
/// Description budget of an existing skill.
pub const DESCRIPTION_CHARS: usize = 1024;
/// Support directories a skill may contain.
pub const SUPPORT_DIRS: [&str; 4] = ["references", "templates", "scripts", "assets"];

/// `[a-z0-9][a-z0-9_-]{0,63}` (no dots, so a name is always one safe path segment).
pub fn check_name(name: &str, what: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "Invalid {what} '{}': use 1-64 chars of lowercase letters, digits, '-' or '_', starting with a letter or digit.",
            name.chars().take(80).collect::<String>()
        ))
    }
}

/// Where a `file_path` argument points inside a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileTarget {
    SkillMd,
    Support(Vec<String>),
}

pub fn check_file_path(name: &str, file_path: Option<&str>) -> Result<FileTarget, String> {
    let Some(fp) = file_path.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(FileTarget::SkillMd);
    };
    if fp == "SKILL.md" || fp == format!("{name}/SKILL.md") {
        return Ok(FileTarget::SkillMd);
    }
    if fp.chars().count() > 255 {
        return Err("file_path is longer than 255 characters.".into());
    }
    let parts =
        crate::durable_fs::check_relative(fp).map_err(|e| format!("Invalid file_path: {e}."))?;
    if parts.len() < 2 || !SUPPORT_DIRS.contains(&parts[0].as_str()) {
        return Err(format!(
            "Invalid file_path '{fp}': support files must be inside {} and name a file.",
            SUPPORT_DIRS.join("/, ") + "/"
        ));
    }
    if parts.iter().any(|p| p.starts_with('.')) {
        return Err(format!(
            "Invalid file_path '{fp}': hidden files are not allowed."
        ));
    }
    Ok(FileTarget::Support(parts))
}

/// Top-level `key: value` pairs of a frontmatter block (a small YAML subset: nested and list
/// lines are tolerated and ignored; anything else is not a mapping).
fn frontmatter_pairs(block: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for line in block.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if line.starts_with(' ') || line.starts_with('\t') || t.starts_with("- ") {
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            return Err("frontmatter is not a YAML mapping".into());
        };
        let key = k.trim();
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err("frontmatter is not a YAML mapping".into());
        }
        let v = v.trim();
        let unquoted = v
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .or_else(|| v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
            .unwrap_or(v);
        out.push((key.to_string(), unquoted.to_string()));
    }
    Ok(out)
}

/// The frontmatter description of a SKILL.md (for listings).
pub fn description_of(text: &str) -> Option<String> {
    let (fm, body) = split(text).ok()?;
    let pairs = frontmatter_pairs(fm).ok()?;
    pairs
        .into_iter()
        .find(|(k, _)| k == "description")
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
        .or_else(|| {
            body.lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string)
        })
}

fn split(text: &str) -> Result<(&str, &str), String> {
    let t = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let Some(rest) = t.strip_prefix("---") else {
        return Err("SKILL.md must start with '---' frontmatter".into());
    };
    let rest = rest
        .strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))
        .ok_or("SKILL.md must start with a '---' line")?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Ok((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err("frontmatter is not closed by a '---' line".into())
}

/// Full structural validation of a SKILL.md for skill `name`.
pub fn check_skill_md(text: &str, name: &str, max_description: usize) -> Result<(), String> {
    if text.chars().count() > MAX_CONTENT_CHARS {
        return Err(format!(
            "SKILL.md is longer than {MAX_CONTENT_CHARS} characters."
        ));
    }
    let (fm, body) = split(text)?;
    let pairs = frontmatter_pairs(fm)?;
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    for forbidden in ["allowed-tools", "allowed-api-operations"] {
        if get(forbidden).is_some() {
            return Err(format!(
                "frontmatter may not declare '{forbidden}': personal skills never grant permissions"
            ));
        }
    }
    match get("name") {
        Some(n) if n == name => {}
        Some(n) => {
            return Err(format!(
                "frontmatter name '{}' must equal the skill name '{name}'",
                n.chars().take(80).collect::<String>()
            ));
        }
        None => return Err("frontmatter needs a 'name'".into()),
    }
    match get("description") {
        None | Some("") => return Err("frontmatter needs a non-empty 'description'".into()),
        Some(d) if d.chars().count() > max_description => {
            return Err(format!(
                "description is {} chars; the limit is {max_description}",
                d.chars().count()
            ));
        }
        Some(_) => {}
    }
    if body.trim().is_empty() {
        return Err("SKILL.md needs a body after the frontmatter".into());
    }
    Ok(())
}
