//! The trap budget of a source unit: a component that traps this many times in a row, without
//! a successful poll between, is parked rather than reopened forever.

/// Counts traps in a row: a unit whose component traps `budget` times without a successful poll
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
                "the component trapped {} times in a row without a successful poll (component.trap.budget={}); the last: {message}",
                self.in_a_row, self.budget
            )
        })
    }

    /// A poll succeeded: the count starts again.
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
        assert_eq!((traps.trapped("c"), traps.trapped("d")), (None, None), "a successful poll starts the count again");
        let why = traps.trapped("the last one").unwrap();
        assert!(why.contains("trapped 3 times in a row") && why.ends_with("the last: the last one"), "{why}");
    }
}
