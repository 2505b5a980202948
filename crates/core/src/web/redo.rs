//! Regenerate and edit-and-resend (issue 29 item 6): the conversation goes back to just before
//! the user's last message of their own (not a host command, a steering message, a compaction
//! summary or its pinned copy), and that message — or the edited text — starts a new turn.

use crate::session::SessionData;
use crate::turn::{capture, compact, host_command, steering};
use mpa_protocol::{Content, ContentPart, Message, Role};

fn is_own_message(m: &Message) -> bool {
    m.role == Role::User
        && !m.metadata.contains_key(host_command::HOST_COMMAND_KEY)
        && steering::steering_id(m).is_none()
        && !compact::is_summary(m)
        && !compact::is_pinned_copy(m)
}

/// What a rewind dropped and what to send instead.
pub struct Rewound {
    pub text: String,
    pub images: Vec<String>,
    /// The evidence uids of the dropped exchange (the last message and everything after it),
    /// to be marked rewound in the history so recall never returns the answer thrown away.
    pub dropped: Vec<String>,
}

/// Rewinds `data` to before the user's last message and returns the text and images to send:
/// that message's own (`edited` `None`) or `edited` (its images are not kept: the user wrote a
/// new message). `None` when there is no such message, or it lies inside a compaction summary.
pub fn rewind(data: &mut SessionData, edited: Option<String>) -> Option<Rewound> {
    let messages = data.transcript.messages();
    let at = messages.iter().rposition(is_own_message)?;
    let dropped = messages[at..]
        .iter()
        .filter_map(|m| m.metadata.get(capture::UID_KEY).and_then(|v| v.as_str()))
        .map(str::to_string)
        .collect();
    let last = &messages[at];
    let (text, images) = match edited {
        Some(text) => (text, Vec::new()),
        None => {
            let images = match &last.content {
                Content::Parts(parts) => parts
                    .iter()
                    .filter_map(|p| match p {
                        ContentPart::ImageUrl { image_url } => Some(image_url.url.clone()),
                        ContentPart::Text { .. } => None,
                    })
                    .collect(),
                Content::Text(_) => Vec::new(),
            };
            (last.text(), images)
        }
    };
    data.transcript.rewind(at).then_some(Rewound {
        text,
        images,
        dropped,
    })
}
