//! The deleted row inside a `sys_audit_delete` record's `payload`: an XML document holding one
//! element named after the table whose child elements are the row's fields. The exact wrapper an
//! instance writes around it is not published (an update set's `<record_update table="T">`, or
//! the element alone), so only that element and its children are read; anything else is ignored.

use serde_json::{Map, Value};

/// The fields of `table`'s row in `payload` (values as text, the XML entities decoded), or
/// `None` when the payload holds no element named `table`.
pub fn fields(payload: &str, table: &str) -> Option<Map<String, Value>> {
    let open = element_start(payload, table)?;
    let body_start = open + payload[open..].find('>')? + 1;
    if payload[..body_start].ends_with("/>") {
        return Some(Map::new());
    }
    let close = format!("</{table}>");
    let body = &payload[body_start..body_start + payload[body_start..].find(&close)?];
    let mut fields = Map::new();
    let mut rest = body;
    while let Some(lt) = rest.find('<') {
        rest = &rest[lt + 1..];
        let name_end = rest.find(|c: char| c == '>' || c == '/' || c.is_whitespace())?;
        let name = &rest[..name_end];
        let tag_end = rest.find('>')?;
        if name.is_empty() || name.starts_with('!') || name.starts_with('?') {
            rest = &rest[tag_end + 1..];
            continue;
        }
        if rest[..tag_end].ends_with('/') {
            fields.insert(name.to_string(), Value::String(String::new()));
            rest = &rest[tag_end + 1..];
            continue;
        }
        let inner = &rest[tag_end + 1..];
        let end_tag = format!("</{name}>");
        let text_end = inner.find(&end_tag)?;
        fields.insert(name.to_string(), Value::String(unescape(&inner[..text_end])));
        rest = &inner[text_end + end_tag.len()..];
    }
    Some(fields)
}

/// Where the element `<name …>` or `<name>` starts (its `<`).
fn element_start(text: &str, name: &str) -> Option<usize> {
    let needle = format!("<{name}");
    let mut from = 0;
    while let Some(at) = text[from..].find(&needle) {
        let at = from + at;
        match text[at + needle.len()..].chars().next() {
            Some('>' | '/') => return Some(at),
            Some(c) if c.is_whitespace() => return Some(at),
            _ => from = at + needle.len(),
        }
    }
    None
}

/// The five predefined XML entities and numeric character references decoded.
fn unescape(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let Some(semi) = rest.find(';') else { break };
        let entity = &rest[1..semi];
        let decoded = match entity {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rows_fields_inside_an_update_set_wrapper_or_alone() {
        let wrapped = r#"<?xml version="1.0" encoding="UTF-8"?><record_update table="incident"><incident action="DELETE"><number>INC0001</number><short_description>a &lt; b &amp; c&#x21;</short_description><active/><sys_id>a1</sys_id></incident></record_update>"#;
        let f = fields(wrapped, "incident").unwrap();
        assert_eq!(f["number"], "INC0001");
        assert_eq!(f["short_description"], "a < b & c!");
        assert_eq!(f["active"], "");
        assert_eq!(f["sys_id"], "a1");
        let alone = "<incident><sys_id>b2</sys_id></incident>";
        assert_eq!(fields(alone, "incident").unwrap()["sys_id"], "b2");
    }

    #[test]
    fn another_tables_element_or_a_broken_document_is_no_row() {
        // `<incident_task>` is not `<incident>`.
        assert_eq!(fields("<incident_task><sys_id>x</sys_id></incident_task>", "incident"), None);
        assert_eq!(fields("<incident><sys_id>x</sys_id>", "incident"), None);
        assert_eq!(fields("not xml", "incident"), None);
        assert_eq!(unescape("fish &chips; &amp"), "fish &chips; &amp");
        // Multi-byte text anywhere, cut short anywhere: read or refused, never a panic.
        let full = "<incident><é>ü&#xE9;</é><a/></incident>";
        assert_eq!(fields(full, "incident").unwrap()["é"], "üé");
        for end in (0..full.len()).filter(|&i| full.is_char_boundary(i)) {
            let _ = fields(&full[..end], "incident");
        }
    }
}
