//! Time as snow-core needs it, injected: a monotonic reading, a way to sleep, and a seed for
//! jitter and request ids. [`WasiClock`] in guests (wasi clocks and random), [`SystemClock`] natively,
//! [`ManualClock`] in tests (sleeping advances it and is recorded, nothing waits).

use std::cell::RefCell;
use std::time::Duration;

/// Monotonic time, sleeping and a random seed.
pub trait Clock {
    /// Time since an arbitrary fixed origin; never goes back.
    fn now(&self) -> Duration;
    /// Blocks the caller for `duration`.
    fn sleep(&self, duration: Duration);
    /// A fresh random number (not for secrets).
    fn seed(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Duration {
        (**self).now()
    }
    fn sleep(&self, duration: Duration) {
        (**self).sleep(duration)
    }
    fn seed(&self) -> u64 {
        (**self).seed()
    }
}

/// The guests' clock: `wasi:clocks/monotonic-clock` and `wasi:random/random`.
#[cfg(all(target_arch = "wasm32", target_os = "wasi"))]
#[derive(Debug, Default, Clone, Copy)]
pub struct WasiClock;

#[cfg(all(target_arch = "wasm32", target_os = "wasi"))]
impl Clock for WasiClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(wasip2::clocks::monotonic_clock::now())
    }
    fn sleep(&self, duration: Duration) {
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        wasip2::clocks::monotonic_clock::subscribe_duration(nanos).block();
    }
    fn seed(&self) -> u64 {
        wasip2::random::random::get_random_u64()
    }
}

/// The native clock: `std::time::Instant` and `std::thread::sleep`.
#[cfg(not(all(target_arch = "wasm32", target_os = "wasi")))]
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: std::time::Instant,
}

#[cfg(not(all(target_arch = "wasm32", target_os = "wasi")))]
impl Default for SystemClock {
    fn default() -> Self {
        Self { origin: std::time::Instant::now() }
    }
}

#[cfg(not(all(target_arch = "wasm32", target_os = "wasi")))]
impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
    fn seed(&self) -> u64 {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        nanos ^ (u64::from(std::process::id()) << 32)
    }
}

/// A clock for tests: `sleep` advances it and records the duration; nothing waits.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: RefCell<Duration>,
    sleeps: RefCell<Vec<Duration>>,
}

impl ManualClock {
    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        *self.now.borrow_mut() += by;
    }

    /// Every sleep so far, in order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.sleeps.borrow().clone()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        *self.now.borrow()
    }
    fn sleep(&self, duration: Duration) {
        self.sleeps.borrow_mut().push(duration);
        self.advance(duration);
    }
    fn seed(&self) -> u64 {
        0x5eed
    }
}
