//! Tool discovery (spec runtime.md §3.3): with discoveries pending, this call's tools are the
//! baseline plus the discoveries that fit the budget, and the `<tool_discovery_availability>`
//! block tells the model each candidate's status.

use super::{Contributor, Outbound, StepView};
use crate::tools::search_tools::{Discovery, admit, availability_notice};
use crate::turn::request::Tail;
use crate::turn::steps::count_request;

pub struct ToolDiscovery;

impl Contributor for ToolDiscovery {
    fn name(&self) -> &'static str {
        "tool_discovery"
    }

    fn contribute(&self, view: &StepView<'_>, out: &mut Outbound) {
        let offer = &view.state.offer;
        let Some(catalogue) = offer.catalogue.as_deref() else {
            return;
        };
        let discovery = view
            .session
            .with(|d: &mut Discovery| (d.enabled && !d.discovered.is_empty()).then(|| d.clone()));
        let Some(discovery) = discovery else {
            return;
        };
        // The baseline request, with the notice in its longest form.
        let longest = availability_notice(
            &discovery
                .discovered
                .iter()
                .map(|n| (n.clone(), "unavailable_in_current_catalog".to_string()))
                .collect(),
        );
        let mut blocks: Vec<&str> = out.blocks.iter().map(String::as_str).collect();
        blocks.push(&longest);
        let messages = view.transcript.messages();
        let tail = Tail::new(messages, &blocks);
        let budget = &view.setup.budget;
        let estimated = count_request(
            budget.counter,
            view.setup.system,
            &[],
            (0, messages),
            &tail,
            &offer.specs,
            view.transcript.tokens(),
        )
        .input_tokens();
        let by_name = catalogue.iter().map(|s| (s.name.as_str(), s)).collect();
        let (statuses, enabled) = admit(
            &discovery,
            &by_name,
            budget.context_window_tokens,
            estimated,
            budget.counter,
        );
        let mut specs = offer.specs.clone();
        specs.extend(
            catalogue
                .iter()
                .filter(|s| enabled.contains(&s.name))
                .cloned(),
        );
        out.specs = Some(specs);
        out.blocks.push(availability_notice(&statuses));
        out.tool_discovery = Some(statuses);
    }
}
