//! The agent's eyes (spec runtime.md §9): images tools return ([`mpa_protocol::ImageBlock`] on a
//! `ToolOutput` and its tool message) live in memory for the turn that made them and never
//! anywhere else.
//!
//! - while the turn runs, each model request shows them to a model that can see as one
//!   observation message after the tool-reply batch, on the request's outbound copy only
//!   (`turn::outbound::vision`); a model that cannot gets a note instead;
//! - when the turn ends, and in every snapshot written during it, each image is replaced by
//!   [`HISTORICAL_IMAGE_NOTE`] ([`retire_images`]), so no chat, journal, evidence or log holds
//!   image bytes and a restored conversation cannot claim to have seen an old image.

pub mod probe;
pub mod projection;

use mpa_protocol::{Content, ContentPart, Message};

/// What a persisted tool message says in place of its images (spec runtime.md §9.5).
pub const HISTORICAL_IMAGE_NOTE: &str = "[historical image not kept; call the image tool again for \
visual details / 历史图片未保留；如需视觉细节请重新调用图片工具]";

/// Replaces the message's images by [`HISTORICAL_IMAGE_NOTE`] (once per image), dropping the bytes.
pub fn retire_images(m: &mut Message) {
    if m.images.is_empty() {
        return;
    }
    let n = std::mem::take(&mut m.images).len();
    let note = if n == 1 {
        HISTORICAL_IMAGE_NOTE.to_string()
    } else {
        format!("{HISTORICAL_IMAGE_NOTE} ×{n}")
    };
    match &mut m.content {
        Content::Text(t) => {
            if !t.is_empty() {
                t.push_str("\n\n");
            }
            t.push_str(&note);
        }
        Content::Parts(parts) => parts.push(ContentPart::Text { text: note }),
    }
}

/// Host metadata of an observation message (outbound only: it is never in the transcript).
pub const OBSERVATION_KEY: &str = "moviepilot_tool_observation";

/// Turn state: the provider refused image input this turn (the model named), so every later
/// request of the turn is text-only. Fresh for every loop run, as the turn's slots are.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct VisionRejected(pub Option<String>);

/// Records that the provider refused image input for `model` in this turn.
pub fn reject_for_turn(turn: &crate::sync::Slots, model: &str, error: &mpa_model::ModelError) {
    tracing::info!(
        model,
        status = ?error.status(),
        "the provider refused image input: this call once more without images, the rest of the turn text-only"
    );
    turn.put(VisionRejected(Some(model.to_string())));
}

/// Whether image input was refused earlier in this turn.
pub fn rejected_this_turn(turn: &crate::sync::Slots) -> bool {
    turn.with(|r: &mut VisionRejected| r.0.is_some())
}

/// Whether requests to `model` may carry images: the switch `LLM_SUPPORT_IMAGE_INPUT` is on and
/// the catalogue does not mark the model text-only (unknown models follow the switch).
pub fn model_sees(support_image_input: bool, model: &str) -> bool {
    mpa_model::model_profile(model).vision_enabled(support_image_input)
}

/// The note an evidence record of a message with images carries (the images are not stored).
pub fn evidence_note(m: &Message) -> Option<&'static str> {
    (!m.images.is_empty()).then_some(HISTORICAL_IMAGE_NOTE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpa_protocol::{ImageBlock, ImageDetail, ImageMime, Outcome};

    #[test]
    fn a_retired_message_keeps_its_text_and_the_note_and_no_bytes() {
        let mut m = Message::tool(
            "c1",
            "view_image",
            r#"{"success":true}"#,
            Outcome::Succeeded,
        );
        m.images.push(ImageBlock::new(
            vec![1u8; 10],
            ImageMime::Png,
            ImageDetail::Auto,
        ));
        retire_images(&mut m);
        assert!(m.images.is_empty());
        assert_eq!(
            m.text(),
            format!("{{\"success\":true}}\n\n{HISTORICAL_IMAGE_NOTE}")
        );
        let saved = serde_json::to_string(&m).unwrap();
        assert!(!saved.contains("images"), "{saved}");
    }
}
