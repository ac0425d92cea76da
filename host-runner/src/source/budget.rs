//! The budgets of a source unit against failures that repeat: a component that traps, or a record
//! Kafka refuses for good, this many times in a row parks the unit rather than reopening it forever.

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

/// Counts Kafka's refusals of one record (too large, invalid, forbidden): the same record refused
/// `budget` times in a row parks the unit. Reopening re-reads the record from the stored offset,
/// so the batches before it succeed each time; only the record itself says the failure repeats.
pub struct RefusalBudget {
    budget: u32,
    record: Option<String>,
    in_a_row: u32,
}

impl RefusalBudget {
    /// A budget of `budget` refusals of one record (at least one).
    pub fn new(budget: u32) -> Self {
        Self { budget: budget.max(1), record: None, in_a_row: 0 }
    }

    /// Counts a refusal of `record` (its table and sys_id); returns why to park when the budget is
    /// spent. `what` describes the refusal.
    pub fn refused(&mut self, record: &str, what: &str) -> Option<String> {
        if self.record.as_deref() == Some(record) {
            self.in_a_row += 1;
        } else {
            self.record = Some(record.to_string());
            self.in_a_row = 1;
        }
        (self.in_a_row >= self.budget).then(|| {
            format!("{what}; refused {} times in a row, so the table is parked (component.trap.budget={})", self.in_a_row, self.budget)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{RefusalBudget, TrapBudget};

    #[test]
    fn the_budget_parks_only_traps_in_a_row() {
        let mut traps = TrapBudget::new(3);
        assert_eq!((traps.trapped("a"), traps.trapped("b")), (None, None));
        traps.succeeded();
        assert_eq!((traps.trapped("c"), traps.trapped("d")), (None, None), "a successful poll starts the count again");
        let why = traps.trapped("the last one").unwrap();
        assert!(why.contains("trapped 3 times in a row") && why.ends_with("the last: the last one"), "{why}");
    }

    #[test]
    fn only_the_same_record_refused_again_counts() {
        let mut refusals = RefusalBudget::new(2);
        assert_eq!(refusals.refused("incident/a", "x"), None);
        assert_eq!(refusals.refused("incident/b", "x"), None, "another record starts the count again");
        let why = refusals.refused("incident/b", "Kafka refused record b").unwrap();
        assert!(why.starts_with("Kafka refused record b; refused 2 times in a row"), "{why}");
    }
}
