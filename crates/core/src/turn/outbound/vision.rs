//! The vision projection as an outbound contributor (spec runtime.md §9.3–§9.4): images are
//! shown when `LLM_SUPPORT_IMAGE_INPUT` is on, the catalogue does not mark the model text-only
//! and the provider has not refused image input this turn; the work is
//! [`crate::vision::projection`].

use super::{Contributor, Outbound, StepView};
use crate::vision::projection::{NotShown, project};
use crate::vision::{model_sees, rejected_this_turn};

pub struct VisionProjection;

impl Contributor for VisionProjection {
    fn name(&self) -> &'static str {
        "vision_projection"
    }

    fn contribute(&self, view: &StepView<'_>, out: &mut Outbound) {
        let messages = view.transcript.messages();
        if messages.iter().all(|m| m.images.is_empty()) {
            return;
        }
        let cfg = &view.setup.services.cfg;
        let blind = if !model_sees(cfg.support_image_input, &cfg.model.model) {
            Some(NotShown::ModelBlind)
        } else if rejected_this_turn(&view.state.turn) {
            Some(NotShown::Rejected)
        } else {
            None
        };
        let projected = project(messages, blind);
        out.patches = projected.patches;
        out.observed = projected.observed;
    }
}
