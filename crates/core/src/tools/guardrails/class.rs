//! How the loop guardrails treat a tool's calls (spec learning-guardrails.md §5.2), declared by
//! the tool in its [`ToolMeta`](crate::tools::ToolMeta). What the call's effect already says is
//! not repeated here: a call whose effect is a read is idempotent (the same arguments should give
//! the same result, so a repeat is no progress), any other call's success is progress (a new
//! experiment: failure counts restart).

use serde_json::Value;

/// A per-turn budget a tool's calls count against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnBudget {
    /// Web searches (`search_web`).
    WebSearch,
    /// Subagent launches (`task`, `subagent_task`): a call launching several counts each.
    Subagents,
}

impl TurnBudget {
    pub const ALL: [TurnBudget; 2] = [TurnBudget::WebSearch, TurnBudget::Subagents];

    pub fn index(self) -> usize {
        match self {
            TurnBudget::WebSearch => 0,
            TurnBudget::Subagents => 1,
        }
    }
}

/// A tool's loop class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopClass {
    /// A run of distinct failures is diagnosis (a terminal): never halted on the same-tool axis.
    pub failure_tolerant: bool,
    /// Changes session state although its effect is a read (the plan): a success is progress
    /// and a repeat is not "no progress".
    pub changes_state: bool,
    /// Every call polls something that moves on its own (a receipt, a job).
    pub always_polls: bool,
    /// The values of the `action` argument that poll (`read`, `wait`, `status`, `list` of a
    /// terminal or a subagent): polling is allowed, the tool's other actions are not exempt.
    pub poll_actions: &'static [&'static str],
    /// The argument that names what a multi-operation tool does (`operation_id`): failures of
    /// different operations are different tools on the same-tool axis.
    pub key_argument: Option<&'static str>,
    pub budget: Option<TurnBudget>,
    /// Values of `action` that launch nothing (list, steer, stop): they never count against
    /// the budget, so steering what already runs keeps working.
    pub budget_free_actions: &'static [&'static str],
}

impl LoopClass {
    /// A tool with no special treatment.
    pub const PLAIN: LoopClass = LoopClass {
        failure_tolerant: false,
        changes_state: false,
        always_polls: false,
        poll_actions: &[],
        key_argument: None,
        budget: None,
        budget_free_actions: &[],
    };

    /// A terminal: failures are diagnosis; `read`/`wait`/`status`/`list` poll.
    pub const TERMINAL: LoopClass = LoopClass {
        failure_tolerant: true,
        poll_actions: POLL_ACTIONS,
        ..Self::PLAIN
    };

    /// Every call polls (a receipt's state).
    pub const POLLER: LoopClass = LoopClass {
        always_polls: true,
        ..Self::PLAIN
    };

    /// A read by effect that changes session state (the plan).
    pub const SESSION_STATE: LoopClass = LoopClass {
        changes_state: true,
        ..Self::PLAIN
    };

    /// A multi-operation tool whose `argument` names the operation.
    pub const fn keyed_by(argument: &'static str) -> LoopClass {
        LoopClass {
            key_argument: Some(argument),
            ..Self::PLAIN
        }
    }

    /// Web searches: 50 per turn.
    pub const WEB_SEARCH: LoopClass = LoopClass {
        budget: Some(TurnBudget::WebSearch),
        ..Self::PLAIN
    };

    /// Subagent launches: 50 per turn; the control and polling actions launch nothing.
    pub const SUBAGENTS: LoopClass = LoopClass {
        poll_actions: POLL_ACTIONS,
        budget: Some(TurnBudget::Subagents),
        budget_free_actions: SUBAGENT_CONTROL,
        ..Self::PLAIN
    };

    /// The browser: failed navigations are diagnosis (spec: `browser_navigate` is
    /// failure-tolerant); waiting and listing tabs poll.
    pub const BROWSER: LoopClass = LoopClass {
        failure_tolerant: true,
        poll_actions: &["wait", "list_tabs"],
        ..Self::PLAIN
    };

    /// The class a tool gets: its own, or — for a tool that declared none — the class its name
    /// has in the references' tables (so a web-search or subagent tool is budgeted from the day
    /// it registers).
    pub fn of(tool: &str, declared: LoopClass) -> LoopClass {
        if declared != Self::PLAIN {
            return declared;
        }
        match tool {
            "search_web" | "web_search" => Self::WEB_SEARCH,
            "task" | "subagent_task" | "delegate_task" => Self::SUBAGENTS,
            _ => declared,
        }
    }

    fn action(args: Option<&Value>) -> Option<&str> {
        args?.get("action")?.as_str()
    }

    /// This call polls (allowed to repeat; exempt from identical-call notices).
    pub fn polls(&self, args: Option<&Value>) -> bool {
        self.always_polls || Self::action(args).is_some_and(|a| self.poll_actions.contains(&a))
    }

    /// How many units of its budget this call uses (0 for control and polling actions).
    pub fn launches(&self, args: Option<&Value>) -> u32 {
        if self.budget.is_none() {
            return 0;
        }
        if let Some(action) = Self::action(args)
            && (self.budget_free_actions.contains(&action) || self.poll_actions.contains(&action))
        {
            return 0;
        }
        match args.and_then(|a| a.get("tasks")).and_then(Value::as_array) {
            Some(tasks) if !tasks.is_empty() => u32::try_from(tasks.len()).unwrap_or(u32::MAX),
            _ => 1,
        }
    }
}

impl Default for LoopClass {
    fn default() -> Self {
        Self::PLAIN
    }
}

const POLL_ACTIONS: &[&str] = &["read", "wait", "status", "list"];
const SUBAGENT_CONTROL: &[&str] = &["list", "status", "wait", "read", "steer", "stop", "cancel"];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn terminal_polls_only_its_polling_actions() {
        let t = LoopClass::TERMINAL;
        assert!(t.polls(Some(&json!({"action": "wait", "session_id": "t1"}))));
        assert!(t.polls(Some(&json!({"action": "list"}))));
        assert!(!t.polls(Some(&json!({"action": "run", "command": "ls"}))));
        assert!(!t.polls(None));
    }

    #[test]
    fn subagent_launches_count_tasks_and_control_actions_launch_nothing() {
        let s = LoopClass::of("subagent_task", LoopClass::PLAIN);
        assert_eq!(s.budget, Some(TurnBudget::Subagents));
        assert_eq!(s.launches(Some(&json!({"goal": "x"}))), 1);
        assert_eq!(s.launches(Some(&json!({"tasks": [{}, {}, {}]}))), 3);
        for action in ["list", "steer", "stop", "status", "wait"] {
            assert_eq!(s.launches(Some(&json!({"action": action}))), 0, "{action}");
        }
        assert_eq!(
            LoopClass::of("search_web", LoopClass::PLAIN).launches(None),
            1
        );
        assert_eq!(LoopClass::PLAIN.launches(None), 0);
    }

    #[test]
    fn a_declared_class_wins_over_the_name_table() {
        assert_eq!(
            LoopClass::of("search_web", LoopClass::TERMINAL),
            LoopClass::TERMINAL
        );
    }
}
