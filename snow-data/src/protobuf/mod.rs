//! Protobuf as Confluent's `ProtobufConverter` writes and reads it: a Connect schema becomes a
//! proto3 file ([`connect::from_connect`]) registered as `.proto` text, a value its message
//! ([`connect::encode`]) after Confluent's message indexes ([`codec`]); a writer's file from the
//! registry, `.proto` text ([`text`]) or a base64 `FileDescriptorProto` ([`binary`]), is compiled
//! into a [`read::Decoder`] that reads records back as Connect data.

pub mod binary;
pub mod codec;
pub mod connect;
pub mod descriptor;
pub mod read;
pub mod text;

pub use connect::{Options, Written, encode, from_connect};
pub use read::Decoder;

use crate::error::DataError;
use descriptor::File;

/// A schema's text from the registry, in either form: `.proto` text or a base64 descriptor.
pub fn parse(schema: &str) -> Result<File, DataError> {
    if binary::is_base64(schema) { binary::parse_base64(schema) } else { text::parse(schema) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decimal::Decimal;
    use crate::schema::{Field, Kind, Schema};
    use crate::value::Value;

    fn incident() -> Schema {
        let opt = |k: Kind| Schema::new(k).optional();
        Schema::record(
            "servicenow.incident",
            vec![
                Field::new("sys_id", Schema::new(Kind::String)),
                Field::new("sys_updated_on", Schema::timestamp()),
                Field::new("short_description", opt(Kind::String)),
                Field::new("priority", opt(Kind::Int32)),
                Field::new("reassignment_count", opt(Kind::Int64)),
                Field::new("active", opt(Kind::Boolean)),
                Field::new("score", opt(Kind::Float64)),
                Field::new("cost", Schema::decimal(2).optional()),
                Field::new("due", Schema::date().optional()),
                Field::new("at", Schema::time().optional()),
                Field::new("tags", Schema::new(Kind::Array(Box::new(Schema::new(Kind::String)))).optional()),
                Field::new("counts", Schema::new(Kind::Array(Box::new(Schema::new(Kind::Int32)))).optional()),
                Field::new("attrs", Schema::new(Kind::Map(Box::new(Schema::new(Kind::String)), Box::new(opt(Kind::Int64)))).optional()),
                Field::new(
                    "caller",
                    Schema::record(
                        "servicenow.caller",
                        vec![Field::new("name", opt(Kind::String)), Field::new("level", Schema::new(Kind::Int8))],
                    )
                    .optional(),
                ),
            ],
        )
    }

    fn row(description: Value) -> Value {
        Value::Struct(vec![
            ("sys_id".into(), Value::String("abc".into())),
            ("sys_updated_on".into(), Value::Timestamp(1_714_557_600_123)),
            ("short_description".into(), description),
            ("priority".into(), Value::Int32(-2)),
            ("reassignment_count".into(), Value::Int64(1 << 40)),
            ("active".into(), Value::Boolean(true)),
            ("score".into(), Value::Float64(2.5)),
            ("cost".into(), Value::Decimal(Decimal { unscaled: -12_345, scale: 2 })),
            ("due".into(), Value::Date(19_844)),
            ("at".into(), Value::Time(45_296_789)),
            ("tags".into(), Value::Array(vec![Value::String("a".into()), Value::String("b".into())])),
            ("counts".into(), Value::Array(vec![Value::Int32(1), Value::Int32(-1), Value::Int32(300)])),
            ("attrs".into(), Value::Map(vec![(Value::String("x".into()), Value::Int64(7))])),
            ("caller".into(), Value::Struct(vec![("name".into(), Value::String("Ann".into())), ("level".into(), Value::Int8(3))])),
        ])
    }

    #[test]
    fn a_table_schema_is_written_as_connect_writes_it_and_reads_back() {
        let schema = incident();
        let written = from_connect(&schema, Options::default()).expect("schema");
        assert_eq!(written.path, [0]);
        for line in [
            "syntax = \"proto3\";",
            "package servicenow;",
            "import \"confluent/type/decimal.proto\";",
            "import \"google/protobuf/timestamp.proto\";",
            "message incident {",
            "  string sys_id = 1;",
            "  google.protobuf.Timestamp sys_updated_on = 2;",
            "  confluent.type.Decimal cost = 8 [(confluent.field_meta) = { params: [{ key: \"scale\", value: \"2\" }] }];",
            "  google.type.Date due = 9;",
            "  google.type.TimeOfDay at = 10;",
            "  repeated string tags = 11;",
            "  map<string, int64> attrs = 13;",
            "  callerMessage caller = 14;",
            "  message callerMessage {",
        ] {
            assert!(written.text.lines().any(|l| l == line), "{line:?} missing from\n{}", written.text);
        }
        let decoder = Decoder::new(&parse(&written.text).expect("reads its own text"), &written.path).expect("compiles");
        let value = row(Value::String("Printer".into()));
        let mut bytes = Vec::new();
        encode(&schema, &value, Options::default(), &mut bytes).expect("encode");
        assert_eq!(bytes[0], 0, "message indexes [0] are one zero byte");
        assert_eq!(decoder.decode(&bytes[1..]).expect("decode"), value);
        assert_eq!(decoder.schema().field("sys_updated_on").map(|f| f.schema.logical()), Some(Some(crate::schema::Logical::Timestamp)));
        assert_eq!(decoder.schema().field("caller").and_then(|f| f.schema.field("level")).map(|f| &f.schema.kind), Some(&Kind::Int8));
    }

    #[test]
    fn a_null_reads_back_as_the_default_or_with_optional_for_nullables_as_null() {
        let schema = incident();
        for (options, expected) in
            [(Options::default(), Value::String(String::new())), (Options { optional_for_nullables: true }, Value::Null)]
        {
            let written = from_connect(&schema, options).expect("schema");
            assert_eq!(written.text.contains("optional string short_description = 3;"), options.optional_for_nullables);
            let decoder = Decoder::new(&parse(&written.text).expect("parse"), &written.path).expect("compile");
            let mut bytes = Vec::new();
            encode(&schema, &row(Value::Null), options, &mut bytes).expect("encode");
            assert_eq!(decoder.decode(&bytes[1..]).expect("decode").get("short_description"), Some(&expected));
        }
    }

    #[test]
    fn a_string_key_is_a_string_value_wrapper() {
        let key = Schema::new(Kind::String);
        let written = from_connect(&key, Options::default()).expect("schema");
        assert_eq!(written.path, [7], "StringValue is wrappers.proto's eighth message");
        assert!(written.text.contains("package google.protobuf;") && written.text.contains("message StringValue {"));
        let mut bytes = Vec::new();
        encode(&key, &Value::String("abc".into()), Options::default(), &mut bytes).expect("encode");
        assert_eq!(bytes, [2, 14, 0x0a, 3, b'a', b'b', b'c']);
        let (path, message) = codec::read_indexes(&bytes).expect("indexes");
        let decoder = Decoder::new(&parse(&written.text).expect("parse"), &path).expect("compile");
        assert_eq!(decoder.decode(message).expect("decode"), Value::String("abc".into()));
    }

    #[test]
    fn a_new_dictionary_field_keeps_the_numbers_the_subject_gave_the_others() {
        let old =
            Schema::record("servicenow.t", vec![Field::new("a", Schema::new(Kind::String)), Field::new("c", Schema::new(Kind::Int32))]);
        let registered = from_connect(&old, Options::default()).expect("old");
        let new = Schema::record(
            "servicenow.t",
            vec![
                Field::new("a", Schema::new(Kind::String)),
                Field::new("b", Schema::new(Kind::Int64)),
                Field::new("c", Schema::new(Kind::Int32)),
            ],
        );
        let previous = &parse(&registered.text).expect("parse").messages[0];
        let kept = connect::keep_numbers(&new, previous);
        let written = from_connect(&kept, Options::default()).expect("new");
        assert!(written.text.contains("  string a = 1;\n  int64 b = 3;\n  int32 c = 2;\n"), "{}", written.text);
        let mut bytes = Vec::new();
        let value =
            Value::Struct(vec![("a".into(), Value::String("x".into())), ("b".into(), Value::Int64(5)), ("c".into(), Value::Int32(7))]);
        encode(&kept, &value, Options::default(), &mut bytes).expect("encode");
        let old_reader = Decoder::new(&parse(&registered.text).expect("parse"), &[0]).expect("compile");
        let seen = old_reader.decode(&bytes[1..]).expect("an old reader reads the new record");
        assert_eq!(seen, Value::Struct(vec![("a".into(), Value::String("x".into())), ("c".into(), Value::Int32(7))]));
    }

    #[test]
    fn a_registered_message_is_written_with_only_when_ours_writes_it_the_same() {
        let curated = parse("syntax = \"proto3\"; package p; message t { string a = 4; int64 b = 2; }").expect("parse");
        let decoder = Decoder::new(&curated, &[0]).expect("compile");
        assert_eq!(decoder.schema().field("a").and_then(|f| f.schema.parameters.get(connect::TAG)).map(String::as_str), Some("4"));
        connect::writes_as(decoder.schema(), &curated.messages[0]).expect("numbers kept through the Tag parameter");
        let value = Value::Struct(vec![("a".into(), Value::String("x".into())), ("b".into(), Value::Int64(9))]);
        let mut bytes = Vec::new();
        encode(decoder.schema(), &value, Options::default(), &mut bytes).expect("encode");
        assert_eq!(decoder.decode(&bytes[1..]).expect("decode"), value);
        let with_enum = parse("syntax = \"proto3\"; message t { E e = 1; enum E { A = 0; } }").expect("parse");
        let schema = Decoder::new(&with_enum, &[0]).expect("compile").schema().clone();
        let err = connect::writes_as(&schema, &with_enum.messages[0]).expect_err("an enum is not written as one");
        assert!(err.to_string().contains("field e is E = 1"), "{err}");
    }

    #[test]
    fn bad_records_and_schemas_are_named() {
        let written = from_connect(&incident(), Options::default()).expect("schema");
        let decoder = Decoder::new(&parse(&written.text).expect("parse"), &[0]).expect("compile");
        let err = decoder.decode(&[0x0d, 1, 2, 3, 4]).expect_err("sys_id as 32-bit");
        assert!(err.to_string().contains("field sys_id") && err.to_string().contains("wire type 5"), "{err}");
        assert!(Decoder::new(&parse(&written.text).expect("parse"), &[3]).expect_err("index").to_string().contains("message index 3"));
        let unknown = parse("syntax = \"proto3\"; message A { other.B b = 1; }").expect("parse");
        assert!(Decoder::new(&unknown, &[0]).expect_err("unknown type").to_string().contains("has type other.B"));
        let looped = parse("syntax = \"proto3\"; message A { A next = 1; }").expect("parse");
        assert!(Decoder::new(&looped, &[0]).expect_err("recursive").to_string().contains("contains itself"));
        // What the fuzz target found (its inputs are seeds): a number used twice, a name that is no
        // protobuf name; a valid leading-underscore name is kept, not rewritten.
        let twice = parse("syntax = \"proto3\"; message A { string a = 1; string b = 1; }").expect("parse");
        assert!(Decoder::new(&twice, &[0]).expect_err("twice").to_string().contains("uses field number 1 twice"));
        let mut unnamed = parse("syntax = \"proto3\"; message A { string a = 1; }").expect("parse");
        unnamed.messages[0].fields[0].name.clear();
        assert!(Decoder::new(&unnamed, &[0]).expect_err("unnamed").to_string().contains("not a protobuf name"));
        let underscore = parse("syntax = \"proto3\"; message A { string _a = 1; }").expect("parse");
        let schema = Decoder::new(&underscore, &[0]).expect("compile").schema().clone();
        assert!(from_connect(&schema, Options::default()).expect("write").text.contains("  string _a = 1;"));
        let list = Schema::new(Kind::Array(Box::new(Schema::new(Kind::String))));
        assert!(from_connect(&list, Options::default()).is_err());
    }
}
