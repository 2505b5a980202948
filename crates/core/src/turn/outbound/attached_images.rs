//! User images by reference (spec runtime.md §9, §14.1): a message the user sent with an image
//! holds `attachment:<id>`, never the bytes; this contributor puts the image itself on the
//! outbound copy of every model request, or — once the file is gone — a text note saying so.
//! Nothing it adds is saved.

use super::{Contributor, Outbound, StepView};
use crate::web::attachments::is_reference;
use mpa_protocol::{Content, ContentPart, ImageUrl, Message};

/// What the model reads where an attached image no longer exists.
const GONE: &str = "[An image the user attached earlier is no longer available (attachments are kept for 6 hours); it was not sent.]";

pub struct AttachedImages;

fn references(m: &Message) -> bool {
    matches!(&m.content, Content::Parts(parts) if parts.iter().any(|p| matches!(
        p, ContentPart::ImageUrl { image_url } if is_reference(&image_url.url))))
}

impl Contributor for AttachedImages {
    fn name(&self) -> &'static str {
        "attached_images"
    }

    fn contribute(&self, view: &StepView<'_>, out: &mut Outbound) {
        let attachments = &view.setup.services.attachments;
        let owner = &view.setup.tools.actor.user_id;
        for (i, m) in view.transcript.messages().iter().enumerate() {
            if !references(m) {
                continue;
            }
            // On top of what an earlier contributor already put there for this message.
            let mut copy = out.patches.replace.get(&i).unwrap_or(m).clone();
            if let Content::Parts(parts) = &mut copy.content {
                for part in parts.iter_mut() {
                    let ContentPart::ImageUrl { image_url } = part else {
                        continue;
                    };
                    if !is_reference(&image_url.url) {
                        continue;
                    }
                    *part = match attachments.outbound_image(owner, &image_url.url) {
                        Some(url) => ContentPart::ImageUrl {
                            image_url: ImageUrl {
                                url,
                                ..image_url.clone()
                            },
                        },
                        None => ContentPart::Text { text: GONE.into() },
                    };
                }
            }
            out.patches.replace.insert(i, copy);
        }
    }
}
