//! Avro schemas both ways. From Connect, as Confluent's `AvroData` writes them: a struct is a
//! record (its Connect name split into namespace and name, `ConnectDefault` when unnamed), an
//! optional schema is the union `["null", T]` with a null default, int8/int16 are `int` with
//! `connect.type`, Connect's logical types carry Avro's (`timestamp-millis`, `date`,
//! `time-millis`, `decimal` with `scale` and `precision`) and `connect.name`/`connect.version`.
//! To Connect: a writer's schema from the registry is parsed into a [`Node`] tree (named types
//! resolved, recursion refused) and the Connect schema it reads as.

use std::collections::HashMap;

use serde_json::{Map, Value as Json, json};

use crate::connect_json::value_to_json;
use crate::decimal::MAX_PRECISION;
use crate::error::DataError;
use crate::schema::{Field, Kind, Logical, Schema};

/// The namespace and name of records Connect did not name.
const DEFAULT_NAMESPACE: &str = "io.confluent.connect.avro";
const DEFAULT_NAME: &str = "ConnectDefault";

/// The Avro schema (JSON) that Connect's `schema` is written as.
pub fn from_connect(schema: &Schema) -> Result<Json, DataError> {
    field_type(schema, &mut 0)
}

fn base(schema: &Schema, names: &mut usize) -> Result<Json, DataError> {
    let mut j = match (schema.logical(), &schema.kind) {
        (Some(Logical::Decimal { scale }), _) => {
            let precision = schema.parameters.get("connect.decimal.precision").and_then(|p| p.parse().ok()).unwrap_or(MAX_PRECISION);
            json!({ "type": "bytes", "logicalType": "decimal", "scale": scale, "precision": precision })
        }
        (Some(Logical::Date), _) => json!({ "type": "int", "logicalType": "date" }),
        (Some(Logical::Time), _) => json!({ "type": "int", "logicalType": "time-millis" }),
        (Some(Logical::Timestamp), _) => json!({ "type": "long", "logicalType": "timestamp-millis" }),
        (None, Kind::Int8 | Kind::Int16) => json!({ "type": "int", "connect.type": schema.kind.name() }),
        (None, Kind::Int32) => json!("int"),
        (None, Kind::Int64) => json!("long"),
        (None, Kind::Float32) => json!("float"),
        (None, Kind::Float64) => json!("double"),
        (None, Kind::Boolean) => json!("boolean"),
        (None, Kind::String) => json!("string"),
        (None, Kind::Bytes) => json!("bytes"),
        (None, Kind::Array(items)) => json!({ "type": "array", "items": field_type(items, names)? }),
        (None, Kind::Map(keys, values)) if keys.kind == Kind::String && !keys.optional => {
            json!({ "type": "map", "values": field_type(values, names)? })
        }
        (None, Kind::Map(..)) => return Err(DataError::new("Avro maps need required string keys")),
        (None, Kind::Struct(fields)) => {
            let (namespace, name) = match schema.name.as_deref() {
                Some(full) => match full.rsplit_once('.') {
                    Some((ns, n)) => (Some(ns.to_string()), n.to_string()),
                    None => (None, full.to_string()),
                },
                None => {
                    *names += 1;
                    let n = if *names == 1 { DEFAULT_NAME.to_string() } else { format!("{DEFAULT_NAME}{names}") };
                    (Some(DEFAULT_NAMESPACE.to_string()), n)
                }
            };
            check_name(&name)?;
            let mut avro_fields = Vec::with_capacity(fields.len());
            for f in fields {
                check_name(&f.name).map_err(|e| e.at(format!("field {}", f.name)))?;
                let mut field = json!({ "name": f.name, "type": field_type(&f.schema, names)? });
                match (&f.schema.default, f.schema.optional) {
                    (Some(d), _) => field["default"] = value_to_json(d, Some(&f.schema))?,
                    (None, true) => field["default"] = Json::Null,
                    (None, false) => {}
                }
                if let Some(doc) = &f.schema.doc {
                    field["doc"] = json!(doc);
                }
                avro_fields.push(field);
            }
            let mut record = json!({ "type": "record", "name": name, "fields": avro_fields });
            if let Some(ns) = namespace {
                record["namespace"] = json!(ns);
            }
            if let Some(doc) = &schema.doc {
                record["doc"] = json!(doc);
            }
            record
        }
    };
    if let Some(name) = &schema.name {
        let obj = promote(&mut j);
        obj.insert("connect.name".into(), json!(name));
        if let Some(v) = schema.version {
            obj.insert("connect.version".into(), json!(v));
        }
        if !schema.parameters.is_empty() {
            obj.insert("connect.parameters".into(), json!(schema.parameters));
        }
    }
    Ok(j)
}

/// A field's or element's Avro type: optional schemas are `["null", T]`.
fn field_type(schema: &Schema, names: &mut usize) -> Result<Json, DataError> {
    let base = base(schema, names)?;
    Ok(if schema.optional { json!(["null", base]) } else { base })
}

/// `j` as an object (a bare type name becomes `{"type": name}`).
fn promote(j: &mut Json) -> &mut Map<String, Json> {
    if !j.is_object() {
        *j = json!({ "type": j.take() });
    }
    j.as_object_mut().expect("just made an object")
}

/// Avro's name rule: `[A-Za-z_][A-Za-z0-9_]*`.
fn check_name(name: &str) -> Result<(), DataError> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok { Ok(()) } else { Err(DataError::new(format!("{name:?} is not a valid Avro name ([A-Za-z_][A-Za-z0-9_]*)"))) }
}

/// A parsed Avro schema node.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// `null`.
    Null,
    /// `boolean`.
    Boolean,
    /// `int`, read as the Connect type given (int8, int16, int32, Date, Time).
    Int(IntAs),
    /// `long`, read as int64 or Timestamp.
    Long(LongAs),
    /// `float`.
    Float,
    /// `double`.
    Double,
    /// `bytes`, or a decimal of this scale.
    Bytes(Option<i32>),
    /// `string`.
    String,
    /// `fixed` of this size, or a decimal of this scale.
    Fixed(usize, Option<i32>),
    /// An enum's symbols (read as their text).
    Enum(Vec<String>),
    /// An array.
    Array(Box<Node>),
    /// A map with string keys.
    Map(Box<Node>),
    /// A record's fields.
    Record(Vec<(String, Node)>),
    /// A union's branches.
    Union(Vec<Node>),
}

/// What an Avro `int` reads as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntAs {
    /// int8 (`connect.type`).
    Int8,
    /// int16 (`connect.type`).
    Int16,
    /// int32.
    Int32,
    /// `date`.
    Date,
    /// `time-millis`.
    Time,
}

/// What an Avro `long` reads as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongAs {
    /// int64 (also `timestamp-micros`, which Connect has no type for).
    Int64,
    /// `timestamp-millis`.
    Timestamp,
}

/// Parses a writer's schema: the node tree and the Connect schema it reads as.
pub fn parse(text: &str) -> Result<(Node, Schema), DataError> {
    let json: Json = serde_json::from_str(text).map_err(|e| DataError::new(format!("the Avro schema is not JSON: {e}")))?;
    let mut named = HashMap::new();
    to_node(&json, None, &mut named, 0)
}

/// Deepest nesting read (a schema is data from the registry; it must not exhaust the stack).
const MAX_DEPTH: usize = 64;

fn to_node(
    j: &Json,
    namespace: Option<&str>,
    named: &mut HashMap<String, (Node, Schema)>,
    depth: usize,
) -> Result<(Node, Schema), DataError> {
    if depth > MAX_DEPTH {
        return Err(DataError::new(format!("the Avro schema nests deeper than {MAX_DEPTH}")));
    }
    match j {
        Json::String(name) => primitive(name)
            .or_else(|| {
                let full = if name.contains('.') { name.clone() } else { qualify(namespace, name) };
                named.get(&full).or_else(|| named.get(name)).cloned()
            })
            .ok_or_else(|| DataError::new(format!("unknown Avro type {name:?} (recursive types are not supported)"))),
        Json::Array(branches) => {
            let nodes: Vec<(Node, Schema)> = branches.iter().map(|b| to_node(b, namespace, named, depth + 1)).collect::<Result<_, _>>()?;
            let non_null: Vec<&(Node, Schema)> = nodes.iter().filter(|(n, _)| *n != Node::Null).collect();
            let schema = match non_null.as_slice() {
                [(_, s)] if nodes.len() == 2 => s.clone().optional(),
                _ => return Err(DataError::new("Avro unions other than [\"null\", T] are not supported")),
            };
            Ok((Node::Union(nodes.into_iter().map(|(n, _)| n).collect()), schema))
        }
        Json::Object(obj) => {
            let ty = obj.get("type").ok_or_else(|| DataError::new("an Avro schema object needs \"type\""))?;
            let logical = obj.get("logicalType").and_then(Json::as_str);
            let connect_type = obj.get("connect.type").and_then(Json::as_str);
            let scale = || obj.get("scale").and_then(Json::as_i64).unwrap_or(0) as i32;
            let type_name = ty.as_str().unwrap_or("");
            let own_namespace = obj.get("namespace").and_then(Json::as_str).or(namespace);
            let full_name = |obj: &Map<String, Json>| -> Option<String> {
                let n = obj.get("name").and_then(Json::as_str)?;
                Some(if n.contains('.') { n.to_string() } else { qualify(own_namespace, n) })
            };
            let result = match type_name {
                "record" | "error" => {
                    let name = full_name(obj).ok_or_else(|| DataError::new("an Avro record needs a name"))?;
                    let fields =
                        obj.get("fields").and_then(Json::as_array).ok_or_else(|| DataError::new(format!("record {name} needs fields")))?;
                    let mut nodes = Vec::with_capacity(fields.len());
                    let mut connect = Vec::with_capacity(fields.len());
                    let inner_ns = name.rsplit_once('.').map(|(ns, _)| ns.to_string());
                    for f in fields {
                        let fname = f
                            .get("name")
                            .and_then(Json::as_str)
                            .ok_or_else(|| DataError::new(format!("a field of record {name} has no name")))?;
                        let fty = f.get("type").ok_or_else(|| DataError::new(format!("field {fname} of record {name} has no type")))?;
                        let (node, schema) =
                            to_node(fty, inner_ns.as_deref(), named, depth + 1).map_err(|e| e.at(format!("field {fname}")))?;
                        nodes.push((fname.to_string(), node));
                        connect.push(Field::new(fname, schema));
                    }
                    let connect_name = obj.get("connect.name").and_then(Json::as_str).map(str::to_string).unwrap_or_else(|| name.clone());
                    let mut schema = Schema::new(Kind::Struct(connect));
                    if connect_name != format!("{DEFAULT_NAMESPACE}.{DEFAULT_NAME}") {
                        schema.name = Some(connect_name);
                    }
                    let out = (Node::Record(nodes), schema);
                    named.insert(name, out.clone());
                    return Ok(out);
                }
                "enum" => {
                    let symbols = obj
                        .get("symbols")
                        .and_then(Json::as_array)
                        .map(|s| s.iter().filter_map(Json::as_str).map(str::to_string).collect());
                    (Node::Enum(symbols.unwrap_or_default()), Schema::new(Kind::String))
                }
                "fixed" => {
                    let size = obj.get("size").and_then(Json::as_u64).unwrap_or(0) as usize;
                    match logical {
                        Some("decimal") => (Node::Fixed(size, Some(scale())), Schema::decimal(scale())),
                        _ => (Node::Fixed(size, None), Schema::new(Kind::Bytes)),
                    }
                }
                "array" => {
                    let (node, schema) = to_node(obj.get("items").unwrap_or(&Json::Null), own_namespace, named, depth + 1)?;
                    (Node::Array(Box::new(node)), Schema::new(Kind::Array(Box::new(schema))))
                }
                "map" => {
                    let (node, schema) = to_node(obj.get("values").unwrap_or(&Json::Null), own_namespace, named, depth + 1)?;
                    (Node::Map(Box::new(node)), Schema::new(Kind::Map(Box::new(Schema::new(Kind::String)), Box::new(schema))))
                }
                _ => match (type_name, logical, connect_type) {
                    ("int", Some("date"), _) => (Node::Int(IntAs::Date), Schema::date()),
                    ("int", Some("time-millis"), _) => (Node::Int(IntAs::Time), Schema::time()),
                    ("int", _, Some("int8")) => (Node::Int(IntAs::Int8), Schema::new(Kind::Int8)),
                    ("int", _, Some("int16")) => (Node::Int(IntAs::Int16), Schema::new(Kind::Int16)),
                    ("long", Some("timestamp-millis"), _) => (Node::Long(LongAs::Timestamp), Schema::timestamp()),
                    ("bytes", Some("decimal"), _) => (Node::Bytes(Some(scale())), Schema::decimal(scale())),
                    _ if ty.is_object() || ty.is_array() => return to_node(ty, own_namespace, named, depth + 1),
                    (name, ..) => primitive(name).ok_or_else(|| DataError::new(format!("unknown Avro type {name:?}")))?,
                },
            };
            if let Some(name) = full_name(obj).filter(|_| matches!(type_name, "enum" | "fixed")) {
                named.insert(name, result.clone());
            }
            Ok(result)
        }
        other => Err(DataError::new(format!("not an Avro schema: {other}"))),
    }
}

fn primitive(name: &str) -> Option<(Node, Schema)> {
    Some(match name {
        "null" => (Node::Null, Schema::new(Kind::String).optional()),
        "boolean" => (Node::Boolean, Schema::new(Kind::Boolean)),
        "int" => (Node::Int(IntAs::Int32), Schema::new(Kind::Int32)),
        "long" => (Node::Long(LongAs::Int64), Schema::new(Kind::Int64)),
        "float" => (Node::Float, Schema::new(Kind::Float32)),
        "double" => (Node::Double, Schema::new(Kind::Float64)),
        "bytes" => (Node::Bytes(None), Schema::new(Kind::Bytes)),
        "string" => (Node::String, Schema::new(Kind::String)),
        _ => return None,
    })
}

fn qualify(namespace: Option<&str>, name: &str) -> String {
    match namespace.filter(|n| !n.is_empty()) {
        Some(ns) => format!("{ns}.{name}"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Schema {
        Schema::record(
            "servicenow.incident",
            vec![
                Field::new("sys_id", Schema::new(Kind::String)),
                Field::new("priority", Schema::new(Kind::Int32).optional()),
                Field::new("cost", Schema::decimal(2).optional()),
                Field::new("opened_at", Schema::timestamp().optional()),
            ],
        )
    }

    #[test]
    fn connect_schemas_are_written_as_avro_data_writes_them() {
        let avro = from_connect(&table()).expect("avro");
        assert_eq!(avro["type"], "record");
        assert_eq!((avro["namespace"].as_str(), avro["name"].as_str()), (Some("servicenow"), Some("incident")));
        assert_eq!(avro["fields"][1]["type"], json!(["null", "int"]));
        assert_eq!(avro["fields"][1]["default"], Json::Null);
        assert_eq!(avro["fields"][3]["type"][1]["logicalType"], "timestamp-millis");
        assert_eq!(avro["fields"][2]["type"][1]["scale"], 2);
        assert!(from_connect(&Schema::record("t", vec![Field::new("caller_id.name", Schema::new(Kind::String))])).is_err());
    }

    #[test]
    fn our_avro_schemas_read_back_as_the_same_connect_schema() {
        let text = from_connect(&table()).expect("avro").to_string();
        let (_, connect) = parse(&text).expect("parse");
        assert_eq!(connect.fields().len(), 4);
        assert_eq!(connect.field("cost").map(|f| f.schema.logical()), Some(Some(Logical::Decimal { scale: 2 })));
        assert_eq!(connect.field("opened_at").map(|f| f.schema.optional), Some(true));
        assert_eq!(connect.name.as_deref(), Some("servicenow.incident"));
    }

    #[test]
    fn named_types_resolve_and_other_unions_are_refused_by_name() {
        let text = r#"{"type":"record","name":"A","namespace":"n","fields":[
            {"name":"x","type":{"type":"enum","name":"E","symbols":["a","b"]}},
            {"name":"y","type":"E"},
            {"name":"z","type":["null","n.E"]}]}"#;
        let (node, _) = parse(text).expect("parse");
        assert!(matches!(node, Node::Record(ref f) if f.len() == 3));
        let e = parse(r#"{"type":"record","name":"A","fields":[{"name":"u","type":["int","string"]}]}"#).expect_err("union");
        assert!(e.to_string().contains("field u") && e.to_string().contains("unions"), "{e}");
        let e = parse(r#"{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}"#).expect_err("recursive");
        assert!(e.to_string().contains("recursive"), "{e}");
    }
}
