//! Every fuzz target's function on the stable toolchain, for `make test`: each committed seed
//! (`tests/fuzz/seeds/<target>/`) and each crash input kept as a regression
//! (`tests/fuzz/regressions/<target>/`) goes through the target once, so a regression is caught
//! without nightly or cargo-fuzz (`make fuzz` explores; this replays).
//!
//! The target files are compiled here as they are: `libfuzzer_sys::fuzz_target!` is this crate's
//! own macro (the crate is its own `libfuzzer_sys`), which turns a target's body into `run`.

// The targets are cargo-fuzz harnesses (tests/fuzz), written to its habits, not the workspace's
// lint set: checked by `make fuzz`, compiled here only to replay inputs.
#![allow(clippy::all, clippy::pedantic, clippy::nursery, clippy::restriction)]

extern crate self as libfuzzer_sys;

/// A fuzz target's body as `pub fn run(data: &[u8])`.
#[macro_export]
macro_rules! fuzz_target {
    (|$data:ident: &[u8]| $body:block) => {
        /// The target's check of one input.
        pub fn run($data: &[u8]) $body
    };
}

#[path = "../../fuzz/fuzz_targets/batch_answer.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod batch_answer;
#[path = "../../fuzz/fuzz_targets/component_manifest.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod component_manifest;
#[path = "../../fuzz/fuzz_targets/converter_input.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod converter_input;
#[path = "../../fuzz/fuzz_targets/encoded_query.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod encoded_query;
#[path = "../../fuzz/fuzz_targets/executor_frames.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod executor_frames;
#[path = "../../fuzz/fuzz_targets/guard_versions.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod guard_versions;
#[path = "../../fuzz/fuzz_targets/page_scanner.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod page_scanner;
#[path = "../../fuzz/fuzz_targets/properties.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod properties;
#[path = "../../fuzz/fuzz_targets/protobuf.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod protobuf;
#[path = "../../fuzz/fuzz_targets/push_and_deletes.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod push_and_deletes;
#[path = "../../fuzz/fuzz_targets/registry_and_transforms.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod registry_and_transforms;
#[path = "../../fuzz/fuzz_targets/rest.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod rest;
#[path = "../../fuzz/fuzz_targets/sigstore_bundle.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod sigstore_bundle;
#[path = "../../fuzz/fuzz_targets/sink_resolution.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod sink_resolution;
#[path = "../../fuzz/fuzz_targets/source_version.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod source_version;
#[path = "../../fuzz/fuzz_targets/state_records.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod state_records;
#[path = "../../fuzz/fuzz_targets/stored_position.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod stored_position;
#[path = "../../fuzz/fuzz_targets/token_answers.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod token_answers;
#[path = "../../fuzz/fuzz_targets/typed_transforms.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod typed_transforms;
#[path = "../../fuzz/fuzz_targets/wit_records.rs"]
#[allow(unused_attributes, unused_imports)]
pub mod wit_records;

/// Each target with its function.
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("batch_answer", batch_answer::run),
    ("component_manifest", component_manifest::run),
    ("converter_input", converter_input::run),
    ("encoded_query", encoded_query::run),
    ("executor_frames", executor_frames::run),
    ("guard_versions", guard_versions::run),
    ("page_scanner", page_scanner::run),
    ("properties", properties::run),
    ("protobuf", protobuf::run),
    ("push_and_deletes", push_and_deletes::run),
    ("registry_and_transforms", registry_and_transforms::run),
    ("rest", rest::run),
    ("sigstore_bundle", sigstore_bundle::run),
    ("sink_resolution", sink_resolution::run),
    ("source_version", source_version::run),
    ("state_records", state_records::run),
    ("stored_position", stored_position::run),
    ("token_answers", token_answers::run),
    ("typed_transforms", typed_transforms::run),
    ("wit_records", wit_records::run),
];
