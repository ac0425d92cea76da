//! The key reference of `docs/migration.md`, generated from the rule tables (one source for the
//! code and the document): a section per product, Kafka Connect's keys once, and the defaults
//! each product's translation writes when the old configuration leaves them out. A test fails
//! when the document and the tables disagree; `SNOW_UPDATE_GOLDEN=1` rewrites the section.

use super::Product;
use super::rules::KeyRule;
use super::tables;

/// Where the generated section starts and ends in `docs/migration.md`.
pub const BEGIN: &str = "<!-- key reference: generated from host-runner/migrate/src/tables; do not edit by hand -->";
/// See [`BEGIN`].
pub const END: &str = "<!-- end of the key reference -->";

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn table(rows: &[&KeyRule]) -> String {
    let mut out = String::from("| key | becomes | result | how, why, or what to do instead | evidence |\n|---|---|---|---|---|\n");
    for r in rows {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            r.key,
            if r.target().starts_with('(') || r.target() == "—" { r.target().to_string() } else { format!("`{}`", r.target()) },
            r.class().label(),
            cell(r.note),
            cell(r.evidence)
        ));
    }
    out
}

/// The generated section (between [`BEGIN`] and [`END`]).
pub fn key_reference() -> String {
    let framework = tables::framework_rows();
    let mut out = String::new();
    for product in Product::ALL {
        // A product's own rows (a framework key it says more about included), not Connect's shared ones.
        let rows: Vec<&KeyRule> = tables::rows(product).into_iter().filter(|r| !framework.iter().any(|f| std::ptr::eq(f, *r))).collect();
        out.push_str(&format!("### {} (`connector.class={}`)\n\n", product.title(), product.class()));
        out.push_str(&table(&rows));
        let implied = tables::implied(product);
        if !implied.is_empty() {
            out.push_str("\nWhen the configuration leaves them out, the translation applies the product's default: ");
            out.push_str(
                &implied
                    .iter()
                    .map(|(k, v)| if v.is_empty() { format!("`{k}` (explained only)") } else { format!("`{k}={v}`") })
                    .collect::<Vec<_>>()
                    .join(", "),
            );
            out.push_str(".\n");
        }
        out.push('\n');
    }
    out.push_str("### Kafka Connect's own keys (every product)\n\n");
    out.push_str(&table(&tables::framework_rows().iter().collect::<Vec<_>>()));
    out.push_str(
        "\nA key no table names is MANUAL, naming it (\"not a documented key of …\"). `${connector}` in a value is this \
         runtime's connector name.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_key_reference_is_the_tables() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/migration.md");
        let doc = std::fs::read_to_string(&path).expect("docs/migration.md");
        let (start, end) = (doc.find(BEGIN).expect("the BEGIN marker"), doc.find(END).expect("the END marker"));
        let generated = format!("{BEGIN}\n\n{}\n{END}", key_reference());
        if std::env::var_os("SNOW_UPDATE_GOLDEN").is_some() {
            let updated = format!("{}{generated}{}", &doc[..start], &doc[end + END.len()..]);
            std::fs::write(&path, updated).unwrap();
            return;
        }
        assert!(
            doc[start..end + END.len()] == generated,
            "docs/migration.md's key reference differs from the rule tables: SNOW_UPDATE_GOLDEN=1 cargo test -p host-runner --lib migrate::docs rewrites it"
        );
    }
}
