//! A page of Table API rows kept as raw JSON text: values pass through to Kafka without being
//! re-encoded. Only the fields the cursor needs are decoded from each row.
//!
//! One pass over the page: a validating scanner (strings and escapes, UTF-8 inside strings,
//! numbers, literals, nesting, nothing after the end) that cuts each row of `result` out as a
//! slice and decodes its cursor fields on the way, so a page is read once and rows are never
//! parsed twice. Outside strings JSON is ASCII by its grammar, so checking multi-byte sequences
//! where strings hold them makes every row valid UTF-8 without a separate pass over the page. A cursor field may
//! be a plain string or, with `sysparm_display_value=all`, an object whose `value` member holds
//! the raw value; both are read.

use std::borrow::Cow;

/// One row of a page: its raw JSON text and the decoded cursor fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRow<'a> {
    /// The row exactly as ServiceNow sent it (valid UTF-8 JSON).
    pub raw: &'a [u8],
    /// The id field's value (`sys_id`), if present.
    pub id: Option<Cow<'a, str>>,
    /// The timestamp field's value, if present.
    pub timestamp: Option<Cow<'a, str>>,
    /// `sys_mod_count`, if present.
    pub mod_count: Option<Cow<'a, str>>,
}

/// Splits a `{"result":[...]}` body into rows and decodes `id_field` and `timestamp_field` of each.
pub fn parse_page<'a>(body: &'a [u8], id_field: &str, timestamp_field: &str) -> Result<Vec<PageRow<'a>>, String> {
    let mut s = Scanner { b: body, i: 0, depth: 0 };
    s.page(id_field, timestamp_field).map_err(|e| format!("not a Table API list answer: {e}"))
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    /// Objects and arrays open around the current position.
    depth: u32,
}

/// Deepest nesting of objects and arrays a page may have (a row nests two or three levels; the
/// limit keeps a hostile page from exhausting the stack, which would trap the component).
pub const MAX_DEPTH: u32 = 128;

type Scan<T> = Result<T, String>;

impl<'a> Scanner<'a> {
    fn fail<T>(&self, what: &str) -> Scan<T> {
        if self.i >= self.b.len() {
            Err(format!("the body ends early ({what}) at byte {}", self.i))
        } else {
            Err(format!("{what} at byte {}", self.i))
        }
    }

    #[inline(always)]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    /// Enters an object or array: fails past [`MAX_DEPTH`].
    fn enter(&mut self) -> Scan<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.fail(&format!("values nested deeper than {MAX_DEPTH} levels"));
        }
        Ok(())
    }

    #[inline(always)]
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    #[inline(always)]
    fn eat(&mut self, c: u8) -> Scan<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            self.fail(&format!("expected {:?}", c as char))
        }
    }

    fn page(&mut self, id_field: &str, ts_field: &str) -> Scan<Vec<PageRow<'a>>> {
        let mut rows = None;
        self.eat(b'{')?;
        if self.peek() != Some(b'}') {
            loop {
                let key = self.name()?;
                self.eat(b':')?;
                if key == b"result" && self.peek() == Some(b'[') {
                    rows = Some(self.rows(id_field, ts_field)?);
                } else {
                    self.value()?;
                }
                if self.peek() == Some(b',') {
                    self.i += 1;
                } else {
                    break;
                }
            }
        }
        self.eat(b'}')?;
        self.ws();
        if self.i != self.b.len() {
            return self.fail("unexpected bytes after the answer");
        }
        rows.ok_or_else(|| "no result list".to_string())
    }

    fn rows(&mut self, id_field: &str, ts_field: &str) -> Scan<Vec<PageRow<'a>>> {
        self.eat(b'[')?;
        let mut rows = Vec::new();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(rows);
        }
        loop {
            if self.peek() != Some(b'{') {
                return self.fail(&format!("row {} of the page is not an object", rows.len()));
            }
            let start = self.i;
            let mut row = PageRow { raw: &[], id: None, timestamp: None, mod_count: None };
            self.i += 1;
            if self.peek() != Some(b'}') {
                loop {
                    let key = self.name()?;
                    self.eat(b':')?;
                    let slot = if key == id_field.as_bytes() {
                        &mut row.id
                    } else if key == ts_field.as_bytes() {
                        &mut row.timestamp
                    } else if key == b"sys_mod_count" {
                        &mut row.mod_count
                    } else {
                        self.value()?;
                        if self.next_member()? { continue } else { break }
                    };
                    *slot = self.field()?;
                    if !self.next_member()? {
                        break;
                    }
                }
            }
            self.eat(b'}')?;
            row.raw = &self.b[start..self.i];
            rows.push(row);
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(rows);
                }
                _ => return self.fail("expected ',' or ']' after a row"),
            }
        }
    }

    /// After a member: true if another follows (the comma is consumed).
    #[inline(always)]
    fn next_member(&mut self) -> Scan<bool> {
        match self.peek() {
            Some(b',') => {
                self.i += 1;
                Ok(true)
            }
            Some(b'}') => Ok(false),
            _ => self.fail("expected ',' or '}'"),
        }
    }

    /// A cursor field: `"text"`, `{"value": "text", ...}`, `null`, or a number (as text).
    fn field(&mut self) -> Scan<Option<Cow<'a, str>>> {
        match self.peek() {
            Some(b'"') => self.string().map(Some),
            Some(b'{') => {
                self.enter()?;
                self.i += 1;
                let mut value = None;
                if self.peek() != Some(b'}') {
                    loop {
                        let key = self.name()?;
                        self.eat(b':')?;
                        if key == b"value" {
                            value = self.field()?;
                        } else {
                            self.value()?;
                        }
                        if !self.next_member()? {
                            break;
                        }
                    }
                }
                self.eat(b'}')?;
                self.depth -= 1;
                Ok(value)
            }
            Some(b'n') => self.literal("null").map(|()| None),
            _ => {
                let start = self.i;
                self.value()?;
                // A number or literal: ASCII, checked by the scanner.
                Ok(Some(Cow::Owned(String::from_utf8_lossy(&self.b[start..self.i]).into_owned())))
            }
        }
    }

    /// Validates and skips any value.
    #[inline(always)]
    fn value(&mut self) -> Scan<()> {
        match self.peek() {
            Some(b'"') => self.skip_string(),
            Some(b'{') => {
                self.enter()?;
                self.i += 1;
                if self.peek() != Some(b'}') {
                    loop {
                        self.skip_string_at_peek()?;
                        self.eat(b':')?;
                        self.value()?;
                        if !self.next_member()? {
                            break;
                        }
                    }
                }
                self.eat(b'}')?;
                self.depth -= 1;
                Ok(())
            }
            Some(b'[') => {
                self.enter()?;
                self.i += 1;
                if self.peek() != Some(b']') {
                    loop {
                        self.value()?;
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b']') => break,
                            _ => return self.fail("expected ',' or ']'"),
                        }
                    }
                }
                self.eat(b']')?;
                self.depth -= 1;
                Ok(())
            }
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => self.fail("expected a value"),
        }
    }

    fn literal(&mut self, word: &str) -> Scan<()> {
        if self.b[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(())
        } else {
            self.fail("invalid literal")
        }
    }

    fn number(&mut self) -> Scan<()> {
        let digits = |s: &mut Self| {
            let start = s.i;
            while let Some(b'0'..=b'9') = s.b.get(s.i) {
                s.i += 1;
            }
            s.i > start
        };
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        if self.b.get(self.i) == Some(&b'0') {
            self.i += 1;
        } else if !digits(self) {
            return self.fail("invalid number");
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            if !digits(self) {
                return self.fail("invalid number");
            }
        }
        if let Some(b'e' | b'E') = self.b.get(self.i) {
            self.i += 1;
            if let Some(b'+' | b'-') = self.b.get(self.i) {
                self.i += 1;
            }
            if !digits(self) {
                return self.fail("invalid number");
            }
        }
        Ok(())
    }

    fn skip_string_at_peek(&mut self) -> Scan<()> {
        if self.peek() != Some(b'"') {
            return self.fail("expected a member name");
        }
        self.skip_string()
    }

    /// Validates and skips a string starting at the current `"`; returns whether it had escapes.
    #[inline(always)]
    fn skip_string(&mut self) -> Scan<()> {
        self.scan_string().map(|_| ())
    }

    /// Scans the string at `"`: its content's byte range and whether it holds escapes.
    #[inline(always)]
    fn scan_string(&mut self) -> Scan<(usize, usize, bool)> {
        self.i += 1;
        let start = self.i;
        let mut escaped = false;
        loop {
            self.i += plain_run(&self.b[self.i..]);
            match self.b.get(self.i) {
                Some(b'"') => {
                    self.i += 1;
                    return Ok((start, self.i - 1, escaped));
                }
                Some(b'\\') => {
                    escaped = true;
                    match self.b.get(self.i + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 2,
                        Some(b'u') if self.b.get(self.i + 2..self.i + 6).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) => {
                            self.i += 6
                        }
                        _ => return self.fail("invalid escape in a string"),
                    }
                }
                Some(c) if *c < 0x20 => return self.fail("control character in a string"),
                Some(c) if *c >= 0x80 => self.i += self.utf8_sequence()?,
                Some(_) => self.i += 1,
                None => return self.fail("unterminated string"),
            }
        }
    }

    /// The length of the valid UTF-8 sequence at the current (non-ASCII) byte.
    fn utf8_sequence(&self) -> Scan<usize> {
        let len = match self.b[self.i] {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return self.fail("invalid UTF-8"),
        };
        match self.b.get(self.i..self.i + len).map(std::str::from_utf8) {
            Some(Ok(_)) => Ok(len),
            _ => self.fail("invalid UTF-8"),
        }
    }

    /// A member name as its raw bytes. Names are only compared with plain field names, so a name
    /// written with escapes simply matches none of them.
    #[inline(always)]
    fn name(&mut self) -> Scan<&'a [u8]> {
        if self.peek() != Some(b'"') {
            return self.fail("expected a member name");
        }
        let (start, end, _) = self.scan_string()?;
        Ok(&self.b[start..end])
    }

    /// A string, borrowed when it has no escapes (its bytes were checked as UTF-8 by the scan).
    fn string(&mut self) -> Scan<Cow<'a, str>> {
        if self.peek() != Some(b'"') {
            return self.fail("expected a string");
        }
        let (start, end, escaped) = self.scan_string()?;
        let raw = std::str::from_utf8(&self.b[start..end]).map_err(|e| format!("invalid UTF-8 at byte {start}: {e}"))?;
        if !escaped {
            return Ok(Cow::Borrowed(raw));
        }
        // Rare (a quote or a newline in a cursor field): decode with serde_json.
        serde_json::from_slice::<String>(&self.b[start - 1..=end])
            .map(Cow::Owned)
            .map_err(|e| format!("invalid string at byte {start}: {e}"))
    }
}

/// How many leading bytes of `bytes` need no attention inside a string (ASCII, and not `"`,
/// `\\`, nor a control character), eight at a time.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[inline(always)]
fn plain_run(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // Non-zero when one of the 8 bytes of `x` needs attention: `"`, `\\`, a byte below 0x20, or a
    // byte with its high bit set (UTF-8, checked apart).
    let attention = |x: u64| {
        let zero_in = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
        zero_in(x ^ (ONES * b'"' as u64)) | zero_in(x ^ (ONES * b'\\' as u64)) | (x.wrapping_sub(ONES * 0x20) & !x & HIGHS) | (x & HIGHS)
    };
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default());
    let mut n = 0;
    // Sixteen bytes per step (fewer loop back-edges: each costs an epoch check in the guest).
    while n + 16 <= bytes.len() && attention(word(n)) | attention(word(n + 8)) == 0 {
        n += 16;
    }
    if n + 8 <= bytes.len() && attention(word(n)) == 0 {
        n += 8;
    }
    while let Some(&c) = bytes.get(n) {
        if c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c) {
            break;
        }
        n += 1;
    }
    n
}

/// [`plain_run`] with WebAssembly SIMD: sixteen bytes per step, the first byte needing attention
/// found by its bit in a mask.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(always)]
#[allow(unsafe_code)] // one unaligned 16-byte load, bounds checked just before
fn plain_run(bytes: &[u8]) -> usize {
    use core::arch::wasm32::{i8x16_bitmask, i8x16_eq, i8x16_lt, u8x16_lt, u8x16_splat, v128, v128_load, v128_or};
    let (quote, backslash, control, zero) = (u8x16_splat(b'"'), u8x16_splat(b'\\'), u8x16_splat(0x20), u8x16_splat(0));
    let mut n = 0;
    while n + 16 <= bytes.len() {
        // SAFETY: n + 16 <= bytes.len(), so the 16 bytes read are inside the slice; v128_load has
        // no alignment requirement.
        let v = unsafe { v128_load(bytes.as_ptr().add(n).cast::<v128>()) };
        let attention = v128_or(v128_or(i8x16_eq(v, quote), i8x16_eq(v, backslash)), v128_or(u8x16_lt(v, control), i8x16_lt(v, zero)));
        let mask = i8x16_bitmask(attention);
        if mask != 0 {
            return n + mask.trailing_zeros() as usize;
        }
        n += 16;
    }
    while let Some(&c) = bytes.get(n) {
        if c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c) {
            break;
        }
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_past_the_limit_is_an_error_not_a_stack_overflow() {
        for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
            let deep = format!(r#"{{"result":[{{"sys_id":"a","x":{}1{}}}]}}"#, open.repeat(1_000_000), close.repeat(1_000_000));
            let err = parse_page(deep.as_bytes(), "sys_id", "sys_updated_on").unwrap_err();
            assert!(err.contains("nested deeper than 128 levels"), "{}", &err[..err.len().min(200)]);
        }
        let deep_value = format!(r#"{{"result":[{{"sys_id":{}"a"{}}}]}}"#, r#"{"value":"#.repeat(200), "}".repeat(200));
        assert!(parse_page(deep_value.as_bytes(), "sys_id", "t").unwrap_err().contains("nested deeper"));
        let fine = format!(r#"{{"result":[{{"sys_id":"a","x":{}1{}}}]}}"#, "[".repeat(120), "]".repeat(120));
        assert_eq!(parse_page(fine.as_bytes(), "sys_id", "t").unwrap().len(), 1, "within the limit");
    }

    #[test]
    fn keeps_raw_rows_and_decodes_cursor_fields() {
        let body = br#"{"result":[
            {"number":"INC1","sys_id":"a1","sys_updated_on":"2024-01-01 00:00:00","sys_mod_count":"2","caller_id":{"link":"x","value":"u1"}},
            {"sys_id":{"display_value":"a2","value":"a2"},"sys_updated_on":{"display_value":"01/01/2024","value":"2024-01-01 00:00:01"}},
            {"sys_id":"a\u0033","sys_updated_on":null, "n": -12.5e+3, "t": true, "l": [1, [2, {"x": "y"}], "q\"uote"]}
        ]}"#;
        let rows = parse_page(body, "sys_id", "sys_updated_on").unwrap();
        assert_eq!(rows.len(), 3);
        assert!(rows[0].raw.starts_with(br#"{"number":"INC1""#) && rows[0].raw.ends_with(b"}"));
        assert_eq!(rows[0].id.as_deref(), Some("a1"));
        assert_eq!(rows[0].mod_count.as_deref(), Some("2"));
        assert_eq!(rows[1].timestamp.as_deref(), Some("2024-01-01 00:00:01"));
        assert_eq!(rows[2].id.as_deref(), Some("a3"), "escapes are decoded");
        assert_eq!(rows[2].timestamp, None);
        for row in &rows {
            serde_json::from_slice::<serde_json::Value>(row.raw).unwrap();
        }
    }

    #[test]
    fn plain_runs_stop_at_quotes_escapes_and_control_bytes() {
        assert_eq!(plain_run(b"abcdefghijklmnop\"x"), 16);
        assert_eq!(plain_run(b"abc\\d"), 3);
        assert_eq!(plain_run(b"abcdefg\n"), 7);
        assert_eq!(plain_run("ab\u{e9}".as_bytes()), 2, "UTF-8 is checked apart");
        assert_eq!(plain_run(b"\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f"), 9, "DEL is allowed in JSON strings");
        for i in 0..20 {
            let mut s = vec![b'a'; 20];
            s[i] = b'"';
            assert_eq!(plain_run(&s), i);
        }
    }

    #[test]
    fn the_envelope_may_carry_other_members_and_empty_results() {
        assert_eq!(parse_page(br#"{"result":[]}"#, "sys_id", "t").unwrap().len(), 0);
        assert_eq!(parse_page(br#" { "x" : {"a":[]}, "result" : [ { } ] } "#, "sys_id", "t").unwrap().len(), 1);
    }

    #[test]
    fn malformed_bodies_are_errors_that_say_where() {
        for (body, expected) in [
            (&br#"{"result":[{"sys_id":"a"#[..], "the body ends early"),
            (br#"{"error":{"message":"x"}}"#, "no result list"),
            (br#"{"result":["x"]}"#, "row 0 of the page is not an object"),
            (br#"{"result":[{"a":"b\q"}]}"#, "invalid escape"),
            (br#"{"result":[{"a":01}]}"#, "expected ',' or '}'"),
            (br#"{"result":[{"a":tru}]}"#, "invalid literal"),
            (br#"{"result":[{"a":"x"}]} trailing"#, "unexpected bytes after the answer"),
            (b"{\"result\":[{\"a\":\"new\nline\"}]}", "control character"),
            (br#"{"result":[{"a" "b"}]}"#, "expected ':'"),
        ] {
            let err = parse_page(body, "sys_id", "sys_updated_on").unwrap_err();
            assert!(err.contains(expected), "{err} (expected {expected})");
        }
        for bad in [
            &b"{\"result\":[{\"a\":\"\xff\"}]}"[..],
            b"{\"result\":[{\"a\":\"\xc3\"}]}",
            b"{\"result\":[{\"a\":\"\xed\xa0\x80\"}]}",
            b"{\xc3\xa9:1}",
        ] {
            let err = parse_page(bad, "a", "b").unwrap_err();
            assert!(err.contains("UTF-8") || err.contains("expected"), "{err}");
        }
        assert_eq!(parse_page("{\"result\":[{\"a\":\"é €𝄞\"}]}".as_bytes(), "a", "b").unwrap()[0].id.as_deref(), Some("é €𝄞"));
    }

    #[test]
    fn agrees_with_serde_json_on_a_realistic_page() {
        let row = |i: u32| {
            format!(
                r#"{{"active":"true","caller_id":{{"link":"https://x/api/now/table/sys_user/{i:032x}","value":"{i:032x}"}},"description":"Line one,\ttab \"quoted\" é ü","number":"INC{i:07}","sys_id":"{i:032x}","sys_mod_count":"{}","sys_updated_on":"2024-01-01 00:00:{:02}"}}"#,
                i % 5,
                i % 60
            )
        };
        let body = format!(r#"{{"result":[{}]}}"#, (0..200).map(row).collect::<Vec<_>>().join(","));
        let rows = parse_page(body.as_bytes(), "sys_id", "sys_updated_on").unwrap();
        let reference: serde_json::Value = serde_json::from_str(&body).unwrap();
        for (i, (row, expected)) in rows.iter().zip(reference["result"].as_array().unwrap()).enumerate() {
            assert_eq!(&serde_json::from_slice::<serde_json::Value>(row.raw).unwrap(), expected, "row {i}");
            assert_eq!(row.id.as_deref(), expected["sys_id"].as_str());
            assert_eq!(row.timestamp.as_deref(), expected["sys_updated_on"].as_str());
            assert_eq!(row.mod_count.as_deref(), expected["sys_mod_count"].as_str());
        }
    }
}
