//! Host-level retry pacing for a unit or lane that failed transiently (a guest error, a trap, a
//! Kafka failure): full-jitter exponential backoff, reset after a success.

use std::time::Duration;

/// Exponential backoff with full jitter between 0 and `min(max, base·2^attempt)`.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
    seed: u64,
}

impl Backoff {
    /// Starts at `base`, never above `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0x5eed);
        Self { base, max, attempt: 0, seed: seed | 1 }
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.base.saturating_mul(1u32 << self.attempt.min(20)).min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        // xorshift64*: jitter only needs to be spread, not unpredictable.
        self.seed ^= self.seed >> 12;
        self.seed ^= self.seed << 25;
        self.seed ^= self.seed >> 27;
        let fraction = (self.seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
        ceiling.mul_f64(fraction).max(Duration::from_millis(10))
    }

    /// Failures since the last success.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// Forgets past failures.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_within_the_growing_ceiling() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        for attempt in 0..10u32 {
            let ceiling = Duration::from_millis(100).saturating_mul(1 << attempt).min(Duration::from_secs(2));
            let d = b.next_delay();
            assert!(d <= ceiling.max(Duration::from_millis(10)), "attempt {attempt}: {d:?} > {ceiling:?}");
        }
        b.reset();
        assert_eq!(b.attempts(), 0);
    }
}
