//! Turn start: restore the plan from the newest snapshot when the session has none, and build the
//! user message (images only when the model accepts them).

use crate::agent::Services;
use crate::plan::Plan;
use crate::session::SessionData;
use mpa_protocol::{ContentPart, ImageUrl, Message};

pub fn restore_plan(data: &SessionData) {
    if let Ok(mut st) = data.state.lock()
        && st.plan.is_none()
    {
        // An existing in-session plan is never overwritten by an older snapshot.
        st.plan = Plan::restore_from(&data.messages);
    }
}

pub fn user_message(services: &Services, text: &str, images: &[String]) -> Message {
    if images.is_empty() {
        return Message::user(text);
    }
    let supports = services.cfg.support_image_input
        && mpa_model::model_profile(&services.cfg.model.model)
            .supports_images
            .unwrap_or(true);
    if !supports {
        return Message::user(format!(
            "{text}\n\n[{} image(s) attached but not sent: the configured model does not accept image input]",
            images.len()
        ));
    }
    let mut parts = vec![ContentPart::Text {
        text: text.to_string(),
    }];
    parts.extend(images.iter().map(|url| ContentPart::ImageUrl {
        image_url: ImageUrl { url: url.clone() },
    }));
    Message::user_parts(parts)
}
