//! The budget of a source unit against a record Kafka refuses for good: refused this many times in
//! a row, the unit is parked rather than reopened forever (traps: [`crate::component::trap::TrapBudget`]).

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
    use super::RefusalBudget;

    #[test]
    fn only_the_same_record_refused_again_counts() {
        let mut refusals = RefusalBudget::new(2);
        assert_eq!(refusals.refused("incident/a", "x"), None);
        assert_eq!(refusals.refused("incident/b", "x"), None, "another record starts the count again");
        let why = refusals.refused("incident/b", "Kafka refused record b").unwrap();
        assert!(why.starts_with("Kafka refused record b; refused 2 times in a row"), "{why}");
    }
}
