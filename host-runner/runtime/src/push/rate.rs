//! A token bucket: at most `rate` events a second, `rate` of them at once.

use std::time::Instant;

/// One key's share of a rate.
#[derive(Debug)]
pub struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A bucket holding a full second's worth of `rate`.
    pub fn full(rate: u32) -> Self {
        Self { tokens: f64::from(rate.max(1)), at: Instant::now() }
    }

    /// Takes one token if there is one (refilled at `rate` a second since the last call).
    pub fn allow(&mut self, rate: u32) -> bool {
        let rate = f64::from(rate.max(1));
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * rate).min(rate);
        self.at = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_then_refusals() {
        let mut bucket = Bucket::full(5);
        let allowed = (0..20).filter(|_| bucket.allow(5)).count();
        assert_eq!(allowed, 5);
    }
}
