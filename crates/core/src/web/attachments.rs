//! Files a user attaches on the web page (spec runtime.md §14.1): stored under the data
//! directory in the uploader's own folder with a generated name, typed from their content (never
//! from the name the client sent), found again only by their owner, kept for [`TTL`] in a
//! registry of at most [`MAX_ENTRIES`]. What the model gets: images as references kept in the
//! chat (`attachment:<id>`), sent as image parts on the outbound copy of each request by the
//! `AttachedImages` contributor (a note when the file is gone, or when the model takes no
//! images), other files as a note with their name, type, size and reference.

use crate::CoreError;
use base64::Engine as _;
use mpa_protocol::UserId;
use mpa_redact::UserKey;
use serde::Serialize;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Largest attachment (spec: 32 MiB).
pub const MAX_BYTES: usize = 32 * 1024 * 1024;
/// Entries the registry keeps; the oldest is dropped (with its file) past it.
pub const MAX_ENTRIES: usize = 256;
/// How long an attachment can be fetched or referenced after its upload.
pub const TTL: Duration = Duration::from_secs(6 * 3600);
/// The prefix of an attachment reference (`attachment:<id>`).
pub const REF_PREFIX: &str = "attachment:";
/// Longest display name kept, in characters.
const MAX_NAME_CHARS: usize = 200;

/// What a content sniff found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Image,
    File,
}

/// The attachment object of §14.1, as the page gets it (no server path).
#[derive(Debug, Clone, Serialize)]
pub struct Attachment {
    pub id: String,
    pub kind: Kind,
    pub name: String,
    pub mime_type: &'static str,
    pub size: usize,
    pub status: &'static str,
    #[serde(rename = "ref")]
    pub reference: String,
    pub url: String,
    pub download_url: String,
}

struct Entry {
    owner: UserId,
    path: PathBuf,
    created: Instant,
    attachment: Attachment,
}

/// The registry and the folder under it.
pub struct Attachments {
    root: PathBuf,
    entries: Mutex<VecDeque<Entry>>,
}

/// The MIME type the content shows, and whether the model can take it as an image.
pub fn sniff(bytes: &[u8]) -> (&'static str, Kind) {
    let image = |m| (m, Kind::Image);
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        image("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        image("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        image("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        image("image/webp")
    } else if bytes.starts_with(b"%PDF-") {
        ("application/pdf", Kind::File)
    } else if !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok() {
        ("text/plain", Kind::File)
    } else {
        ("application/octet-stream", Kind::File)
    }
}

/// The client's file name for display: its last path component, without control characters,
/// bounded; never used for anything on disk.
pub fn display_name(raw: &str) -> String {
    let last = raw.rsplit(['/', '\\']).next().unwrap_or_default();
    let clean: String = last
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    let clean = clean.trim();
    if clean.is_empty() || clean.chars().all(|c| c == '.') {
        "file".to_string()
    } else {
        clean.to_string()
    }
}

/// The bytes of a `data:image/…;base64,…` URL (a client that sent the image inline).
fn inline_image(url: &str) -> Option<Vec<u8>> {
    let rest = url.strip_prefix("data:image/")?;
    let (_, data) = rest.split_once(";base64,")?;
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()
}

/// Whether an image string in a message is an attachment reference (sent on the outbound copy).
pub fn is_reference(image: &str) -> bool {
    image.strip_prefix(REF_PREFIX).is_some_and(valid_id)
}

fn valid_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

impl Attachments {
    /// A registry storing under `root`. Files an earlier process left there longer than [`TTL`]
    /// ago are removed (their entries died with it; younger ones may belong to another process
    /// on the same data directory, which removes them itself).
    pub fn new(root: PathBuf) -> Self {
        let users = std::fs::read_dir(root.join("users"))
            .into_iter()
            .flatten()
            .flatten();
        for file in users.flat_map(|u| std::fs::read_dir(u.path()).into_iter().flatten().flatten())
        {
            let old = file
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= TTL);
            if old {
                let _ = std::fs::remove_file(file.path());
            }
        }
        Self {
            root,
            entries: Mutex::new(VecDeque::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `<root>/users/<user key>`: the layout of every per-user runtime folder, which the file
    /// tools let a user (and the model acting for them) read.
    fn folder(&self, owner: &UserId) -> PathBuf {
        self.root
            .join("users")
            .join(UserKey::for_user(owner).as_str())
    }

    /// Drops expired entries and, past the cap, the oldest ones; their files go too.
    fn prune(entries: &mut VecDeque<Entry>, room_for: usize) {
        let mut dropped = Vec::new();
        while let Some(front) = entries.front() {
            let expired = front.created.elapsed() >= TTL;
            if !expired && entries.len() + room_for <= MAX_ENTRIES {
                break;
            }
            if let Some(e) = entries.pop_front() {
                dropped.push(e.path);
            }
        }
        for path in dropped {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Stores `bytes` for `owner` under a generated name; `name` is only shown.
    pub fn store(&self, owner: &UserId, name: &str, bytes: &[u8]) -> Result<Attachment, CoreError> {
        if bytes.len() > MAX_BYTES {
            return Err(CoreError::AttachmentTooLarge { size: bytes.len() });
        }
        if bytes.is_empty() {
            return Err(CoreError::AttachmentEmpty);
        }
        let (mime_type, kind) = sniff(bytes);
        let id = uuid::Uuid::new_v4().simple().to_string();
        let dir = self.folder(owner);
        let path = dir.join(&id);
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&path, bytes))
            .map_err(|e| CoreError::AttachmentStorage(e.kind().to_string()))?;
        let url = format!("/api/v1/agent/file/{id}");
        let attachment = Attachment {
            kind,
            name: display_name(name),
            mime_type,
            size: bytes.len(),
            status: "ready",
            reference: format!("{REF_PREFIX}{id}"),
            download_url: format!("{url}?download=1"),
            url,
            id,
        };
        let mut entries = self.lock();
        Self::prune(&mut entries, 1);
        entries.push_back(Entry {
            owner: owner.clone(),
            path,
            created: Instant::now(),
            attachment: attachment.clone(),
        });
        Ok(attachment)
    }

    /// The attachment `id` (or `attachment:<id>`) if `owner` uploaded it and it has not expired.
    pub fn get(&self, owner: &UserId, id: &str) -> Result<(Attachment, PathBuf), CoreError> {
        let id = id.strip_prefix(REF_PREFIX).unwrap_or(id);
        if !valid_id(id) {
            return Err(CoreError::AttachmentNotFound);
        }
        let mut entries = self.lock();
        Self::prune(&mut entries, 0);
        entries
            .iter()
            .find(|e| e.attachment.id == id && &e.owner == owner)
            .map(|e| (e.attachment.clone(), e.path.clone()))
            .ok_or(CoreError::AttachmentNotFound)
    }

    /// The bytes of `owner`'s attachment `id`.
    pub fn read(&self, owner: &UserId, id: &str) -> Result<(Attachment, Vec<u8>), CoreError> {
        let (a, path) = self.get(owner, id)?;
        let bytes = std::fs::read(&path).map_err(|_| CoreError::AttachmentNotFound)?;
        Ok((a, bytes))
    }

    /// An image attachment as a data URL (what the turn makes an image part of).
    pub fn data_url(&self, owner: &UserId, id: &str) -> Result<String, CoreError> {
        let (a, bytes) = self.read(owner, id)?;
        if a.kind != Kind::Image {
            return Err(CoreError::AttachmentNotFound);
        }
        Ok(format!(
            "data:{};base64,{}",
            a.mime_type,
            base64::engine::general_purpose::STANDARD.encode(bytes)
        ))
    }

    /// The note that tells the model which files came with the message.
    pub fn files_note(&self, owner: &UserId, ids: &[String]) -> Result<String, CoreError> {
        let mut lines = Vec::new();
        for id in ids {
            let (a, _) = self.get(owner, id)?;
            lines.push(format!(
                "- {} ({}, {} bytes, ref {})",
                a.name, a.mime_type, a.size, a.reference
            ));
        }
        Ok(if lines.is_empty() {
            String::new()
        } else {
            format!(
                "[Attached file(s) — the user uploaded these with the message; their names come from the user:\n{}]",
                lines.join("\n")
            )
        })
    }

    /// A message's text and images with `owner`'s attachments resolved: an image reference is
    /// checked (`owner`'s, an image) and kept as its reference `attachment:<id>` — the chat
    /// stores the reference, never the bytes (spec runtime.md §9, §14.1); the turn sends the
    /// image on the outbound copy of each model request. An inline `data:image/…;base64,…`
    /// image is stored as an attachment of `owner` and referenced the same way; other image
    /// strings (http URLs) pass as they are. The files are described in a note after the text.
    /// Any reference that is not `owner`'s is [`CoreError::AttachmentNotFound`], and nothing is
    /// sent.
    pub fn resolve(
        &self,
        owner: &UserId,
        text: String,
        images: Vec<String>,
        files: &[String],
    ) -> Result<(String, Vec<String>), CoreError> {
        let images = images
            .into_iter()
            .map(|i| {
                if i.starts_with(REF_PREFIX) || valid_id(&i) {
                    let (a, _) = self.get(owner, &i)?;
                    if a.kind != Kind::Image {
                        return Err(CoreError::AttachmentNotFound);
                    }
                    Ok(a.reference)
                } else if let Some(bytes) = inline_image(&i) {
                    self.store(owner, "image", &bytes).map(|a| a.reference)
                } else {
                    Ok(i)
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let note = self.files_note(owner, files)?;
        let text = match (text.trim().is_empty(), note.is_empty()) {
            (_, true) => text,
            (true, false) => note,
            (false, false) => format!("{text}\n\n{note}"),
        };
        Ok((text, images))
    }

    /// What the model gets for the image reference `reference` in `owner`'s message: the image
    /// as a data URL, or `None` when it is gone (expired, dropped from the registry, another
    /// user's, or its file removed).
    pub fn outbound_image(&self, owner: &UserId, reference: &str) -> Option<String> {
        self.data_url(owner, reference).ok()
    }

    /// Entries held now (expired ones pruned first).
    pub fn len(&self) -> usize {
        let mut entries = self.lock();
        Self::prune(&mut entries, 0);
        entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_their_directories_and_control_characters() {
        assert_eq!(display_name("../../x"), "x");
        assert_eq!(display_name("..\\..\\evil.png"), "evil.png");
        assert_eq!(display_name(".."), "file");
        assert_eq!(display_name("a\u{0}b\nc.txt"), "abc.txt");
        assert_eq!(display_name(""), "file");
    }

    #[test]
    fn the_type_comes_from_the_content() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n....").0, "image/png");
        assert_eq!(sniff(b"%PDF-1.7").1, Kind::File);
        assert_eq!(sniff("字幕 text".as_bytes()).0, "text/plain");
        assert_eq!(sniff(&[0, 1, 2, 0xff]).0, "application/octet-stream");
    }

    #[test]
    fn the_registry_keeps_at_most_its_cap_and_only_for_the_owner() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let reg = Attachments::new(dir.path().join("att"));
        let alice = UserId("alice".into());
        let first = reg
            .store(&alice, "a.txt", b"one")
            .unwrap_or_else(|e| panic!("{e}"));
        for i in 0..MAX_ENTRIES {
            reg.store(&alice, "n.txt", format!("{i}").as_bytes())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(reg.len(), MAX_ENTRIES);
        assert!(matches!(
            reg.get(&alice, &first.id),
            Err(CoreError::AttachmentNotFound)
        ));
        let last = reg
            .store(&alice, "z.txt", b"z")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(reg.get(&alice, &last.reference).is_ok());
        assert!(matches!(
            reg.get(&UserId("bob".into()), &last.id),
            Err(CoreError::AttachmentNotFound)
        ));
    }
}
