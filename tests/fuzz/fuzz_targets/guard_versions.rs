//! The stale-write guard's version comparison (snow-core `sink::guard`): two versions as text
//! from a row and a record (input: the two separated by a zero byte). Never a panic, and the order
//! is one: a compare that answers answers the same both ways round, reversed, and a version equals
//! itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snow_core::sink::guard::Version;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (a, b) = text.split_once('\0').unwrap_or((&text, ""));
    let (a, b) = (Version(a.to_string()), Version(b.to_string()));
    match (a.compare(&b), b.compare(&a)) {
        (Ok(ab), Ok(ba)) => assert_eq!(ab, ba.reverse(), "{a:?} {b:?}"),
        (Err(_), Err(_)) => {}
        (one, other) => panic!("compare answers one way only: {one:?} {other:?} for {a:?} {b:?}"),
    }
    if let Ok(same) = a.compare(&a) {
        assert_eq!(same, std::cmp::Ordering::Equal);
    }
});
