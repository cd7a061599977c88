//! The back-off of olm-rs, in one place: the wait before retry number `failures` (1-based)
//! doubles from `initial` and is capped at `max`. The work queues, the CSV controller, catalog
//! connections and the start-up wait all use it, each with its own `initial` and `max`.
//! Where no failure count survives between syncs (a bundle lookup keeps only when it started
//! failing, in its status), [`after_elapsed`] grows the wait with the time already spent, which
//! is the same doubling seen from the clock.

use std::time::Duration;

/// The wait before retry number `failures` (1-based; 0 counts as 1).
pub fn delay(failures: u32, initial: Duration, max: Duration) -> Duration {
    let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(20));
    initial.saturating_mul(factor).min(max)
}

/// The wait when failures are known only by how long they have lasted: a quarter of `elapsed`,
/// between `min` and `max` (so each retry comes at most 25 % of the time spent later: the
/// retries double their spacing like [`delay`]).
pub fn after_elapsed(elapsed: Duration, min: Duration, max: Duration) -> Duration {
    (elapsed / 4).clamp(min, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_elapsed_grows_with_the_time_spent_and_caps() {
        let s = Duration::from_secs;
        assert_eq!(after_elapsed(s(0), s(1), s(60)), s(1));
        assert_eq!(after_elapsed(s(40), s(1), s(60)), s(10));
        assert_eq!(after_elapsed(s(3600), s(1), s(60)), s(60));
    }

    #[test]
    fn doubles_from_the_first_retry_and_caps() {
        let s = Duration::from_secs;
        let waits: Vec<Duration> = (1..=8).map(|n| delay(n, s(1), s(60))).collect();
        assert_eq!(waits, [s(1), s(2), s(4), s(8), s(16), s(32), s(60), s(60)]);
        assert_eq!(delay(0, s(1), s(60)), s(1));
        assert_eq!(delay(u32::MAX, s(1), s(60)), s(60));
        assert_eq!(
            delay(3, Duration::from_millis(5), Duration::from_secs(1)),
            Duration::from_millis(20)
        );
    }
}
