//! Said to the model when the actor is not the session's owner (an admin continuing a chat).

use super::{Contributor, Outbound, StepView};

pub struct ActingNote;

impl Contributor for ActingNote {
    fn name(&self) -> &'static str {
        "acting_note"
    }

    fn contribute(&self, view: &StepView<'_>, out: &mut Outbound) {
        if let Some(note) = &view.setup.acting_note {
            out.blocks.push(note.clone());
        }
    }
}
