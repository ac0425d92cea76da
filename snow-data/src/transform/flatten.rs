//! `Flatten$Key` / `$Value`: nested structs (with a schema) or maps (without) become one level,
//! names joined by `delimiter` (`.` by default); arrays are leaves. With a schema, a leaf is
//! optional when it or any struct above it is, keeps its logical type, and takes its default from
//! its own schema or the enclosing struct's default; a map field is refused, as in Connect.

use crate::error::DataError;
use crate::schema::{Field, Kind, Schema};
use crate::value::Value;

use super::support::{Conf, copy_basics, java_class};
use super::{Record, Side, Transform};

/// `Flatten$Key` / `$Value`.
pub struct Flatten {
    side: Side,
    delimiter: String,
}

impl Flatten {
    /// From its keys.
    pub fn new(side: Side, conf: &Conf<'_>) -> Result<Self, String> {
        Ok(Self { side, delimiter: conf.string("delimiter").unwrap_or(".").to_string() })
    }

    fn name(&self, prefix: &str, name: &str) -> String {
        if prefix.is_empty() { name.to_string() } else { format!("{prefix}{}{name}", self.delimiter) }
    }

    fn flatten_map(&self, prefix: &str, entries: &[(Value, Value)], out: &mut Vec<(Value, Value)>) -> Result<(), DataError> {
        for (k, v) in entries {
            let name = self.name(prefix, &k.as_str().map_or_else(|| format!("{k:?}"), str::to_string));
            match v {
                Value::Map(inner) => self.flatten_map(&name, inner, out)?,
                Value::Struct(_) => {
                    return Err(DataError::new(format!(
                        "Flatten transformation does not support class org.apache.kafka.connect.data.Struct for record without schemas (for field {name})."
                    )));
                }
                Value::Date(_) | Value::Time(_) | Value::Timestamp(_) | Value::Decimal(_) => {
                    return Err(DataError::new(format!(
                        "Flatten transformation was passed a value of type class {} which is not supported by Connect's data API",
                        java_class(v)
                    )));
                }
                other => out.push((Value::String(name), other.clone())),
            }
        }
        Ok(())
    }

    /// The flat fields of `schema` under `prefix`.
    fn flatten_schema(
        &self,
        prefix: &str,
        schema: &Schema,
        optional: bool,
        parent_default: Option<&Value>,
        out: &mut Vec<Field>,
    ) -> Result<(), DataError> {
        for f in schema.fields() {
            let name = self.name(prefix, &f.name);
            let inherited = parent_default.and_then(|d| d.get(&f.name)).filter(|v| !v.is_null());
            let default = f.schema.default.as_ref().or(inherited);
            match &f.schema.kind {
                Kind::Struct(_) => self.flatten_schema(&name, &f.schema, optional || f.schema.optional, default, out)?,
                Kind::Map(..) => {
                    return Err(DataError::new(format!(
                        "Flatten transformation does not support MAP for record with schemas (for field {name})."
                    )));
                }
                kind => {
                    if out.iter().any(|o| o.name == name) {
                        return Err(DataError::new(format!("Cannot create field because of field name duplication {name}")));
                    }
                    let mut leaf = copy_basics(&f.schema, kind.clone());
                    leaf.optional = optional || f.schema.optional;
                    leaf.default = default.cloned();
                    out.push(Field::new(&name, leaf));
                }
            }
        }
        Ok(())
    }

    /// The flat values of `value` (a struct under `schema`) under `prefix`.
    fn flatten_struct(&self, prefix: &str, schema: &Schema, value: &Value, out: &mut Vec<(String, Value)>) {
        for (i, f) in schema.fields().iter().enumerate() {
            let name = self.name(prefix, &f.name);
            let v = value.field(i, &f.name).unwrap_or(&Value::Null);
            match &f.schema.kind {
                Kind::Struct(_) => {
                    if !v.is_null() {
                        self.flatten_struct(&name, &f.schema, v, out);
                    }
                }
                _ => {
                    let v = if v.is_null() { f.schema.default.clone().unwrap_or(Value::Null) } else { v.clone() };
                    out.push((name, v));
                }
            }
        }
    }
}

impl Transform for Flatten {
    fn apply(&self, record: Record) -> Result<Option<Record>, DataError> {
        let (schema, value) = record.operating(self.side);
        if value.is_null() {
            return Ok(Some(record));
        }
        let (schema, value) = match schema {
            None => {
                let entries = super::support::require_map(value, "flattening")?;
                let mut out = Vec::new();
                self.flatten_map("", entries, &mut out)?;
                (None, Value::Map(out))
            }
            Some(schema) => {
                super::support::require_struct(value, "flattening")?;
                let mut fields = Vec::new();
                self.flatten_schema("", schema, false, schema.default.as_ref(), &mut fields)?;
                let mut values = Vec::new();
                self.flatten_struct("", schema, value, &mut values);
                // Leaves under a null struct stay null.
                let values = fields
                    .iter()
                    .map(|f| (f.name.clone(), values.iter().find(|(n, _)| *n == f.name).map_or(Value::Null, |(_, v)| v.clone())))
                    .collect();
                (Some(copy_basics(schema, Kind::Struct(fields))), Value::Struct(values))
            }
        };
        Ok(Some(record.with(self.side, schema, value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_structs_flatten_with_optional_leaves() {
        let inner = Schema::record("inner", vec![Field::new("x", Schema::new(Kind::Int32))]).optional();
        let outer = Schema::record("outer", vec![Field::new("a", inner), Field::new("b", Schema::timestamp())]);
        let keys = std::collections::BTreeMap::from([("delimiter".to_string(), "_".to_string())]);
        let t = Flatten::new(Side::Value, &Conf::new(&keys)).expect("flatten");
        let record = Record {
            topic: "t".into(),
            partition: None,
            offset: None,
            key_schema: None,
            key: Value::Null,
            value_schema: Some(outer),
            value: Value::Struct(vec![("a".into(), Value::Null), ("b".into(), Value::Timestamp(5))]),
            timestamp: None,
            headers: Vec::new(),
        };
        let out = t.apply(record).expect("apply").expect("kept");
        let schema = out.value_schema.expect("schema");
        assert_eq!(schema.name.as_deref(), Some("outer"));
        assert!(schema.field("a_x").is_some_and(|f| f.schema.optional), "optional because its struct is");
        assert_eq!(schema.field("b").and_then(|f| f.schema.logical()), Some(crate::schema::Logical::Timestamp));
        assert_eq!(out.value, Value::Struct(vec![("a_x".into(), Value::Null), ("b".into(), Value::Timestamp(5))]));
    }
}
