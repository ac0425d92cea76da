//! Traps: one in one line, for status and parking messages (what trapped — the trap code, or the
//! root cause when it was not a wasm trap — and the innermost named function of the component,
//! without the multi-line backtrace the full error carries, which is logged as it is); and the
//! budget that parks a unit (a source table, a sink lane) whose component keeps trapping.

use wasmtime::{Trap, WasmBacktrace};

/// `error`, a failed call into a component, in one line.
pub fn one_line(error: &wasmtime::Error) -> String {
    let what = match error.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => error.root_cause().to_string().lines().next().unwrap_or_default().to_string(),
    };
    let function = error.downcast_ref::<WasmBacktrace>().and_then(|bt| bt.frames().iter().find_map(|f| f.func_name()));
    match function {
        Some(name) => format!("{what} (in {name})"),
        None => what,
    }
}

/// Counts traps in a row: a unit whose component traps `budget` times without a successful call (a poll, a put)
/// between them is parked (a trap that repeats is a bug in the component or a row it cannot
/// handle; reopening forever would only read the same page again).
pub struct TrapBudget {
    budget: u32,
    in_a_row: u32,
}

impl TrapBudget {
    /// A budget of `budget` traps in a row (at least one).
    pub fn new(budget: u32) -> Self {
        Self { budget: budget.max(1), in_a_row: 0 }
    }

    /// Counts a trap; returns why to park when the budget is spent.
    pub fn trapped(&mut self, message: &str) -> Option<String> {
        self.in_a_row += 1;
        (self.in_a_row >= self.budget).then(|| {
            format!(
                "the component trapped {} times in a row without a successful call (component.trap.budget={}); the last: {message}",
                self.in_a_row, self.budget
            )
        })
    }

    /// A call succeeded: the count starts again.
    pub fn succeeded(&mut self) {
        self.in_a_row = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::TrapBudget;

    #[test]
    fn the_budget_parks_only_traps_in_a_row() {
        let mut traps = TrapBudget::new(3);
        assert_eq!((traps.trapped("a"), traps.trapped("b")), (None, None));
        traps.succeeded();
        assert_eq!((traps.trapped("c"), traps.trapped("d")), (None, None), "a successful call starts the count again");
        let why = traps.trapped("the last one").unwrap();
        assert!(why.contains("trapped 3 times in a row") && why.ends_with("the last: the last one"), "{why}");
    }
}
