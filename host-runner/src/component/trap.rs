//! A trap in one line, for status and parking messages: what trapped (the trap code, or the root
//! cause when it was not a wasm trap) and the innermost named function of the component, without
//! the multi-line backtrace the full error carries (that one is logged as it is).

use wasmtime::{Trap, WasmBacktrace};

/// `error`, a failed call into a component, in one line.
pub fn one_line(error: &wasmtime::Error) -> String {
    let what = match error.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => error.root_cause().to_string().lines().next().unwrap_or_default().to_string(),
    };
    let function = error.downcast_ref::<WasmBacktrace>().and_then(|bt| bt.frames().iter().find_map(|f| f.func_name()));
    match function {
        Some(name) => format!("{what} (in {name})"),
        None => what,
    }
}
