//! The encoded-query builder and parser: a term built from any field and value either is refused
//! or reads back as itself; a user query either is refused or its canonical form parses to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snow_core::table::query::{BaseQuery, Op, Term};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(query) = BaseQuery::parse(&text) {
        let canonical = query.canonical();
        let again = BaseQuery::parse(&canonical).expect("a canonical query parses");
        assert_eq!(again.canonical(), canonical, "canonical form is stable");
        let term = Term::new("sys_updated_on", Op::Gt, "2026-01-01 00:00:00").expect("a plain term");
        let _ = query.with_cursor(&[term], &["sys_updated_on", "sys_id"]);
    }
    let (field, value) = text.split_once('\u{1}').unwrap_or((&text, ""));
    for op in [Op::Eq, Op::Gt, Op::Ge] {
        if let Ok(term) = Term::new(field, op, value) {
            assert!(term.as_str().contains(field), "the field is in its term");
            assert!(!term.as_str().contains("^"), "a value never makes a second term: {:?}", term.as_str());
        }
    }
});
