//! Generated bindings of world `transform`.
#![allow(unsafe_code, missing_docs, clippy::all)] // generated code

wit_bindgen::generate!({
    world: "transform",
    path: "../../../wit",
});

use crate::Component;
export!(Component with_types_in self);
