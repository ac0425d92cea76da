//! Assigning units (tables) to tasks by rendezvous hashing: deterministic, balanced in
//! expectation, and going from n to n+1 tasks moves units only to the new task.

use super::position::fnv1a64;

/// For each task, the indexes of the `units` it runs. Empty tasks are dropped.
pub fn assign(units: &[String], max_tasks: u32) -> Vec<Vec<usize>> {
    let tasks = max_tasks.max(1) as usize;
    let mut out = vec![Vec::new(); tasks];
    for (i, unit) in units.iter().enumerate() {
        let best = (0..tasks).max_by_key(|t| score(unit, *t)).unwrap_or(0);
        out[best].push(i);
    }
    out.retain(|units| !units.is_empty());
    out
}

fn score(unit: &str, task: usize) -> u64 {
    // splitmix64 finaliser over the unit hash mixed with the task number.
    let mut z = fnv1a64(unit.as_bytes()) ^ (task as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(plan: &[Vec<usize>], units: &[String], tasks: u32) -> Vec<usize> {
        // Recompute per unit which task index (of all tasks, not only non-empty ones) holds it.
        let _ = plan;
        units.iter().map(|u| (0..tasks as usize).max_by_key(|t| score(u, *t)).unwrap()).collect()
    }

    #[test]
    fn every_unit_once_and_adding_a_task_moves_only_to_it() {
        let units: Vec<String> = (0..50).map(|i| format!("table_{i}")).collect();
        for tasks in 1..8 {
            let plan = assign(&units, tasks);
            let mut all: Vec<usize> = plan.concat();
            all.sort_unstable();
            assert_eq!(all, (0..50).collect::<Vec<_>>());
            let before = owner(&plan, &units, tasks);
            let after = owner(&assign(&units, tasks + 1), &units, tasks + 1);
            for (b, a) in before.iter().zip(&after) {
                assert!(a == b || *a == tasks as usize, "unit moved from {b} to {a}, not to the new task {tasks}");
            }
        }
    }

    #[test]
    fn spreads_units() {
        let units: Vec<String> = (0..400).map(|i| format!("t{i}")).collect();
        let plan = assign(&units, 4);
        assert_eq!(plan.len(), 4);
        assert!(plan.iter().all(|p| p.len() > 60), "{:?}", plan.iter().map(Vec::len).collect::<Vec<_>>());
    }
}
