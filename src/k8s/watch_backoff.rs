//! How long a watch waits before it starts again after failing (docs/reliability.md §3.3).
//!
//! kube-runtime's default back-off, like client-go's reflector, doubles from 0.8 s up to 30 s,
//! adds up to 100 % jitter, and starts again from 0.8 s only after a success. An API server
//! restart is several failures in a row for every watch — connections refused while it is
//! down, then `403 Forbidden` while its authorizer's caches fill — so a watch slept up to a
//! minute after the API server was back, and every decision read from that kind's store was
//! taken on a copy that old. On the real node a 3-hop chain waited ~45 s that way after the
//! last of five restarts (a CSV stayed `Installing` beside its Ready Deployment).
//!
//! olm-rs doubles from 0.8 s but never waits more than [`CAP`] (± [`JITTER`]): one controller's
//! few dozen watches retrying every ~5 s are nothing to an API server, and a restart that
//! takes a few seconds costs a few seconds.

use std::time::Duration;

/// The first wait after a failure.
pub const FIRST: Duration = Duration::from_millis(800);
/// The longest wait, however many failures came in a row.
pub const CAP: Duration = Duration::from_secs(5);
/// Each wait is its base times a factor in `[1 − JITTER, 1 + JITTER]`, so that the watches of
/// many clients cut off together do not all come back at the same moment.
pub const JITTER: f64 = 0.2;

/// The wait after `failures` failures in a row (the first failure is 0); `spread` in `[0, 1]`
/// picks the point in the jitter band.
pub fn delay(failures: u32, spread: f64) -> Duration {
    let base = FIRST
        .saturating_mul(2u32.saturating_pow(failures.min(16)))
        .min(CAP);
    base.mul_f64(1.0 - JITTER + 2.0 * JITTER * spread.clamp(0.0, 1.0))
}

/// [`delay`] as kube-runtime's back-off policy: counts failures in a row; the watch stream
/// resets it on every event it yields.
#[derive(Debug, Default)]
pub struct WatchBackoff {
    failures: u32,
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        use rand::Rng as _;
        let wait = delay(self.failures, rand::rng().random_range(0.0..=1.0));
        self.failures = self.failures.saturating_add(1);
        Some(wait)
    }
}

impl kube_runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use kube_runtime::utils::Backoff as _;

    use super::*;

    #[test]
    fn the_wait_doubles_from_the_first_and_stops_at_the_cap() {
        let ms = |n: u64| Duration::from_millis(n);
        // (failures in a row, the wait at the middle of the jitter band)
        let cases = [
            (0, ms(800)),
            (1, ms(1600)),
            (2, ms(3200)),
            (3, CAP),
            (4, CAP),
            // An API server restart: refused while it is down, then 403s while its authorizer
            // warms up. kube-runtime's default waited 25.6 s here, up to 51.2 s with jitter.
            (6, CAP),
            (40, CAP),
            (u32::MAX, CAP),
        ];
        for (failures, wait) in cases {
            assert_eq!(delay(failures, 0.5), wait, "after {failures} failures");
        }
    }

    #[test]
    fn jitter_spreads_each_wait_by_a_fifth_either_way() {
        assert_eq!(delay(0, 0.0), Duration::from_millis(640));
        assert_eq!(delay(0, 1.0), Duration::from_millis(960));
        assert_eq!(delay(9, 1.0), Duration::from_secs(6));
        assert_eq!(delay(9, 7.0), Duration::from_secs(6), "spread is clamped");
    }

    #[test]
    fn no_wait_is_longer_than_the_cap_and_its_jitter() {
        let mut backoff = WatchBackoff::default();
        let waits: Vec<Duration> = backoff.by_ref().take(50).collect();
        assert!(waits.iter().all(|w| *w <= CAP.mul_f64(1.0 + JITTER)));
        assert!(waits[0] <= FIRST.mul_f64(1.0 + JITTER));
        backoff.reset();
        let first = backoff.next().unwrap_or_default();
        assert!(
            first <= FIRST.mul_f64(1.0 + JITTER),
            "a success starts again from the first wait: {first:?}"
        );
    }
}
