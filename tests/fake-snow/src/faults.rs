//! Injected faults: a rule matches requests by method and path prefix, lets `skip` of them pass,
//! then acts on the next `times` of them (or on all, when `times` is absent).
//!
//! Rules are tried in the order they were added and the first that fires wins. A request counts
//! toward a rule's `skip` only if it reaches that rule, that is if no earlier rule fired on it.

use serde::{Deserialize, Serialize};

/// What a matching request gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultAction {
    /// An error answer with ServiceNow's envelope, and `Retry-After` when given.
    Status {
        /// HTTP status.
        status: u16,
        /// `Retry-After` header value (delta-seconds or an HTTP date).
        #[serde(default)]
        retry_after: Option<String>,
    },
    /// Waits before handling the request normally.
    Latency {
        /// Milliseconds to wait.
        ms: u64,
    },
    /// Handles the request, then sends a truncated body with status 200.
    MalformedBody,
    /// Closes the connection without answering (nothing is applied).
    DropConnection,
    /// Answers normally but sends the body in `chunks` pieces `gap_ms` apart.
    SlowBody {
        /// Pieces the body is cut into.
        chunks: u32,
        /// Milliseconds between pieces.
        gap_ms: u64,
    },
    /// Applies the write, then stalls and closes the connection without answering.
    TimeoutAfterWrite {
        /// Milliseconds to stall before closing.
        stall_ms: u64,
    },
    /// Answers normally with `bytes` spaces appended to the body (still valid JSON: for size caps).
    PadBody {
        /// Spaces appended.
        bytes: u64,
    },
    /// Answers 200 with this body instead (a page no instance would send).
    ReplaceBody {
        /// The body sent.
        body: String,
    },
}

/// A fault rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// Method to match (`GET`, ...); any when absent.
    #[serde(default)]
    pub method: Option<String>,
    /// Path prefix to match (`/api/now/table/incident`); any when absent.
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Matching requests to let through first.
    #[serde(default)]
    pub skip: u32,
    /// Matching requests to act on; every one when absent.
    #[serde(default)]
    pub times: Option<u32>,
    /// What to do.
    pub action: FaultAction,
}

impl Fault {
    /// A rule acting on every request.
    pub fn always(action: FaultAction) -> Self {
        Self { method: None, path_prefix: None, skip: 0, times: None, action }
    }

    /// The same rule limited to `method`.
    pub fn on_method(mut self, method: &str) -> Self {
        self.method = Some(method.to_string());
        self
    }

    /// The same rule limited to paths starting with `prefix`.
    pub fn on_path(mut self, prefix: &str) -> Self {
        self.path_prefix = Some(prefix.to_string());
        self
    }

    /// The same rule acting `times` times.
    pub fn times(mut self, times: u32) -> Self {
        self.times = Some(times);
        self
    }

    /// The same rule letting `skip` matching requests pass first.
    pub fn after(mut self, skip: u32) -> Self {
        self.skip = skip;
        self
    }
}

/// The active rules.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Vec<Fault>,
}

impl Faults {
    /// Adds a rule.
    pub fn add(&mut self, fault: Fault) {
        self.rules.push(fault);
    }

    /// Removes every rule.
    pub fn clear(&mut self) {
        self.rules.clear();
    }

    /// The action for a request, consuming one use of the first rule that fires.
    pub fn take(&mut self, method: &str, path: &str) -> Option<FaultAction> {
        let mut fired = None;
        for (i, rule) in self.rules.iter_mut().enumerate() {
            let matches = rule.method.as_deref().is_none_or(|m| m.eq_ignore_ascii_case(method))
                && rule.path_prefix.as_deref().is_none_or(|p| path.starts_with(p));
            if !matches {
                continue;
            }
            if rule.skip > 0 {
                rule.skip -= 1;
                continue;
            }
            if let Some(times) = rule.times.as_mut() {
                *times -= 1;
            }
            fired = Some((i, rule.action.clone()));
            break;
        }
        let (i, action) = fired?;
        if self.rules[i].times == Some(0) {
            self.rules.remove(i);
        }
        Some(action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_then_times_then_gone() {
        let mut f = Faults::default();
        f.add(Fault::always(FaultAction::DropConnection).on_method("GET").on_path("/api/now/table/x").after(1).times(2));
        assert_eq!(f.take("GET", "/api/now/table/x"), None);
        assert_eq!(f.take("POST", "/api/now/table/x"), None);
        assert_eq!(f.take("GET", "/api/now/table/x"), Some(FaultAction::DropConnection));
        assert_eq!(f.take("GET", "/api/now/table/x?q"), Some(FaultAction::DropConnection));
        assert_eq!(f.take("GET", "/api/now/table/x"), None);
        let json: Fault = serde_json::from_str(r#"{"action":{"status":{"status":429,"retry_after":"2"}},"times":3}"#).unwrap();
        assert_eq!(json.action, FaultAction::Status { status: 429, retry_after: Some("2".into()) });
    }
}
