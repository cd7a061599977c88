//! Time as an input. The pure core takes `now` as an argument; reconcilers get it from a `Clock`
//! in their context so tests can move time (certificate rotation, poll intervals, timeouts).

use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that only moves when told to; cloning shares the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<Mutex<Timestamp>>,
}

impl ManualClock {
    pub fn new(start: Timestamp) -> Self {
        Self {
            now: Arc::new(Mutex::new(start)),
        }
    }

    pub fn advance(&self, by: SignedDuration) {
        let mut now = self.lock();
        // Saturate instead of panicking: a test moving time past year 9999 gets the maximum.
        *now = now.checked_add(by).unwrap_or(Timestamp::MAX);
    }

    pub fn set(&self, to: Timestamp) {
        *self.lock() = to;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Timestamp> {
        self.now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told_and_clones_share_time() {
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let clock = ManualClock::new(start);
        let shared = clock.clone();
        assert_eq!(clock.now(), start);
        clock.advance(SignedDuration::from_hours(24));
        assert_eq!(
            shared.now(),
            "2026-01-02T00:00:00Z".parse::<Timestamp>().unwrap()
        );
        shared.set(start);
        assert_eq!(clock.now(), start);
    }
}
