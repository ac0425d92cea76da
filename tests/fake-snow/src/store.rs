//! Tables of rows with ServiceNow system fields, and an index on `(timestamp, sys_id)` for both
//! timestamp fields so cursor-shaped queries read ranges instead of scanning.
//!
//! Longer than our 600-line mark with its unit tests (the code is ~575 lines): the store and its
//! index are one data structure.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

use crate::audit;
use crate::time::format_ts;

/// A row: field name to value (a string, or a reference object with `value`/`display_value`/`link`).
pub type Row = Map<String, Value>;

/// The table of journal entries (comments and work notes of every table's rows).
pub const JOURNAL: &str = "sys_journal_field";

/// The journal fields a write may carry: their text becomes an entry of [`JOURNAL`].
pub const JOURNAL_FIELDS: [&str; 2] = ["comments", "work_notes"];

/// Fields with an ordered `(value, sys_id)` index: both timestamps, and sys_id itself.
pub const INDEXED: [&str; 3] = ["sys_updated_on", "sys_created_on", "sys_id"];

/// A field as a raw read (`sysparm_display_value=false`) serves it: a reference as `{link, value}`
/// (or its value when it has no link), anything else as stored.
pub fn raw_value(v: &Value) -> Value {
    match v {
        Value::Object(o) => {
            let value = o.get("value").cloned().unwrap_or(Value::Null);
            match o.get("link") {
                Some(link) => serde_json::json!({ "link": link, "value": value }),
                None => value,
            }
        }
        other => other.clone(),
    }
}

/// A row and its raw-read JSON, serialised once when written (a raw whole-row read copies it).
#[derive(Debug)]
pub struct Stored {
    /// The row.
    pub row: Row,
    /// The row as a raw whole-row read serves it.
    pub json: String,
}

/// An index: `(value, sys_id)` to the row, so a range read needs no lookup by id.
pub type Index = BTreeMap<(String, String), Arc<Stored>>;

/// One table.
#[derive(Debug, Default)]
pub struct Table {
    rows: HashMap<String, Arc<Stored>>,
    /// Insertion order, for queries without ORDERBY.
    order: Vec<String>,
    index: [Index; 3],
    /// Row-level read ACLs: rows the API's users may not see.
    acl: Acl,
    /// The table's own fields and the table it extends, once a dictionary is set: writes then
    /// keep only known fields and drop the rest silently, as ServiceNow does. None: any field.
    dictionary: Option<(std::collections::BTreeSet<String>, Option<String>)>,
    /// The collection's `no_audit_delete` attribute: deletes leave no `sys_audit_delete` row.
    no_audit_delete: bool,
    /// A table-level read ACL the API's users fail: reads answer 403.
    reads_denied: bool,
    /// A database view (or a table whose system fields are not maintained): rows carry no
    /// `sys_created_on`, `sys_updated_on`, `sys_mod_count` or `sys_*_by`, and writes stamp none.
    view: bool,
}

/// Which rows the Table API's users may not read (a row-level ACL, domain separation or a
/// before-query business rule on a real instance). Like ServiceNow, the list reads its window
/// (`sysparm_limit`, `sysparm_offset`) first and drops hidden rows from it afterwards.
#[derive(Debug, Default)]
pub struct Acl {
    ids: std::collections::HashSet<String>,
    queries: Vec<crate::query::Query>,
}

impl Acl {
    /// True when `row` (with `sys_id`) is hidden.
    pub fn hides(&self, sys_id: &str, row: &Row) -> bool {
        self.ids.contains(sys_id) || self.queries.iter().any(|q| q.matches(row))
    }

    /// True when nothing is hidden.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty() && self.queries.is_empty()
    }
}

impl Table {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The row with `sys_id`.
    pub fn get(&self, sys_id: &str) -> Option<&Row> {
        self.rows.get(sys_id).map(|s| &s.row)
    }

    /// The row with `sys_id` as a raw whole-row read serves it.
    pub fn json(&self, sys_id: &str) -> Option<&str> {
        self.rows.get(sys_id).map(|s| s.json.as_str())
    }

    /// Every row in insertion order.
    pub fn rows_in_order(&self) -> impl Iterator<Item = &Row> {
        self.order.iter().filter_map(|id| self.rows.get(id)).map(|s| &s.row)
    }

    /// The table's row-level ACLs.
    pub fn acl(&self) -> &Acl {
        &self.acl
    }

    /// Hides the rows with these sys_ids from the API's users.
    pub fn hide_ids(&mut self, ids: impl IntoIterator<Item = String>) {
        self.acl.ids.extend(ids);
    }

    /// Hides every row matching the encoded `query` from the API's users.
    pub fn hide_matching(&mut self, query: &str) {
        self.acl.queries.push(crate::query::Query::parse(query));
    }

    /// Lets the API's users read every row again.
    pub fn show_all(&mut self) {
        self.acl = Acl::default();
    }

    /// Whether a table-level read ACL refuses the API's users.
    pub fn reads_denied(&self) -> bool {
        self.reads_denied
    }

    /// The `(value, sys_id)` index of `field`, if it is indexed.
    pub fn index(&self, field: &str) -> Option<&Index> {
        INDEXED.iter().position(|f| *f == field).map(|i| &self.index[i])
    }

    fn index_row(&mut self, id: &str, stored: &Arc<Stored>, add: bool) {
        for (i, field) in INDEXED.iter().enumerate() {
            if let Some(ts) = stored.row.get(*field).and_then(Value::as_str) {
                let key = (ts.to_string(), id.to_string());
                if add {
                    self.index[i].insert(key, stored.clone());
                } else {
                    self.index[i].remove(&key);
                }
            }
        }
    }

    fn put(&mut self, id: String, row: Row) {
        if let Some(old) = self.rows.remove(&id) {
            self.index_row(&id, &old, false);
        } else {
            self.order.push(id.clone());
        }
        let raw: Row = row.iter().map(|(k, v)| (k.clone(), raw_value(v))).collect();
        let json = serde_json::to_string(&raw).unwrap_or_default();
        let stored = Arc::new(Stored { row, json });
        self.index_row(&id, &stored, true);
        self.rows.insert(id, stored);
    }

    fn remove(&mut self, id: &str) -> Option<Row> {
        let stored = self.rows.remove(id)?;
        self.index_row(id, &stored, false);
        self.order.retain(|o| o != id);
        Some(stored.row.clone())
    }
}

/// All tables, and the generator of sys_ids.
#[derive(Debug, Default)]
pub struct Store {
    tables: HashMap<String, Table>,
    next_id: AtomicU64,
    /// When each row version stopped being current (updated or deleted), in ms since the Unix
    /// epoch, keyed by `(table, sys_id, sys_mod_count)`; kept only while the served-versions log
    /// is on ([`crate::served`]).
    superseded: Option<HashMap<(String, String, String), u64>>,
    /// The after-commit business rule that posts notifications, when set ([`crate::push`]).
    pusher: Option<Arc<crate::push::Pusher>>,
    /// Attachments' contents by their sys_id ([`crate::attachment`]).
    pub(crate) files: HashMap<String, Vec<u8>>,
}

/// A new 32-hex-character sys_id, unique in this store.
fn sys_id(counter: u64) -> String {
    let mut z = counter.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut mix = || {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = z;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    };
    format!("{:016x}{:016x}", mix(), mix())
}

/// One `sys_dictionary` element of a table (`"u_total"` alone is a string field).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(from = "DictFieldSpec")]
pub struct DictField {
    /// The column name.
    pub element: String,
    /// Its type (`string`, `integer`, `glide_date_time`, `reference`, `decimal`...).
    pub internal_type: String,
    /// The referenced table of a reference.
    pub reference: Option<String>,
    /// Whether it has choices.
    pub choice: bool,
    /// Its attributes (`scale=4`).
    pub attributes: String,
}

impl From<&str> for DictField {
    fn from(element: &str) -> Self {
        Self { element: element.into(), internal_type: "string".into(), reference: None, choice: false, attributes: String::new() }
    }
}

impl DictField {
    /// An element called `element` of `internal_type`.
    pub fn typed(element: &str, internal_type: &str) -> Self {
        Self { internal_type: internal_type.into(), ..Self::from(element) }
    }
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum DictFieldSpec {
    Name(String),
    Full {
        element: String,
        #[serde(default = "string_type")]
        internal_type: String,
        #[serde(default)]
        reference: Option<String>,
        #[serde(default)]
        choice: bool,
        #[serde(default)]
        attributes: String,
    },
}

fn string_type() -> String {
    "string".into()
}

impl From<DictFieldSpec> for DictField {
    fn from(spec: DictFieldSpec) -> Self {
        match spec {
            DictFieldSpec::Name(n) => DictField::from(n.as_str()),
            DictFieldSpec::Full { element, internal_type, reference, choice, attributes } => {
                DictField { element, internal_type, reference, choice, attributes }
            }
        }
    }
}

impl Store {
    /// Sets `table`'s dictionary: its own `fields` and the table it extends. Also writes the
    /// `sys_db_object` and `sys_dictionary` rows the Table API serves for it.
    pub fn set_dictionary(&mut self, table: &str, fields: &[DictField], parent: Option<&str>, now: i64) {
        let object_id = |store: &Store, name: &str| -> Option<String> {
            store
                .tables
                .get("sys_db_object")?
                .rows_in_order()
                .find(|r| r.get("name").and_then(Value::as_str) == Some(name))
                .and_then(|r| r.get("sys_id").and_then(Value::as_str).map(str::to_string))
        };
        let ensure_object = |store: &mut Store, name: &str, super_class: Option<String>| {
            if object_id(store, name).is_none() {
                let mut row = Row::new();
                row.insert("name".into(), Value::String(name.into()));
                row.insert("super_class".into(), Value::String(super_class.unwrap_or_default()));
                store.insert("sys_db_object", row, now, "admin");
            }
        };
        let parent_id = parent.map(|p| {
            ensure_object(self, p, None);
            object_id(self, p).unwrap_or_default()
        });
        ensure_object(self, table, parent_id);
        // Setting a table's dictionary again replaces its elements (a field added, a type changed).
        let stale: Vec<String> = self
            .tables
            .get("sys_dictionary")
            .map(|t| {
                t.rows_in_order()
                    .filter(|r| r.get("name").and_then(Value::as_str) == Some(table))
                    .filter(|r| r.get("internal_type").and_then(Value::as_str) != Some("collection"))
                    .filter_map(|r| r.get("sys_id").and_then(Value::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        for id in stale {
            self.delete("sys_dictionary", &id, now, "admin");
        }
        for field in fields {
            let mut row = Row::new();
            row.insert("name".into(), Value::String(table.into()));
            row.insert("element".into(), Value::String(field.element.clone()));
            row.insert("internal_type".into(), Value::String(field.internal_type.clone()));
            row.insert("reference".into(), Value::String(field.reference.clone().unwrap_or_default()));
            row.insert("choice".into(), Value::String(if field.choice { "1" } else { "0" }.into()));
            row.insert("attributes".into(), Value::String(field.attributes.clone()));
            self.insert("sys_dictionary", row, now, "admin");
        }
        let t = self.tables.entry(table.to_string()).or_default();
        let fields: std::collections::BTreeSet<String> = fields.iter().map(|f| f.element.clone()).collect();
        // A column added to a table that had a dictionary is there, empty, on every existing row
        // (ServiceNow returns every column of every row); no row counts as updated for it.
        if let Some((before, _)) = &t.dictionary {
            let added: Vec<String> = fields.difference(before).cloned().collect();
            for id in t.order.clone() {
                let Some(stored) = t.rows.get(&id) else { continue };
                if added.iter().all(|f| stored.row.contains_key(f)) {
                    continue;
                }
                let mut row = stored.row.clone();
                for f in &added {
                    row.entry(f.clone()).or_insert_with(|| Value::String(String::new()));
                }
                t.put(id, row);
            }
        }
        t.dictionary = Some((fields, parent.map(str::to_string)));
    }

    /// Every field `table` may hold (its own and those of the tables it extends, system fields
    /// always); none when no dictionary was set.
    fn known_fields(&self, table: &str) -> Option<std::collections::BTreeSet<String>> {
        let mut known = std::collections::BTreeSet::new();
        let mut next = Some(table.to_string());
        let mut seen = 0;
        let mut any = false;
        while let Some(name) = next.take() {
            seen += 1;
            if let Some((fields, parent)) = self.tables.get(&name).and_then(|t| t.dictionary.as_ref()) {
                any = true;
                known.extend(fields.iter().cloned());
                next = parent.clone().filter(|_| seen < 32);
            }
        }
        any.then_some(known)
    }

    /// `row` without the fields `table`'s dictionary does not know (system fields stay).
    fn known_only(&self, table: &str, mut row: Row) -> Row {
        if let Some(known) = self.known_fields(table) {
            row.retain(|k, _| k.starts_with("sys_") || known.contains(k));
        }
        row
    }

    /// Takes the text of the journal fields (`comments`, `work_notes`) out of `row` of `table`
    /// (sys_id `id`) and records each non-empty one as an entry of `sys_journal_field`, as
    /// ServiceNow does: the row keeps the field, empty (its raw value as the Table API reads it).
    fn journal(&mut self, table: &str, id: &str, row: &mut Row, now: i64, user: &str) {
        if table == JOURNAL {
            return;
        }
        for field in JOURNAL_FIELDS {
            let Some(text) = row.get_mut(field).map(|v| std::mem::replace(v, Value::String(String::new()))) else { continue };
            let text = match text {
                Value::String(t) => t,
                other => other.to_string(),
            };
            if text.is_empty() {
                continue;
            }
            let mut entry = Row::new();
            for (k, v) in [("name", table), ("element", field), ("element_id", id), ("value", text.as_str())] {
                entry.insert(k.into(), Value::String(v.to_string()));
            }
            self.insert(JOURNAL, entry, now, user);
        }
    }

    /// Creates `table` if missing.
    pub fn create_table(&mut self, table: &str) {
        self.tables.entry(table.to_string()).or_default();
    }

    /// Creates `table` as a database view (rows without maintained system fields) if missing.
    pub fn create_view(&mut self, table: &str) {
        self.tables.entry(table.to_string()).or_default().view = true;
    }

    /// The table, if it exists.
    pub fn table(&self, table: &str) -> Option<&Table> {
        self.tables.get(table)
    }

    /// The table, to change, if it exists.
    pub fn table_mut(&mut self, table: &str) -> Option<&mut Table> {
        self.tables.get_mut(table)
    }

    /// Names of all tables.
    pub fn table_names(&self) -> Vec<String> {
        self.tables.keys().cloned().collect()
    }

    /// A fresh sys_id.
    pub fn new_sys_id(&self) -> String {
        sys_id(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Inserts `row` at time `now` by `user`: system fields are set unless the row carries them
    /// (seeding sets its own timestamps). Returns the stored row.
    pub fn insert(&mut self, table: &str, row: Row, now: i64, user: &str) -> Row {
        let mut row = self.known_only(table, row);
        let id = match row.get("sys_id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => id.to_string(),
            _ => self.new_sys_id(),
        };
        self.journal(table, &id, &mut row, now, user);
        let ts = format_ts(now);
        row.insert("sys_id".into(), Value::String(id.clone()));
        if self.tables.get(table).is_some_and(|t| t.view) {
            self.tables.entry(table.to_string()).or_default().put(id.clone(), row.clone());
            return row;
        }
        for (field, value) in
            [("sys_created_on", &ts), ("sys_updated_on", &ts), ("sys_created_by", &user.to_string()), ("sys_updated_by", &user.to_string())]
        {
            row.entry(field).or_insert_with(|| Value::String(value.clone()));
        }
        row.entry("sys_mod_count").or_insert_with(|| Value::String("0".into()));
        let t = self.tables.entry(table.to_string()).or_default();
        t.put(id.clone(), row.clone());
        self.pushed(table, &id, &row);
        row
    }

    /// Applies `changes` to row `sys_id` at `now`: `sys_updated_on` moves, `sys_mod_count` grows.
    /// With `replace`, fields not in `changes` (other than system fields) are removed (PUT).
    pub fn update(&mut self, table: &str, sys_id: &str, changes: Row, now: i64, user: &str, replace: bool) -> Option<Row> {
        let mut changes = self.known_only(table, changes);
        let mut row = self.tables.get(table)?.rows.get(sys_id)?.row.clone();
        self.journal(table, sys_id, &mut changes, now, user);
        if replace {
            row.retain(|k, _| k.starts_with("sys_"));
        }
        for (k, v) in changes {
            if !k.starts_with("sys_") {
                row.insert(k, v);
            }
        }
        if self.tables.get(table).is_some_and(|t| t.view) {
            self.tables.get_mut(table)?.put(sys_id.to_string(), row.clone());
            return Some(row);
        }
        self.note_superseded(table, sys_id, &row);
        let count = row.get("sys_mod_count").and_then(Value::as_str).and_then(|c| c.parse::<u64>().ok()).unwrap_or(0) + 1;
        row.insert("sys_mod_count".into(), Value::String(count.to_string()));
        row.insert("sys_updated_on".into(), Value::String(format_ts(now)));
        row.insert("sys_updated_by".into(), Value::String(user.to_string()));
        self.tables.get_mut(table)?.put(sys_id.to_string(), row.clone());
        self.pushed(table, sys_id, &row);
        Some(row)
    }

    /// Deletes row `sys_id` at `now` by `user`; the delete is recorded in `sys_audit_delete` when
    /// the table's deletes are audited ([`crate::audit`]).
    pub fn delete(&mut self, table: &str, sys_id: &str, now: i64, user: &str) -> Option<Row> {
        let t = self.tables.get_mut(table)?;
        let audited = audit::audited_by_default(table) && !t.no_audit_delete;
        let row = t.remove(sys_id)?;
        self.note_superseded(table, sys_id, &row);
        if audited {
            self.insert(audit::AUDIT_DELETE, audit::audit_row(table, sys_id, &row), now, user);
        }
        // The rule posts the time of the delete (the row's own stamp is its last update).
        let mut stamped = row.clone();
        stamped.insert("sys_updated_on".into(), Value::String(format_ts(now)));
        self.pushed(table, sys_id, &stamped);
        Some(row)
    }

    /// Sets (or removes) the after-commit business rule.
    pub fn set_pusher(&mut self, pusher: Option<Arc<crate::push::Pusher>>) {
        self.pusher = pusher;
    }

    /// The business rule running, if one is set.
    pub fn pusher(&self) -> Option<&Arc<crate::push::Pusher>> {
        self.pusher.as_ref()
    }

    /// Tells the business rule, if any, that `table`'s row `sys_id` was written (`row` as it is now).
    fn pushed(&self, table: &str, sys_id: &str, row: &Row) {
        if let Some(pusher) = &self.pusher {
            pusher.committed(table, sys_id, row.get("sys_updated_on").and_then(Value::as_str).unwrap_or_default());
        }
    }

    /// Sets or clears the `no_audit_delete` attribute of `table`'s collection, as its
    /// `sys_dictionary` collection entry shows it.
    pub fn set_no_audit_delete(&mut self, table: &str, on: bool, now: i64) {
        self.create_table(table);
        if let Some(t) = self.tables.get_mut(table) {
            t.no_audit_delete = on;
        }
        let collection = self.tables.get("sys_dictionary").and_then(|d| {
            d.rows_in_order()
                .find(|r| {
                    r.get("name").and_then(Value::as_str) == Some(table)
                        && r.get("internal_type").and_then(Value::as_str) == Some("collection")
                })
                .and_then(|r| r.get("sys_id").and_then(Value::as_str).map(str::to_string))
        });
        let attributes = Value::String(if on { audit::NO_AUDIT_DELETE.to_string() } else { String::new() });
        match collection {
            Some(id) => {
                let mut changes = Row::new();
                changes.insert("attributes".into(), attributes);
                self.update("sys_dictionary", &id, changes, now, "admin", false);
            }
            None => {
                let mut row = Row::new();
                row.insert("name".into(), Value::String(table.into()));
                row.insert("element".into(), Value::String(String::new()));
                row.insert("internal_type".into(), Value::String("collection".into()));
                row.insert("attributes".into(), attributes);
                self.insert("sys_dictionary", row, now, "admin");
            }
        }
    }

    /// Refuses (or allows again) the API's users every read of `table`, as a table-level read
    /// ACL does (`sys_audit_delete` is readable by admins only on a fresh instance).
    pub fn deny_reads(&mut self, table: &str, on: bool) {
        self.create_table(table);
        if let Some(t) = self.tables.get_mut(table) {
            t.reads_denied = on;
        }
    }

    /// Starts (keeping what was noted) or stops (forgetting it) noting when versions stop being current.
    pub fn keep_supersessions(&mut self, on: bool) {
        match (on, self.superseded.is_some()) {
            (true, false) => self.superseded = Some(HashMap::new()),
            (false, _) => self.superseded = None,
            (true, true) => {}
        }
    }

    /// When version `(sys_id, mod_count)` of `table` stopped being current (ms since the Unix
    /// epoch), if it did while supersessions were kept.
    pub fn superseded_at(&self, table: &str, sys_id: &str, mod_count: &str) -> Option<u64> {
        self.superseded.as_ref()?.get(&(table.to_string(), sys_id.to_string(), mod_count.to_string())).copied()
    }

    fn note_superseded(&mut self, table: &str, sys_id: &str, row: &Row) {
        if let Some(superseded) = self.superseded.as_mut() {
            let count = row.get("sys_mod_count").and_then(Value::as_str).unwrap_or_default().to_string();
            superseded.insert((table.to_string(), sys_id.to_string(), count), crate::served::unix_ms());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_fields_become_entries_of_sys_journal_field_and_stay_out_of_the_row() {
        let mut s = Store::default();
        let mut row = Row::new();
        row.insert("comments".into(), Value::String("first".into()));
        let id = s.insert("incident", row, 100, "ann")["sys_id"].as_str().unwrap().to_string();
        let mut changes = Row::new();
        changes.insert("work_notes".into(), Value::String("note".into()));
        changes.insert("comments".into(), Value::String(String::new()));
        let updated = s.update("incident", &id, changes, 200, "bob", false).unwrap();
        assert_eq!((updated["comments"].as_str(), updated["work_notes"].as_str()), (Some(""), Some("")), "the text is not in the row");
        let entries: Vec<&Row> = s.table(JOURNAL).unwrap().rows_in_order().collect();
        assert_eq!(entries.len(), 2, "an empty text adds no entry");
        assert_eq!((entries[0]["element"].as_str(), entries[0]["value"].as_str()), (Some("comments"), Some("first")));
        assert_eq!((entries[1]["element_id"].as_str(), entries[1]["sys_created_by"].as_str()), (Some(id.as_str()), Some("bob")));
        assert_eq!(entries[1]["sys_created_on"], format_ts(200));
    }

    #[test]
    fn a_views_rows_carry_no_system_stamps_and_writes_add_none() {
        let mut s = Store::default();
        s.create_view("v_assets");
        let mut row = Row::new();
        row.insert("name".into(), Value::String("a".into()));
        let id = s.insert("v_assets", row, 100, "admin")["sys_id"].as_str().unwrap().to_string();
        let mut changes = Row::new();
        changes.insert("name".into(), Value::String("b".into()));
        let updated = s.update("v_assets", &id, changes, 200, "bob", false).unwrap();
        assert_eq!(updated.keys().collect::<Vec<_>>(), ["name", "sys_id"], "no stamps, no mod count");
        assert_eq!(updated["name"], "b");
    }

    #[test]
    fn system_fields_and_index_follow_writes() {
        let mut s = Store::default();
        let row = s.insert("incident", Row::new(), 100, "admin");
        let id = row["sys_id"].as_str().unwrap().to_string();
        assert_eq!(id.len(), 32);
        assert_eq!(row["sys_mod_count"], "0");
        let mut changes = Row::new();
        changes.insert("state".into(), Value::String("2".into()));
        let updated = s.update("incident", &id, changes, 200, "bob", false).unwrap();
        assert_eq!(updated["sys_mod_count"], "1");
        assert_eq!(updated["sys_updated_on"], format_ts(200));
        assert_eq!(updated["sys_created_on"], format_ts(100));
        let index = s.table("incident").unwrap().index("sys_updated_on").unwrap();
        assert_eq!(index.keys().map(|(ts, _)| ts.clone()).collect::<Vec<_>>(), vec![format_ts(200)]);
        assert!(s.delete("incident", &id, 300, "bob").is_some());
        assert!(s.table("incident").unwrap().index("sys_updated_on").unwrap().is_empty());
        let audits: Vec<&Row> = s.table(audit::AUDIT_DELETE).unwrap().rows_in_order().collect();
        assert_eq!(audits.len(), 1);
        assert_eq!((audits[0]["tablename"].as_str(), audits[0]["documentkey"].as_str()), (Some("incident"), Some(id.as_str())));
        assert_eq!(
            (audits[0]["sys_created_on"].as_str(), audits[0]["sys_created_by"].as_str()),
            (Some(format_ts(300).as_str()), Some("bob"))
        );
        assert!(audits[0]["payload"].as_str().unwrap().contains("<state>2</state>"));
    }

    #[test]
    fn no_audit_delete_and_sys_tables_leave_no_audit_row() {
        let mut s = Store::default();
        let a = s.insert("incident", Row::new(), 100, "admin")["sys_id"].as_str().unwrap().to_string();
        let b = s.insert("sys_user", Row::new(), 100, "admin")["sys_id"].as_str().unwrap().to_string();
        s.set_no_audit_delete("incident", true, 100);
        s.set_dictionary("incident", &[DictField::from(DictFieldSpec::Name("short_description".into()))], None, 100);
        let collection = s.table("sys_dictionary").unwrap().rows_in_order().filter(|r| r["internal_type"] == "collection").count();
        assert_eq!(collection, 1, "setting the dictionary keeps the collection's entry");
        s.delete("incident", &a, 200, "bob");
        s.delete("sys_user", &b, 200, "bob");
        assert!(s.table(audit::AUDIT_DELETE).is_none_or(Table::is_empty));
    }
}
