//! A record's value made into the body of a write, by the connector's [`BodyMapping`]: nested
//! values rejected, flattened or stringified; fields renamed; `sys_*` fields dropped unless
//! allowed; the allow and deny lists applied; nulls omitted, cleared or rejected. Every failure
//! names the record and the field.

use serde_json::{Map, Value};

use super::value::kind;
use crate::config::sink::{BodyMapping, NestedPolicy, NullPolicy};
use crate::error::SnowError;

/// The body `value` becomes for the record at `at` (its coordinates, for errors).
pub fn map(value: Map<String, Value>, mapping: &BodyMapping, at: &str) -> Result<Map<String, Value>, SnowError> {
    let fail = |field: &str, what: String| SnowError::data(format!("record {at}: field {field}: {what}"));
    let mut flat = Map::new();
    for (name, value) in value {
        match value {
            Value::Object(_) | Value::Array(_) => match mapping.nested {
                NestedPolicy::Reject => {
                    return Err(fail(&name, format!("is {} (snow.sink.nested.policy=flatten or stringify would write it)", kind(&value))));
                }
                NestedPolicy::Stringify => {
                    flat.insert(name, Value::String(value.to_string()));
                }
                NestedPolicy::Flatten => flatten(&name, value, &mapping.delimiter, &mut flat),
            },
            other => {
                flat.insert(name, other);
            }
        }
    }
    let mut body = Map::new();
    for (name, value) in flat {
        let name = mapping.rename.get(&name).cloned().unwrap_or(name);
        if name == "sys_id" || (name.starts_with("sys_") && !mapping.system_allow.contains(&name)) {
            continue;
        }
        if mapping.deny.contains(&name) || mapping.allow.as_ref().is_some_and(|allow| !allow.contains(&name)) {
            continue;
        }
        let value = match value {
            Value::Null => match mapping.null {
                NullPolicy::Omit => continue,
                NullPolicy::Clear => Value::String(String::new()),
                NullPolicy::Reject => return Err(fail(&name, "is null (snow.sink.null.policy=reject)".into())),
            },
            other => other,
        };
        body.insert(name, value);
    }
    Ok(body)
}

/// `value` under `prefix` as flat fields: objects by member, arrays by index, joined by `delimiter`.
fn flatten(prefix: &str, value: Value, delimiter: &str, out: &mut Map<String, Value>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                flatten(&format!("{prefix}{delimiter}{k}"), v, delimiter, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.into_iter().enumerate() {
                flatten(&format!("{prefix}{delimiter}{i}"), v, delimiter, out);
            }
        }
        leaf => {
            out.insert(prefix.to_string(), leaf);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn mapping() -> BodyMapping {
        BodyMapping {
            rename: BTreeMap::new(),
            allow: None,
            deny: vec![],
            system_allow: vec![],
            null: NullPolicy::Omit,
            nested: NestedPolicy::Reject,
            delimiter: "_".into(),
        }
    }

    fn object(json: &str) -> Map<String, Value> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn system_fields_scalars_and_nulls() {
        let body =
            map(object(r#"{"a":"x","n":3,"b":true,"z":null,"sys_id":"i","sys_domain":"d","sys_mod_count":"4"}"#), &mapping(), "t-0@1")
                .unwrap();
        assert_eq!(Value::Object(body), serde_json::json!({"a":"x","n":3,"b":true}), "scalars as given");
        let m = BodyMapping { null: NullPolicy::Clear, system_allow: vec!["sys_domain".into()], ..mapping() };
        let body = map(object(r#"{"z":null,"sys_domain":"d"}"#), &m, "t-0@1").unwrap();
        assert_eq!(Value::Object(body), serde_json::json!({"z":"","sys_domain":"d"}));
        let m = BodyMapping { null: NullPolicy::Reject, ..mapping() };
        assert_eq!(
            map(object(r#"{"z":null}"#), &m, "t-0@1").unwrap_err().to_string(),
            "record t-0@1: field z: is null (snow.sink.null.policy=reject)"
        );
    }

    #[test]
    fn rename_allow_deny() {
        let m = BodyMapping {
            rename: [("desc".to_string(), "short_description".to_string())].into(),
            allow: Some(vec!["short_description".into(), "state".into(), "secret".into()]),
            deny: vec!["secret".into()],
            ..mapping()
        };
        let body = map(object(r#"{"desc":"x","state":"2","other":"o","secret":"s"}"#), &m, "t-0@1").unwrap();
        assert_eq!(Value::Object(body), serde_json::json!({"short_description":"x","state":"2"}));
    }

    #[test]
    fn nested_values_rejected_flattened_or_stringified() {
        let nested = r#"{"caller":{"name":"a","ids":[1,2]}}"#;
        let err = map(object(nested), &mapping(), "t-0@1").unwrap_err().to_string();
        assert!(err.starts_with("record t-0@1: field caller: is an object"), "{err}");
        let flat = map(object(nested), &BodyMapping { nested: NestedPolicy::Flatten, ..mapping() }, "t-0@1").unwrap();
        assert_eq!(Value::Object(flat), serde_json::json!({"caller_name":"a","caller_ids_0":1,"caller_ids_1":2}));
        let text = map(object(nested), &BodyMapping { nested: NestedPolicy::Stringify, ..mapping() }, "t-0@1").unwrap();
        assert_eq!(text["caller"], r#"{"ids":[1,2],"name":"a"}"#);
    }
}
