//! The fake's clock: follows real time with an offset, or stands still until moved.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy)]
enum Mode {
    Follow { offset: i64 },
    Frozen { now: i64 },
}

/// A controllable clock, in whole seconds since the epoch.
#[derive(Debug)]
pub struct Clock {
    mode: Mutex<Mode>,
}

fn real_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

impl Default for Clock {
    fn default() -> Self {
        Self { mode: Mutex::new(Mode::Follow { offset: 0 }) }
    }
}

impl Clock {
    /// The current time.
    pub fn now(&self) -> i64 {
        match *self.mode.lock().unwrap_or_else(|e| e.into_inner()) {
            Mode::Follow { offset } => real_now() + offset,
            Mode::Frozen { now } => now,
        }
    }

    /// Stops the clock at `now`.
    pub fn freeze_at(&self, now: i64) {
        *self.mode.lock().unwrap_or_else(|e| e.into_inner()) = Mode::Frozen { now };
    }

    /// Moves the clock by `seconds` (frozen or following).
    pub fn advance(&self, seconds: i64) {
        let mut mode = self.mode.lock().unwrap_or_else(|e| e.into_inner());
        *mode = match *mode {
            Mode::Follow { offset } => Mode::Follow { offset: offset + seconds },
            Mode::Frozen { now } => Mode::Frozen { now: now + seconds },
        };
    }

    /// Follows real time again, keeping the current reading.
    pub fn follow(&self) {
        let now = self.now();
        *self.mode.lock().unwrap_or_else(|e| e.into_inner()) = Mode::Follow { offset: now - real_now() };
    }

    /// True when frozen.
    pub fn is_frozen(&self) -> bool {
        matches!(*self.mode.lock().unwrap_or_else(|e| e.into_inner()), Mode::Frozen { .. })
    }
}
