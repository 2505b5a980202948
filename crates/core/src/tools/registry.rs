//! The layered tool registry. Three layers, looked up in this order:
//!
//! 1. **built-in** tools, fixed when the host opens (every capability's tools, see
//!    [`crate::capability`]);
//! 2. **host-wide dynamic sets**, added and removed while the host runs (one per external MCP
//!    server, say) with [`Tools::add_set`] / [`Tools::remove_set`];
//! 3. **per-session sets**, which only one session sees ([`SessionTools`], in its slots).
//!
//! A model call, and every tool call, works on a [`ToolView`]: a snapshot of the three layers
//! taken in a few pointer copies. A set removed after a call started does not affect that call
//! (it holds its tool); the next lookup no longer finds it (`unknown_tool`). A name is unique
//! across the layers: a set naming a tool that exists already is refused, so an external server
//! can never shadow a built-in tool.

use super::{RegisteredTool, ToolRegistry, policy};
use crate::error::{CoreError, Result};
use mpa_protocol::{Actor, ToolSpec};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

type Sets = BTreeMap<String, Arc<ToolRegistry>>;

struct Inner {
    builtin: Arc<ToolRegistry>,
    dynamic: RwLock<Arc<Sets>>,
    generation: AtomicU64,
}

/// The host's tools (built-in + dynamic sets). Cheap to clone.
#[derive(Clone)]
pub struct Tools(Arc<Inner>);

impl From<ToolRegistry> for Tools {
    fn from(builtin: ToolRegistry) -> Self {
        Tools(Arc::new(Inner {
            builtin: Arc::new(builtin),
            dynamic: RwLock::new(Arc::new(Sets::new())),
            generation: AtomicU64::new(0),
        }))
    }
}

/// A session's own tool sets (the third layer), kept in the session's slots.
#[derive(Default)]
pub struct SessionTools {
    sets: Arc<Sets>,
    generation: u64,
}

impl SessionTools {
    /// Adds (or replaces) the session's set `name`.
    pub fn add_set(&mut self, name: &str, set: ToolRegistry) {
        let mut sets = (*self.sets).clone();
        sets.insert(name.to_string(), Arc::new(set));
        self.sets = Arc::new(sets);
        self.generation += 1;
    }

    pub fn remove_set(&mut self, name: &str) -> bool {
        let mut sets = (*self.sets).clone();
        let removed = sets.remove(name).is_some();
        if removed {
            self.sets = Arc::new(sets);
            self.generation += 1;
        }
        removed
    }
}

impl Tools {
    fn dynamic(&self) -> Arc<Sets> {
        // A writer that panicked left the previous map or the new one, both whole.
        Arc::clone(
            &self
                .0
                .dynamic
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Changes with every added or removed dynamic set (a model call compares it to know whether
    /// to list its tools again).
    pub fn generation(&self) -> u64 {
        self.0.generation.load(Ordering::Acquire)
    }

    /// Adds the host-wide set `name` (replacing an older set of that name). Refused when one of
    /// its tools is named like a tool of another layer.
    pub fn add_set(&self, name: &str, set: ToolRegistry) -> Result<()> {
        let mut dynamic = self
            .0
            .dynamic
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for tool in set.names() {
            let taken = self.0.builtin.get(tool).is_some()
                || dynamic
                    .iter()
                    .any(|(other, s)| other != name && s.get(tool).is_some());
            if taken {
                return Err(CoreError::ToolNameTaken(tool.to_string()));
            }
        }
        let mut sets = (**dynamic).clone();
        sets.insert(name.to_string(), Arc::new(set));
        *dynamic = Arc::new(sets);
        self.0.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Removes the host-wide set `name`; calls already running keep their tool.
    pub fn remove_set(&self, name: &str) -> bool {
        let mut dynamic = self
            .0
            .dynamic
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !dynamic.contains_key(name) {
            return false;
        }
        let mut sets = (**dynamic).clone();
        sets.remove(name);
        *dynamic = Arc::new(sets);
        self.0.generation.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// The host's layers as of now (no session layer).
    pub fn view(&self) -> ToolView {
        ToolView {
            builtin: Arc::clone(&self.0.builtin),
            dynamic: self.dynamic(),
            session: Arc::new(Sets::new()),
            generation: (self.generation(), 0),
        }
    }

    /// All three layers as of now, for the session with these slots.
    pub fn view_for(&self, session: &crate::tools::SessionState) -> ToolView {
        let (sets, generation) =
            session.with(|t: &mut SessionTools| (Arc::clone(&t.sets), t.generation));
        ToolView {
            session: sets,
            generation: (self.generation(), generation),
            ..self.view()
        }
    }

    /// The built-in layer.
    pub fn builtin(&self) -> &ToolRegistry {
        &self.0.builtin
    }

    /// A host-wide tool by name (a copy; see [`ToolView::get`] for a borrowed one).
    pub fn get(&self, name: &str) -> Option<RegisteredTool> {
        self.view().get(name).cloned()
    }

    /// Every host-wide tool (built-in first, then the dynamic sets), copied.
    pub fn list(&self) -> Vec<RegisteredTool> {
        self.view().iter().cloned().collect()
    }

    /// What the policy knows about a host-wide tool.
    pub fn meta(&self, name: &str) -> Option<super::ToolMeta> {
        self.view().get(name).map(|t| t.meta)
    }

    /// See [`ToolView::specs_for`].
    pub fn specs_for(&self, actor: &Actor) -> Vec<ToolSpec> {
        self.view().specs_for(actor)
    }
}

/// One snapshot of the three layers.
#[derive(Clone)]
pub struct ToolView {
    builtin: Arc<ToolRegistry>,
    dynamic: Arc<Sets>,
    session: Arc<Sets>,
    generation: (u64, u64),
}

impl ToolView {
    /// Whether the layers changed since `generation` was taken.
    pub fn generation(&self) -> (u64, u64) {
        self.generation
    }

    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.builtin.get(name).or_else(|| {
            self.dynamic
                .values()
                .chain(self.session.values())
                .find_map(|s| s.get(name))
        })
    }

    /// Every tool, built-in first (so the listed prefix stays stable while sets come and go);
    /// a name is listed once, as [`ToolView::get`] finds it.
    pub fn iter(&self) -> impl Iterator<Item = &RegisteredTool> {
        let mut seen = std::collections::HashSet::new();
        self.builtin.iter().chain(
            self.dynamic
                .values()
                .chain(self.session.values())
                .flat_map(|s| s.iter())
                .filter(move |t| {
                    self.builtin.get(&t.spec.name).is_none() && seen.insert(t.spec.name.as_str())
                }),
        )
    }

    /// Whether `name` is one of the host's own built-in tools (not a dynamic set's).
    pub fn is_builtin(&self, name: &str) -> bool {
        self.builtin.get(name).is_some()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|t| t.spec.name.as_str())
    }

    /// Names of the tools this actor may see (admin-only tools are hidden from non-admins).
    pub fn names_for<'a>(&'a self, actor: &'a Actor) -> impl Iterator<Item = &'a str> {
        self.iter()
            .filter(move |t| policy::visible(actor, &t.meta))
            .map(|t| t.spec.name.as_str())
    }

    /// Specs of the tools this actor may see (admin-only tools are hidden from non-admins).
    pub fn specs_for(&self, actor: &Actor) -> Vec<ToolSpec> {
        self.iter()
            .filter(|t| policy::visible(actor, &t.meta))
            .map(RegisteredTool::current_spec)
            .collect()
    }

    /// What may be published to another client (an MCP `tools/list`, an API's function list):
    /// the tools the actor may see, minus the host-internal ones ([`super::ToolMeta::internal`]).
    /// Every place that publishes tools goes through this.
    pub fn publishable_specs(&self, actor: &Actor) -> Vec<ToolSpec> {
        self.iter()
            .filter(|t| policy::visible(actor, &t.meta) && !t.meta.internal)
            .map(RegisteredTool::current_spec)
            .collect()
    }
}
