//! The per-instance cap on requests in flight, shared by every connector that targets the host.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

/// Requests in flight to one instance host.
#[derive(Debug)]
pub struct InstanceLimiter {
    authority: String,
    cap: usize,
    semaphore: Arc<Semaphore>,
}

impl InstanceLimiter {
    /// The instance host this limiter guards.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// The configured cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// The semaphore requests take a permit from.
    pub fn semaphore(&self) -> Arc<Semaphore> {
        self.semaphore.clone()
    }
}

/// One limiter per instance host for the whole process.
#[derive(Debug, Default)]
pub struct LimiterRegistry {
    limiters: Mutex<HashMap<String, Arc<InstanceLimiter>>>,
}

impl LimiterRegistry {
    /// The limiter of `authority`, created with `cap` on first use. A later connector asking for
    /// a different cap gets the existing limiter; the difference is logged.
    pub fn limiter(&self, authority: &str, cap: usize) -> Arc<InstanceLimiter> {
        let mut limiters = self.limiters.lock().unwrap_or_else(|e| e.into_inner());
        let limiter = limiters
            .entry(authority.to_string())
            .or_insert_with(|| {
                Arc::new(InstanceLimiter { authority: authority.to_string(), cap, semaphore: Arc::new(Semaphore::new(cap)) })
            })
            .clone();
        if limiter.cap != cap {
            tracing::warn!(
                instance = authority,
                "in-flight cap {cap} requested, but {} is already in force for this instance",
                limiter.cap
            );
        }
        limiter
    }
}
