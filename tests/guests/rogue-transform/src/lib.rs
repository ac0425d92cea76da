//! A transform component for tests: a record whose value is the JSON string `"loop"` makes it spin
//! forever (the host's call timeout must stop it), `"grow"` makes it allocate without end (the
//! store's memory limit must stop it), `"trap"` makes it trap, `"leak"` keeps 1 MiB more than
//! before and passes the record (a component that leaks on every call); any other record passes
//! unchanged.
//! It counts the records each instance saw in the `seen` header, so a test can tell a fresh
//! instance from a reused one.
#![cfg(all(target_arch = "wasm32", target_os = "wasi"))]

mod bindings;

use std::cell::Cell;

use bindings::exports::snow::connector::transform_api::{ConnectRecord, Guest, GuestTransformer, RecordHeader, Transformer};
use bindings::snow::connector::types::{ConfigEntry, ConfigError};

pub(crate) struct Component;

/// An instance, counting what it saw.
pub(crate) struct Rogue {
    seen: Cell<u64>,
    leaked: std::cell::RefCell<Vec<Vec<u8>>>,
}

impl Guest for Component {
    type Transformer = Rogue;

    fn validate(_config: Vec<ConfigEntry>) -> Result<(), Vec<ConfigError>> {
        Ok(())
    }
}

impl GuestTransformer for Rogue {
    fn open(_config: Vec<ConfigEntry>) -> Result<Transformer, String> {
        Ok(Transformer::new(Rogue { seen: Cell::new(0), leaked: std::cell::RefCell::new(Vec::new()) }))
    }

    fn apply(&self, input: ConnectRecord) -> Result<Vec<ConnectRecord>, String> {
        self.seen.set(self.seen.get() + 1);
        match input.value.as_deref() {
            Some("\"loop\"") => {
                let mut n: u64 = 0;
                loop {
                    n = core::hint::black_box(n.wrapping_add(1));
                }
            }
            Some("\"grow\"") => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    core::hint::black_box(&hoard);
                }
            }
            Some("\"trap\"") => panic!("asked to trap"),
            leak_or_pass => {
                if leak_or_pass == Some("\"leak\"") {
                    self.leaked.borrow_mut().push(core::hint::black_box(vec![1u8; 1 << 20]));
                }
                let mut out = input;
                out.headers.push(RecordHeader { key: "seen".into(), value: Some(self.seen.get().to_string()) });
                Ok(vec![out])
            }
        }
    }
}
