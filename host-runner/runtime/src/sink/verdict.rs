//! What the host makes of a record's outcome: final (counted, reported, committed past), held (a
//! retryable failure: the partition waits there), or stopped (a failure the connector's policy
//! does not tolerate: the partition stops there until the connector is restarted).
//!
//! A failure is either the record's (the component could not turn it into a write: bad JSON, a
//! table outside the allow-list, a forbidden field, a malformed sys_id), governed by
//! `errors.tolerance`; or ServiceNow's (it refused the write, or its outcome stayed unknown),
//! governed by `behavior.on.api.errors`. Under `errors.tolerance=all`, every final failure also goes
//! to the dead letter queue when one is named.

use crate::component::bindings::types::{ErrorClass, Operation, Outcome, SkipReason, SnowError};
use crate::config::{OnFailure, SinkSpec};
use crate::connector::{class_label, describe};

/// A record's final outcome, as reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Final {
    /// ServiceNow accepted the write.
    Written {
        /// `create`, `patch`, `put`, `delete`.
        operation: &'static str,
        /// The table written.
        table: String,
        /// The row written.
        sys_id: String,
        /// ServiceNow's status.
        status: u16,
    },
    /// The record needed no write.
    Skipped {
        /// The table it was for.
        table: String,
        /// The row it named.
        sys_id: String,
        /// `not_found`, `stale`, or `filtered` (a transform dropped the record: nothing was sent).
        reason: &'static str,
    },
    /// The record failed for good and its partition went on.
    Failed {
        /// `record` (the component could not make a write of it) or `api` (ServiceNow refused it,
        /// or its outcome is unknown).
        kind: &'static str,
        /// `fatal` or `ambiguous`.
        class: &'static str,
        /// ServiceNow's status, when it answered.
        status: Option<u16>,
        /// What went wrong, redacted.
        message: String,
        /// Whether to log it (`behavior.on.api.errors=ignore` does not).
        log: bool,
        /// Whether it goes to the dead letter queue.
        dead_letter: bool,
        /// Where in Connect's pipeline it failed.
        stage: Stage,
    },
}

/// Where a record failed, as Kafka Connect's error context names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// Writing it (Connect's `TASK_PUT`): the component's outcome.
    Put,
    /// Before the write: reading its key (`KEY_CONVERTER`) or value (`VALUE_CONVERTER`) with the
    /// converter `class`, or a transform of class `class` (`TRANSFORMATION`).
    Converter {
        /// `KEY_CONVERTER`, `VALUE_CONVERTER` or `TRANSFORMATION`.
        stage: &'static str,
        /// The converter's or transform's class.
        class: String,
    },
}

impl Final {
    /// `written`, `skipped` or `failed`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Final::Written { .. } => "written",
            Final::Skipped { .. } => "skipped",
            Final::Failed { .. } => "failed",
        }
    }
}

/// What becomes of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A final outcome.
    Final(Final),
    /// A retryable failure: the partition is held at this record and tries again later.
    Hold(String),
    /// A failure the policy does not tolerate: the partition stops at this record.
    Stop(String),
}

/// Judges `outcome` under the connector's policies.
pub fn judge(spec: &SinkSpec, outcome: &Outcome) -> Verdict {
    match outcome {
        Outcome::Written(w) => Verdict::Final(Final::Written {
            operation: operation_label(w.operation),
            table: w.table.clone(),
            sys_id: w.sys_id.clone(),
            status: w.status,
        }),
        Outcome::Skipped(s) => Verdict::Final(Final::Skipped {
            table: s.table.clone(),
            sys_id: s.sys_id.clone(),
            reason: match s.reason {
                SkipReason::NotFound => "not_found",
                SkipReason::Stale => "stale",
            },
        }),
        Outcome::Failed(error) => {
            let (class, message) = describe(error);
            if class == ErrorClass::Transient {
                return Verdict::Hold(message);
            }
            // The same split as snow-core's `SnowError::is_record_error` (the guest halts on it).
            let record_error = matches!(error, SnowError::Data(_) | SnowError::Config(_) | SnowError::Denied(_));
            let (kind, tolerated, log) = if record_error {
                ("record", spec.tolerate_record_errors, true)
            } else {
                ("api", spec.on_api_error != OnFailure::Stop, spec.on_api_error == OnFailure::Log)
            };
            if !tolerated {
                let policy = if record_error { "errors.tolerance=none" } else { "behavior.on.api.errors=fail" };
                return Verdict::Stop(format!("{message} ({}; {policy} stops the partition here)", class_label(class)));
            }
            let status = match error {
                SnowError::Http(h) => Some(h.status),
                _ => None,
            };
            Verdict::Final(Final::Failed {
                kind,
                class: class_label(class),
                status,
                message,
                log,
                dead_letter: spec.tolerate_record_errors && spec.dlq_topic.is_some(),
                stage: Stage::Put,
            })
        }
    }
}

/// The operation as a label.
pub fn operation_label(op: Operation) -> &'static str {
    match op {
        Operation::Create => "create",
        Operation::Patch => "patch",
        Operation::Put => "put",
        Operation::Delete => "delete",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component::bindings::types::{Failure, HttpFailure, Written};

    fn spec(tolerate: bool, on_api: OnFailure, dlq: bool) -> SinkSpec {
        SinkSpec {
            topics_regex: None,
            max_in_flight: 8,
            tolerate_record_errors: tolerate,
            on_api_error: on_api,
            dlq_topic: dlq.then(|| "dlq".to_string()),
            dlq_context_headers: true,
            result_topic: None,
            error_topic: None,
            on_refused: crate::config::OnRefused::Truncate,
        }
    }

    fn http(status: u16, class: ErrorClass) -> Outcome {
        Outcome::Failed(SnowError::Http(HttpFailure { status, message: "refused".into(), detail: None, request_id: None, class }))
    }

    fn data() -> Outcome {
        Outcome::Failed(SnowError::Data(Failure { message: "record t-0@3: the value is not JSON".into(), class: ErrorClass::Fatal }))
    }

    #[test]
    fn a_retryable_failure_holds_under_every_policy() {
        for on_api in [OnFailure::Stop, OnFailure::Log, OnFailure::Ignore] {
            assert!(matches!(judge(&spec(true, on_api, true), &http(503, ErrorClass::Transient)), Verdict::Hold(_)));
        }
    }

    #[test]
    fn record_errors_follow_errors_tolerance_and_api_errors_follow_behavior_on_api_errors() {
        let Verdict::Stop(why) = judge(&spec(false, OnFailure::Log, false), &data()) else { panic!("stop") };
        assert!(why.contains("not JSON") && why.ends_with("errors.tolerance=none stops the partition here)"), "{why}");
        let Verdict::Final(Final::Failed { kind, dead_letter, log, .. }) = judge(&spec(true, OnFailure::Stop, true), &data()) else {
            panic!("final")
        };
        assert_eq!((kind, dead_letter, log), ("record", true, true));
        let Verdict::Stop(why) = judge(&spec(true, OnFailure::Stop, true), &http(400, ErrorClass::Fatal)) else { panic!("stop") };
        assert!(why.ends_with("behavior.on.api.errors=fail stops the partition here)"), "{why}");
        let Verdict::Final(Final::Failed { kind, class, status, log, dead_letter, .. }) =
            judge(&spec(false, OnFailure::Ignore, false), &http(500, ErrorClass::Ambiguous))
        else {
            panic!("final")
        };
        assert_eq!((kind, class, status, log, dead_letter), ("api", "ambiguous", Some(500), false, false));
    }

    #[test]
    fn writes_are_final() {
        let written = Outcome::Written(Written { operation: Operation::Patch, table: "incident".into(), sys_id: "a".into(), status: 200 });
        assert_eq!(
            judge(&spec(false, OnFailure::Stop, false), &written),
            Verdict::Final(Final::Written { operation: "patch", table: "incident".into(), sys_id: "a".into(), status: 200 })
        );
    }
}
