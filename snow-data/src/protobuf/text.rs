//! `.proto` text: reading a file the registry returns (proto3 and proto2 as Connect, Confluent's
//! registry and the Java serializers write them) into a [`File`], and writing a [`File`] as the
//! text our converter registers. Services, extensions, reserved ranges and options are skipped,
//! except Confluent's `(confluent.field_meta)` params and `map_entry`; groups are refused.

use std::fmt::Write as _;

use crate::error::DataError;

use super::descriptor::{Enum, FieldDef, File, Label, Message, Scalar, Type};

/// Deepest nesting of messages read.
const MAX_DEPTH: usize = 32;

/// A token of `.proto` text.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A name, possibly dotted (`google.protobuf.Timestamp`, `.pkg.Msg`), or a keyword.
    Word(String),
    /// A number as written.
    Number(String),
    /// A quoted string, unescaped.
    Text(String),
    /// One punctuation character.
    Symbol(char),
}

fn tokens(text: &str) -> Result<Vec<(Token, usize)>, DataError> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut line = 1;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
                i += 2;
            }
            '"' | '\'' => {
                let quote = c;
                let mut s = String::new();
                i += 1;
                loop {
                    let Some(&ch) = chars.get(i) else {
                        return Err(DataError::new(format!("line {line}: a string is not closed")));
                    };
                    i += 1;
                    match ch {
                        ch if ch == quote => break,
                        '\\' => {
                            let esc = chars.get(i).copied().unwrap_or('\\');
                            i += 1;
                            s.push(match esc {
                                'n' => '\n',
                                't' => '\t',
                                'r' => '\r',
                                '0' => '\0',
                                other => other,
                            });
                        }
                        ch => s.push(ch),
                    }
                }
                out.push((Token::Text(s), line));
            }
            c if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_') {
                    i += 1;
                }
                out.push((Token::Number(chars[start..i].iter().collect()), line));
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == '.' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.') {
                    i += 1;
                }
                out.push((Token::Word(chars[start..i].iter().collect()), line));
            }
            c => {
                out.push((Token::Symbol(c), line));
                i += 1;
            }
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    at: usize,
    proto3: bool,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    fn err(&self, what: &str) -> DataError {
        let line = self.tokens.get(self.at).or(self.tokens.last()).map_or(1, |(_, l)| *l);
        DataError::new(format!("the .proto text at line {line}: {what}"))
    }

    fn next(&mut self) -> Result<Token, DataError> {
        let t = self.tokens.get(self.at).map(|(t, _)| t.clone()).ok_or_else(|| self.err("ends too early"))?;
        self.at += 1;
        Ok(t)
    }

    fn word(&mut self) -> Result<String, DataError> {
        match self.next()? {
            Token::Word(w) => Ok(w),
            other => {
                self.at -= 1;
                Err(self.err(&format!("expected a name, found {other:?}")))
            }
        }
    }

    fn symbol(&mut self, c: char) -> Result<(), DataError> {
        match self.next()? {
            Token::Symbol(s) if s == c => Ok(()),
            other => {
                self.at -= 1;
                Err(self.err(&format!("expected {c:?}, found {other:?}")))
            }
        }
    }

    fn eat(&mut self, c: char) -> bool {
        let found = self.peek() == Some(&Token::Symbol(c));
        self.at += usize::from(found);
        found
    }

    fn number(&mut self) -> Result<i64, DataError> {
        let negative = self.eat('-');
        let text = match self.next()? {
            Token::Number(n) => n,
            other => return Err(self.err(&format!("expected a number, found {other:?}"))),
        };
        let n = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            Some(hex) => i64::from_str_radix(hex, 16),
            None if text.len() > 1 && text.starts_with('0') => i64::from_str_radix(&text[1..], 8),
            None => text.parse(),
        }
        .map_err(|_| self.err(&format!("{text:?} is not an integer")))?;
        Ok(if negative { -n } else { n })
    }

    /// Skips to the end of a statement (`;`) or past a balanced `{ ... }` block, whichever ends it.
    fn skip_statement(&mut self) -> Result<(), DataError> {
        let mut depth = 0usize;
        loop {
            match self.next()? {
                Token::Symbol('{') => depth += 1,
                Token::Symbol('}') if depth <= 1 => {
                    if depth == 1 {
                        self.eat(';');
                        return Ok(());
                    }
                    return Err(self.err("unbalanced '}'"));
                }
                Token::Symbol('}') => depth -= 1,
                Token::Symbol(';') if depth == 0 => return Ok(()),
                _ => {}
            }
        }
    }

    fn file(&mut self) -> Result<File, DataError> {
        let mut file = File::default();
        while let Some(t) = self.peek().cloned() {
            match t {
                Token::Symbol(';') => self.at += 1,
                Token::Word(w) => match w.as_str() {
                    "syntax" | "edition" => {
                        self.at += 1;
                        self.symbol('=')?;
                        match self.next()? {
                            Token::Text(s) => self.proto3 = s != "proto2",
                            other => return Err(self.err(&format!("expected the syntax in quotes, found {other:?}"))),
                        }
                        self.symbol(';')?;
                    }
                    "package" => {
                        self.at += 1;
                        file.package = self.word()?;
                        self.symbol(';')?;
                    }
                    "import" => {
                        self.at += 1;
                        if matches!(self.peek(), Some(Token::Word(w)) if w == "public" || w == "weak") {
                            self.at += 1;
                        }
                        match self.next()? {
                            Token::Text(path) => file.imports.push(path),
                            other => return Err(self.err(&format!("expected the imported file in quotes, found {other:?}"))),
                        }
                        self.symbol(';')?;
                    }
                    "message" => {
                        self.at += 1;
                        file.messages.push(self.message(0)?);
                    }
                    "enum" => {
                        self.at += 1;
                        file.enums.push(self.enumeration()?);
                    }
                    "option" | "service" | "extend" => self.skip_statement()?,
                    other => return Err(self.err(&format!("unexpected {other:?} at the top of the file"))),
                },
                other => return Err(self.err(&format!("unexpected {other:?} at the top of the file"))),
            }
        }
        Ok(file)
    }

    fn message(&mut self, depth: usize) -> Result<Message, DataError> {
        if depth >= MAX_DEPTH {
            return Err(self.err(&format!("messages nested deeper than {MAX_DEPTH}")));
        }
        let mut message = Message { name: self.word()?, ..Message::default() };
        self.symbol('{')?;
        loop {
            let t = self.peek().cloned().ok_or_else(|| self.err(&format!("message {} is not closed", message.name)))?;
            match t {
                Token::Symbol('}') => {
                    self.at += 1;
                    return Ok(message);
                }
                Token::Symbol(';') => self.at += 1,
                Token::Word(w) => match w.as_str() {
                    "message" => {
                        self.at += 1;
                        message.nested.push(self.message(depth + 1)?);
                    }
                    "enum" => {
                        self.at += 1;
                        message.enums.push(self.enumeration()?);
                    }
                    "oneof" => {
                        self.at += 1;
                        self.word()?;
                        self.symbol('{')?;
                        while !self.eat('}') {
                            if self.eat(';') {
                                continue;
                            }
                            if matches!(self.peek(), Some(Token::Word(w)) if w == "option") {
                                self.skip_statement()?;
                                continue;
                            }
                            let field = self.field(Label::Optional, &mut message)?;
                            message.fields.push(field);
                        }
                    }
                    "option" => {
                        self.at += 1;
                        if matches!(self.peek(), Some(Token::Word(w)) if w == "map_entry") {
                            self.at += 1;
                            self.symbol('=')?;
                            message.map_entry = matches!(self.next()?, Token::Word(v) if v == "true");
                            self.symbol(';')?;
                        } else {
                            self.skip_statement()?;
                        }
                    }
                    "reserved" | "extensions" | "extend" => self.skip_statement()?,
                    "group" => return Err(self.err("groups are not supported")),
                    "repeated" => {
                        self.at += 1;
                        let field = self.field(Label::Repeated, &mut message)?;
                        message.fields.push(field);
                    }
                    "optional" | "required" => {
                        self.at += 1;
                        let label = if w == "optional" { Label::Optional } else { Label::Singular };
                        let field = self.field(label, &mut message)?;
                        message.fields.push(field);
                    }
                    _ => {
                        let label = if self.proto3 { Label::Singular } else { Label::Optional };
                        let field = self.field(label, &mut message)?;
                        message.fields.push(field);
                    }
                },
                other => return Err(self.err(&format!("unexpected {other:?} in message {}", message.name))),
            }
        }
    }

    /// A field after its label: `type name = number [options];` or `map<K, V> name = number;`.
    fn field(&mut self, label: Label, message: &mut Message) -> Result<FieldDef, DataError> {
        let written = self.word()?;
        let (label, ty) = if written == "map" && self.eat('<') {
            let key = self.word()?;
            self.symbol(',')?;
            let value = self.word()?;
            self.symbol('>')?;
            (Label::Repeated, FieldType::Map(key, value))
        } else if written == "group" {
            return Err(self.err("groups are not supported"));
        } else {
            (label, FieldType::Plain(written))
        };
        let name = self.word()?;
        self.symbol('=')?;
        let n = self.number()?;
        let number = u32::try_from(n)
            .ok()
            .filter(|n| (1..=536_870_911).contains(n))
            .ok_or_else(|| self.err(&format!("field {name} has number {n}, outside 1..2^29")))?;
        let params = if self.eat('[') { self.field_options()? } else { Vec::new() };
        self.symbol(';')?;
        let ty = match ty {
            FieldType::Plain(t) => parse_type(&t),
            FieldType::Map(key, value) => {
                let entry = format!("{}Entry", camel(&name));
                message.nested.push(Message {
                    name: entry.clone(),
                    fields: vec![
                        FieldDef { name: "key".into(), number: 1, label: Label::Singular, ty: parse_type(&key), params: Vec::new() },
                        FieldDef { name: "value".into(), number: 2, label: Label::Singular, ty: parse_type(&value), params: Vec::new() },
                    ],
                    map_entry: true,
                    ..Message::default()
                });
                Type::Named(entry)
            }
        };
        Ok(FieldDef { name, number, label, ty, params })
    }

    /// A field's `[...]` options after the `[`: Confluent's params (`key: "..", value: ".."`).
    fn field_options(&mut self) -> Result<Vec<(String, String)>, DataError> {
        let mut depth = 1usize;
        let mut params = Vec::new();
        let mut pending_key: Option<String> = None;
        while depth > 0 {
            match self.next()? {
                Token::Symbol('[' | '{') => depth += 1,
                Token::Symbol(']' | '}') => depth -= 1,
                Token::Word(w) if w == "key" || w == "value" => {
                    self.eat(':');
                    if let Some(Token::Text(s)) = self.peek().cloned() {
                        self.at += 1;
                        match (w.as_str(), pending_key.take()) {
                            ("key", _) => pending_key = Some(s),
                            ("value", Some(k)) => params.push((k, s)),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(params)
    }

    fn enumeration(&mut self) -> Result<Enum, DataError> {
        let mut e = Enum { name: self.word()?, values: Vec::new() };
        self.symbol('{')?;
        loop {
            match self.peek().cloned().ok_or_else(|| self.err(&format!("enum {} is not closed", e.name)))? {
                Token::Symbol('}') => {
                    self.at += 1;
                    return Ok(e);
                }
                Token::Symbol(';') => self.at += 1,
                Token::Word(w) if w == "option" || w == "reserved" => self.skip_statement()?,
                Token::Word(w) => {
                    self.at += 1;
                    self.symbol('=')?;
                    let n = self.number()?;
                    let n = i32::try_from(n).map_err(|_| self.err(&format!("enum value {w} = {n} is out of range")))?;
                    if self.eat('[') {
                        self.field_options()?;
                    }
                    self.symbol(';')?;
                    e.values.push((w, n));
                }
                other => return Err(self.err(&format!("unexpected {other:?} in enum {}", e.name))),
            }
        }
    }
}

/// A field's type as written: a plain type, or a map's key and value types.
enum FieldType {
    Plain(String),
    Map(String, String),
}

fn parse_type(t: &str) -> Type {
    Scalar::named(t).map_or_else(|| Type::Named(t.to_string()), Type::Scalar)
}

/// `foo_bar` → `FooBar`, as protoc names a map field's entry message.
fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = true;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Reads `.proto` text.
pub fn parse(text: &str) -> Result<File, DataError> {
    let mut parser = Parser { tokens: tokens(text)?, at: 0, proto3: false };
    parser.file()
}

/// `file` as `.proto` text (proto3).
pub fn write(file: &File) -> String {
    let mut out = String::from("syntax = \"proto3\";\n");
    if !file.package.is_empty() {
        let _ = writeln!(out, "package {};", file.package);
    }
    if !file.imports.is_empty() {
        out.push('\n');
        for i in &file.imports {
            let _ = writeln!(out, "import \"{}\";", escape(i));
        }
    }
    for e in &file.enums {
        out.push('\n');
        write_enum(e, 0, &mut out);
    }
    for m in &file.messages {
        out.push('\n');
        write_message(m, 0, &mut out);
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn type_name(ty: &Type) -> &str {
    match ty {
        Type::Scalar(s) => s.name(),
        Type::Named(n) => n,
    }
}

fn write_message(m: &Message, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    let _ = writeln!(out, "{pad}message {} {{", m.name);
    for f in &m.fields {
        let entry = match &f.ty {
            Type::Named(n) => m.nested.iter().find(|e| e.map_entry && e.name == *n),
            Type::Scalar(_) => None,
        };
        match entry {
            Some(e) if e.fields.len() == 2 => {
                let _ = write!(out, "{pad}  map<{}, {}> {} = {}", type_name(&e.fields[0].ty), type_name(&e.fields[1].ty), f.name, f.number);
            }
            _ => {
                let label = match f.label {
                    Label::Singular => "",
                    Label::Optional => "optional ",
                    Label::Repeated => "repeated ",
                };
                let _ = write!(out, "{pad}  {label}{} {} = {}", type_name(&f.ty), f.name, f.number);
            }
        }
        if !f.params.is_empty() {
            let params: Vec<String> =
                f.params.iter().map(|(k, v)| format!("{{ key: \"{}\", value: \"{}\" }}", escape(k), escape(v))).collect();
            let _ = write!(out, " [(confluent.field_meta) = {{ params: [{}] }}]", params.join(", "));
        }
        out.push_str(";\n");
    }
    for n in m.nested.iter().filter(|n| !n.map_entry) {
        write_message(n, depth + 1, out);
    }
    for e in &m.enums {
        write_enum(e, depth + 1, out);
    }
    let _ = writeln!(out, "{pad}}}");
}

fn write_enum(e: &Enum, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    let _ = writeln!(out, "{pad}enum {} {{", e.name);
    for (name, n) in &e.values {
        let _ = writeln!(out, "{pad}  {name} = {n};");
    }
    let _ = writeln!(out, "{pad}}}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_file_reads_with_maps_oneofs_enums_and_confluent_params() {
        let text = r#"
            syntax = "proto3";
            package servicenow.v1;
            import "google/protobuf/timestamp.proto";
            import public "confluent/type/decimal.proto";
            option java_package = "x.y";
            /* a comment */
            message incident {
              option (confluent.message_meta) = { doc: "x" };
              string sys_id = 1; // the key
              google.protobuf.Timestamp opened_at = 2;
              confluent.type.Decimal cost = 3 [(confluent.field_meta) = {
                params: [ { key: "precision", value: "10" }, { key: "scale", value: "2" } ]
              }];
              map<string, int64> counts = 4;
              repeated Note notes = 5 [packed = false];
              oneof contact { string email = 6; int32 phone = 7; }
              optional bool active = 8;
              State state = 9;
              reserved 10 to 12;
              message Note { string text = 1; }
              enum State { NEW = 0; CLOSED = -1; }
            }
            service S { rpc M (incident) returns (incident); }
        "#;
        let file = parse(text).expect("parse");
        assert_eq!(file.package, "servicenow.v1");
        assert_eq!(file.imports, ["google/protobuf/timestamp.proto", "confluent/type/decimal.proto"]);
        let m = &file.messages[0];
        let names: Vec<(&str, u32, Label)> = m.fields.iter().map(|f| (f.name.as_str(), f.number, f.label)).collect();
        assert_eq!(
            names,
            [
                ("sys_id", 1, Label::Singular),
                ("opened_at", 2, Label::Singular),
                ("cost", 3, Label::Singular),
                ("counts", 4, Label::Repeated),
                ("notes", 5, Label::Repeated),
                ("email", 6, Label::Optional),
                ("phone", 7, Label::Optional),
                ("active", 8, Label::Optional),
                ("state", 9, Label::Singular),
            ]
        );
        assert_eq!(m.fields[2].params, [("precision".into(), "10".into()), ("scale".into(), "2".into())]);
        assert_eq!(m.fields[3].ty, Type::Named("CountsEntry".into()));
        assert!(m.nested.iter().any(|n| n.name == "CountsEntry" && n.map_entry));
        assert_eq!(m.enums[0].values, [("NEW".to_string(), 0), ("CLOSED".to_string(), -1)]);
        let again = parse(&write(&file)).expect("written text reads back");
        assert_eq!(again.messages, file.messages);
    }

    #[test]
    fn problems_name_the_line() {
        let err = parse("syntax = \"proto3\";\nmessage A {\n  string a = 0;\n}").expect_err("number 0");
        assert!(err.to_string().contains("line 3") && err.to_string().contains("outside 1..2^29"), "{err}");
        assert!(parse("message A { group G = 1 { } }").expect_err("group").to_string().contains("groups"));
        assert!(parse("message A { string a = 1;").expect_err("open").to_string().contains("not closed"));
    }
}
