//! The migration report, for a reader (`migration-report.md`) and for a program
//! (`migration-report.json`), and the exit code: 0 every key translated, 1 some REVIEW,
//! 2 some MANUAL, 4 invalid input (the highest applies).

use std::collections::BTreeMap;

use super::input::Invalid;
use super::output::Connector;
use super::rules::Class;

/// Counts per class over every row.
pub fn counts(connectors: &[Connector]) -> BTreeMap<Class, usize> {
    let mut counts = BTreeMap::new();
    for r in connectors.iter().flat_map(|c| &c.rows) {
        *counts.entry(r.row.class).or_insert(0) += 1;
    }
    counts
}

/// 0 clean, 1 review, 2 manual, 4 invalid input.
pub fn exit_code(connectors: &[Connector], invalid: &[Invalid]) -> u8 {
    if !invalid.is_empty() {
        return 4;
    }
    let worst = connectors
        .iter()
        .flat_map(|c| c.rows.iter().map(|r| r.row.class))
        .chain(connectors.iter().filter(|c| !c.problems.is_empty()).map(|_| Class::Manual))
        .max();
    match worst {
        Some(Class::Manual) => 2,
        Some(Class::Review) => 1,
        _ => 0,
    }
}

fn verdict(code: u8) -> &'static str {
    match code {
        0 => "clean: every key translated",
        1 => "REVIEW: translated, with changes of meaning to accept",
        2 => "MANUAL: some keys cannot be expressed here; see what to do instead",
        _ => "INVALID input: some files could not be translated",
    }
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// `migration-report.md`.
pub fn markdown(connectors: &[Connector], invalid: &[Invalid]) -> String {
    let code = exit_code(connectors, invalid);
    let counts = counts(connectors);
    let n = |c: Class| counts.get(&c).copied().unwrap_or(0);
    let mut out = String::from("# Migration report\n\n");
    out.push_str(&format!(
        "**{}** (exit code {code}). {} connector(s) of ours from {} old connector(s); keys: {} translated, {} not needed, \
         {} REVIEW, {} MANUAL{}.\n\n",
        verdict(code),
        connectors.len(),
        connectors.iter().map(|c| c.from.len()).sum::<usize>(),
        n(Class::Translated),
        n(Class::NotNeeded),
        n(Class::Review),
        n(Class::Manual),
        if invalid.is_empty() { String::new() } else { format!("; {} invalid input(s)", invalid.len()) },
    ));
    out.push_str("No value of a credential appears here or in the files written: literals became `${env:…}` placeholders.\n\n");
    if !invalid.is_empty() {
        out.push_str("## Invalid input\n\n");
        for i in invalid {
            out.push_str(&format!("- `{}`: {}\n", i.file, i.reason));
        }
        out.push('\n');
    }
    for c in connectors {
        out.push_str(&format!("## `{}` ({})\n\n", c.name, c.kind));
        out.push_str(&format!(
            "Replaces {}. Files: `{}.properties` (`snow-connect run`), `{}.json` (`POST /connectors` of a fleet).\n\n",
            c.from.iter().map(|o| format!("`{}` ({}, `{}`)", o.name, o.product.title(), o.file)).collect::<Vec<_>>().join(", "),
            c.name,
            c.name
        ));
        if c.kind == "source" {
            // One cutover per old connector: each carries its own table's position.
            for old in &c.from {
                out.push_str(&format!(
                    "Before it starts, with `{}` stopped, carry its position over: `snow-connect migrate cutover {}.properties \
                     --old-connector {} --old-offsets-topic <its Connect cluster's offsets topic>` (docs/migration.md, the runbook).\n\n",
                    old.name, c.name, old.name
                ));
            }
        }
        if !c.env.is_empty() {
            out.push_str("Environment variables to set (the values are not written anywhere by the migration):\n\n");
            for e in &c.env {
                out.push_str(&format!("- `{}` for `{}`\n", e.name, e.key));
            }
            out.push('\n');
        }
        if !c.deployment.is_empty() {
            out.push_str("Still to supply:\n\n");
            for d in &c.deployment {
                out.push_str(&format!("- {d}\n"));
            }
            out.push('\n');
        }
        for (old, keys) in &c.apart {
            out.push_str(&format!("Kept apart from `{old}` (same instance): differs in {}.\n\n", keys.join(", ")));
        }
        if !c.problems.is_empty() {
            out.push_str("This runtime refuses the translation as it stands (MANUAL):\n\n");
            for p in &c.problems {
                out.push_str(&format!("- {p}\n"));
            }
            out.push('\n');
        }
        out.push_str("| old connector | key | value | result | becomes | note | evidence |\n|---|---|---|---|---|---|---|\n");
        for r in &c.rows {
            out.push_str(&format!(
                "| {} | `{}` | {} | {} | {} | {} | {} |\n",
                cell(&r.connector),
                cell(&r.row.key),
                cell(&r.row.value),
                r.row.class.label(),
                if r.row.ours.is_empty() {
                    "—".into()
                } else {
                    r.row.ours.iter().map(|o| format!("`{o}`")).collect::<Vec<_>>().join(", ")
                },
                cell(&r.row.note),
                cell(&r.row.evidence)
            ));
        }
        out.push('\n');
    }
    out
}

/// `migration-report.json`.
pub fn json(connectors: &[Connector], invalid: &[Invalid]) -> String {
    let counts: BTreeMap<&str, usize> = counts(connectors).into_iter().map(|(c, n)| (c.label(), n)).collect();
    let value = serde_json::json!({
        "exit_code": exit_code(connectors, invalid),
        "counts": counts,
        "invalid": invalid,
        "connectors": connectors,
    });
    format!("{value:#}\n")
}
