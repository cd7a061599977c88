//! The pure rules of Lease-based leader election, as client-go's `leaderelection` package applies
//! them: who may take or renew a `coordination.k8s.io` Lease, given what is in it and the time.
//!
//! Expiry is judged on the *local* clock: a Lease held by someone else expires `leaseDuration`
//! after this process first saw its current `renewTime`, never by comparing `renewTime` with our
//! clock. That is client-go's rule and it makes the election immune to clock skew between nodes:
//! only clock *rates* must agree.

use jiff::{SignedDuration, Timestamp};

/// Timing of the election (client-go's `LeaderElectionConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// How long a Lease stays valid after its last renewal, as seen by the other candidates.
    pub lease_duration: SignedDuration,
    /// How long the leader keeps acting without a successful renewal before it gives up.
    pub renew_deadline: SignedDuration,
    /// The wait between two attempts to acquire or renew.
    pub retry_period: SignedDuration,
}

impl Default for LeaseConfig {
    /// client-go's (and controller-runtime's) defaults: 15s, 10s, 2s.
    fn default() -> Self {
        Self {
            lease_duration: SignedDuration::from_secs(15),
            renew_deadline: SignedDuration::from_secs(10),
            retry_period: SignedDuration::from_secs(2),
        }
    }
}

/// client-go's jitter factor: the retry period is stretched by up to 20%, and the renew deadline
/// must leave room for one stretched retry.
pub const JITTER_FACTOR: f64 = 1.2;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseConfigError {
    #[error("leader election: {field} must be positive, got {value}")]
    NotPositive { field: &'static str, value: String },
    #[error(
        "leader election: lease duration ({lease_duration}) must be longer than the renew \
         deadline ({renew_deadline}), or a new leader could start before the old one stops"
    )]
    LeaseNotLongerThanDeadline {
        lease_duration: String,
        renew_deadline: String,
    },
    #[error(
        "leader election: renew deadline ({renew_deadline}) must be longer than \
         {JITTER_FACTOR} × retry period ({retry_period})"
    )]
    DeadlineTooShortForRetries {
        renew_deadline: String,
        retry_period: String,
    },
}

impl LeaseConfig {
    /// The same checks as client-go's `NewLeaderElector`; they are what makes "never two
    /// leaders" hold.
    pub fn validate(&self) -> Result<(), LeaseConfigError> {
        for (field, value) in [
            ("lease duration", self.lease_duration),
            ("renew deadline", self.renew_deadline),
            ("retry period", self.retry_period),
        ] {
            if !value.is_positive() {
                return Err(LeaseConfigError::NotPositive {
                    field,
                    value: format!("{value:#}"),
                });
            }
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(LeaseConfigError::LeaseNotLongerThanDeadline {
                lease_duration: format!("{:#}", self.lease_duration),
                renew_deadline: format!("{:#}", self.renew_deadline),
            });
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(LeaseConfigError::DeadlineTooShortForRetries {
                renew_deadline: format!("{:#}", self.renew_deadline),
                retry_period: format!("{:#}", self.retry_period),
            });
        }
        Ok(())
    }
}

/// The election fields of a Lease's spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `None` (or an empty string on the wire) when nobody holds the Lease.
    pub holder: Option<String>,
    pub lease_duration: SignedDuration,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub transitions: i32,
}

impl LeaseRecord {
    fn held_by(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }
}

/// A Lease record as this candidate saw it, with the local time it first saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub record: LeaseRecord,
    pub observed_at: Timestamp,
}

/// Folds a freshly read record into what was observed before: the observation time only moves
/// when the record changed (a renewal, a new holder), so an unrenewed Lease ages.
pub fn observe(previous: Option<&Observation>, record: LeaseRecord, now: Timestamp) -> Observation {
    match previous {
        Some(prev) if prev.record == record => prev.clone(),
        _ => Observation {
            record,
            observed_at: now,
        },
    }
}

/// How a write claims the Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// We hold it already: move `renewTime`.
    Renew,
    /// Nobody holds it (never held, or released).
    Acquire,
    /// Its holder stopped renewing and the Lease expired.
    TakeOver,
}

/// What a candidate does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// There is no Lease: create it, held by us.
    Create(LeaseRecord),
    /// Replace the Lease with this record (guarded by `resourceVersion`, so of two candidates
    /// racing only one wins).
    Write { record: LeaseRecord, claim: Claim },
    /// Someone else holds a valid Lease.
    Wait {
        holder: String,
        expires_at: Timestamp,
    },
}

/// Whether `identity` may take or renew the Lease last observed as `observed` (`None`: no Lease
/// exists), and the record to write if so.
pub fn decide(
    identity: &str,
    observed: Option<&Observation>,
    now: Timestamp,
    config: &LeaseConfig,
) -> Decision {
    let Some(observed) = observed else {
        return Decision::Create(LeaseRecord {
            holder: Some(identity.to_owned()),
            lease_duration: config.lease_duration,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 0,
        });
    };
    let current = &observed.record;
    let claim = match current.held_by() {
        Some(holder) if holder == identity => Claim::Renew,
        None => Claim::Acquire,
        Some(holder) => {
            let expires_at = observed
                .observed_at
                .checked_add(current.lease_duration)
                .unwrap_or(Timestamp::MAX);
            if expires_at > now {
                return Decision::Wait {
                    holder: holder.to_owned(),
                    expires_at,
                };
            }
            Claim::TakeOver
        }
    };
    let record = match claim {
        Claim::Renew => LeaseRecord {
            holder: Some(identity.to_owned()),
            lease_duration: config.lease_duration,
            acquire_time: current.acquire_time.or(Some(now)),
            renew_time: Some(now),
            transitions: current.transitions,
        },
        Claim::Acquire | Claim::TakeOver => LeaseRecord {
            holder: Some(identity.to_owned()),
            lease_duration: config.lease_duration,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: current.transitions.saturating_add(1),
        },
    };
    Decision::Write { record, claim }
}

/// The record that hands the Lease back on a clean shutdown, or `None` when `identity` does not
/// hold it. Like client-go, it keeps the transition count and shortens the duration to one
/// second, so a candidate that still has the old record cached takes over at once.
pub fn release(identity: &str, current: &LeaseRecord, now: Timestamp) -> Option<LeaseRecord> {
    if current.held_by() != Some(identity) {
        return None;
    }
    Some(LeaseRecord {
        holder: None,
        lease_duration: SignedDuration::from_secs(1),
        acquire_time: Some(now),
        renew_time: Some(now),
        transitions: current.transitions,
    })
}

/// Whether a leader whose last successful renewal was at `last_renewed` must stop acting.
/// Because `renew_deadline < lease_duration` and the others count the Lease's life from when
/// *they* saw that renewal (never earlier than it happened), the old leader stops before anyone
/// else may start.
pub fn must_step_down(last_renewed: Timestamp, now: Timestamp, config: &LeaseConfig) -> bool {
    let deadline = last_renewed
        .checked_add(config.renew_deadline)
        .unwrap_or(Timestamp::MAX);
    now >= deadline
}

/// Whether a replica may send a write now (docs/leader-election.md §2): only while it leads
/// (`last_renewed` is the start of its last successful renewal, `None` when it does not lead)
/// and before that renewal's deadline. A clock that went back past the renewal closes the
/// gate too: the deadline can no longer be judged, and the next renewal reopens it.
pub fn may_write(last_renewed: Option<Timestamp>, now: Timestamp, config: &LeaseConfig) -> bool {
    last_renewed.is_some_and(|at| now >= at && !must_step_down(at, now, config))
}

/// When a write still in flight must be cut off (docs/leader-election.md §2.1): at the
/// renew deadline of the renewal that let it out, the moment `may_write` turns false — a
/// request that has not been answered by then may not reach the API server later. `None`:
/// this replica does not lead, so nothing it has in flight may go on.
pub fn write_cut_off(last_renewed: Option<Timestamp>, config: &LeaseConfig) -> Option<Timestamp> {
    last_renewed.map(|at| {
        at.checked_add(config.renew_deadline)
            .unwrap_or(Timestamp::MAX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn record(holder: Option<&str>, renewed: i64, transitions: i32) -> LeaseRecord {
        LeaseRecord {
            holder: holder.map(str::to_owned),
            lease_duration: SignedDuration::from_secs(15),
            acquire_time: Some(t(0)),
            renew_time: Some(t(renewed)),
            transitions,
        }
    }

    fn seen(record: LeaseRecord, at: i64) -> Observation {
        Observation {
            record,
            observed_at: t(at),
        }
    }

    #[test]
    fn client_go_defaults_are_valid() {
        let config = LeaseConfig::default();
        assert_eq!(config.lease_duration, SignedDuration::from_secs(15));
        assert_eq!(config.renew_deadline, SignedDuration::from_secs(10));
        assert_eq!(config.retry_period, SignedDuration::from_secs(2));
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn unsafe_timings_are_refused_with_the_reason() {
        let s = SignedDuration::from_secs;
        let cases = [
            (
                (s(10), s(10), s(2)),
                "must be longer than the renew deadline",
            ),
            ((s(15), s(2), s(2)), "1.2 × retry period"),
            ((s(15), s(10), s(0)), "retry period must be positive"),
            ((s(-1), s(10), s(2)), "lease duration must be positive"),
        ];
        for ((lease_duration, renew_deadline, retry_period), expected) in cases {
            let config = LeaseConfig {
                lease_duration,
                renew_deadline,
                retry_period,
            };
            let err = config.validate().unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        }
    }

    #[test]
    fn decisions_table() {
        let config = LeaseConfig::default();
        struct Case {
            name: &'static str,
            observed: Option<Observation>,
            now: i64,
            expect: &'static str,
        }
        let cases = [
            Case {
                name: "no lease: create it",
                observed: None,
                now: 0,
                expect: "create",
            },
            Case {
                name: "ours: renew even long after the last renewal",
                observed: Some(seen(record(Some("me"), 0, 3), 0)),
                now: 100,
                expect: "renew",
            },
            Case {
                name: "released (holder empty on the wire): acquire at once",
                observed: Some(seen(record(Some(""), 0, 3), 0)),
                now: 0,
                expect: "acquire",
            },
            Case {
                name: "never held: acquire",
                observed: Some(seen(record(None, 0, 0), 0)),
                now: 0,
                expect: "acquire",
            },
            Case {
                name: "other holder, seen 14s ago: wait",
                observed: Some(seen(record(Some("other"), 0, 1), 0)),
                now: 14,
                expect: "wait",
            },
            Case {
                name: "other holder, seen exactly 15s ago: expired",
                observed: Some(seen(record(Some("other"), 0, 1), 0)),
                now: 15,
                expect: "take-over",
            },
            Case {
                // A renewTime far in the past (skewed clock, or we just started) does not count:
                // only how long *we* have seen the record unchanged.
                name: "other holder with an old renewTime, just seen: wait",
                observed: Some(seen(record(Some("other"), -1000, 1), 50)),
                now: 50,
                expect: "wait",
            },
        ];
        for case in cases {
            let decision = decide("me", case.observed.as_ref(), t(case.now), &config);
            let got = match &decision {
                Decision::Create(_) => "create",
                Decision::Write {
                    claim: Claim::Renew,
                    ..
                } => "renew",
                Decision::Write {
                    claim: Claim::Acquire,
                    ..
                } => "acquire",
                Decision::Write {
                    claim: Claim::TakeOver,
                    ..
                } => "take-over",
                Decision::Wait { .. } => "wait",
            };
            assert_eq!(got, case.expect, "{}: {decision:?}", case.name);
        }
    }

    #[test]
    fn written_records_carry_holder_times_and_transitions() {
        let config = LeaseConfig::default();
        let Decision::Create(created) = decide("me", None, t(5), &config) else {
            panic!("expected create");
        };
        assert_eq!(created.holder.as_deref(), Some("me"));
        assert_eq!(created.transitions, 0);
        assert_eq!(created.acquire_time, Some(t(5)));
        assert_eq!(created.lease_duration, config.lease_duration);

        let ours = seen(record(Some("me"), 0, 4), 0);
        let Decision::Write {
            record: renewed, ..
        } = decide("me", Some(&ours), t(9), &config)
        else {
            panic!("expected renew");
        };
        assert_eq!(renewed.renew_time, Some(t(9)));
        assert_eq!(
            renewed.acquire_time,
            Some(t(0)),
            "renewal keeps acquireTime"
        );
        assert_eq!(renewed.transitions, 4, "renewal is not a transition");

        let theirs = seen(record(Some("other"), 0, 4), 0);
        let Decision::Write { record: taken, .. } = decide("me", Some(&theirs), t(20), &config)
        else {
            panic!("expected take-over");
        };
        assert_eq!(taken.holder.as_deref(), Some("me"));
        assert_eq!(taken.acquire_time, Some(t(20)));
        assert_eq!(taken.transitions, 5);

        let Decision::Wait { holder, expires_at } = decide("me", Some(&theirs), t(3), &config)
        else {
            panic!("expected wait");
        };
        assert_eq!(holder, "other");
        assert_eq!(expires_at, t(15));
    }

    #[test]
    fn observation_time_moves_only_when_the_record_changes() {
        let first = observe(None, record(Some("other"), 0, 1), t(0));
        let same = observe(Some(&first), record(Some("other"), 0, 1), t(10));
        assert_eq!(same.observed_at, t(0), "an unrenewed lease ages");
        let renewed = observe(Some(&same), record(Some("other"), 8, 1), t(12));
        assert_eq!(renewed.observed_at, t(12), "a renewal restarts the clock");
    }

    #[test]
    fn release_only_by_the_holder_and_keeps_transitions() {
        let ours = record(Some("me"), 0, 7);
        let released = release("me", &ours, t(3)).unwrap();
        assert_eq!(released.holder, None);
        assert_eq!(released.transitions, 7);
        assert_eq!(released.lease_duration, SignedDuration::from_secs(1));
        assert_eq!(release("someone-else", &ours, t(3)), None);
        // After a release, another candidate acquires without waiting.
        let decision = decide(
            "other",
            Some(&seen(released, 3)),
            t(3),
            &LeaseConfig::default(),
        );
        assert!(matches!(
            decision,
            Decision::Write {
                claim: Claim::Acquire,
                ..
            }
        ));
    }

    #[test]
    fn writes_are_allowed_only_between_a_renewal_and_its_deadline() {
        let config = LeaseConfig::default();
        let cases = [
            (None, 0, false, "not leading (standby, or leadership lost)"),
            (Some(0), 0, true, "just renewed"),
            (Some(0), 9, true, "before the renew deadline"),
            (Some(0), 10, false, "at the renew deadline"),
            (
                Some(0),
                14,
                false,
                "past it, the Lease not yet expired for the others",
            ),
            (Some(0), 100, false, "long past it, the network back"),
            (Some(10), 5, false, "the clock went back past the renewal"),
        ];
        for (renewed, now, allowed, what) in cases {
            assert_eq!(
                may_write(renewed.map(t), t(now), &config),
                allowed,
                "{what}"
            );
        }
        // The gate closes before the earliest moment a rival may take the Lease.
        let rival_view = seen(record(Some("leader"), 0, 0), 0);
        let first_take_over = (0..100)
            .find(|&now| {
                matches!(
                    decide("rival", Some(&rival_view), t(now), &config),
                    Decision::Write { .. }
                )
            })
            .unwrap();
        let last_write = (0..100)
            .filter(|&now| may_write(Some(t(0)), t(now), &config))
            .max()
            .unwrap();
        assert_eq!((last_write, first_take_over), (9, 15));
    }

    #[test]
    fn a_leader_steps_down_before_anyone_may_take_over() {
        let config = LeaseConfig::default();
        let last_renewed = t(0);
        assert!(!must_step_down(last_renewed, t(9), &config));
        assert!(must_step_down(last_renewed, t(10), &config));
        // A rival that saw the renewal at the earliest possible moment still waits until 15s.
        let rival_view = seen(record(Some("leader"), 0, 0), 0);
        for now in 0..15 {
            assert!(matches!(
                decide("rival", Some(&rival_view), t(now), &config),
                Decision::Wait { .. }
            ));
        }
    }

    #[test]
    fn a_write_in_flight_is_cut_off_the_moment_no_new_write_may_start() {
        // The defect (docs/reliability.md §3.5): a write let out at 9.9 s was only checked
        // when sent, so it could reach the API server at any later time. Now its cut-off is
        // the same renew deadline that closes the gate to new writes.
        let config = LeaseConfig::default();
        assert_eq!(
            write_cut_off(None, &config),
            None,
            "not leading: cut off now"
        );
        let cut = write_cut_off(Some(t(0)), &config).unwrap();
        assert_eq!(cut, t(10));
        for tenth in 0..200 {
            let now = t(0) + SignedDuration::from_millis(100 * tenth);
            assert_eq!(
                may_write(Some(t(0)), now, &config),
                now < cut,
                "at {now}: a new write is let out exactly while one in flight may go on"
            );
        }
        // And the cut-off comes before a rival may take over (the margin of §1).
        let rival_view = seen(record(Some("leader"), 0, 0), 0);
        assert!(matches!(
            decide("rival", Some(&rival_view), cut, &config),
            Decision::Wait { .. }
        ));
        let far = write_cut_off(Some(Timestamp::MAX), &config);
        assert_eq!(
            far,
            Some(Timestamp::MAX),
            "saturates instead of overflowing"
        );
    }
}
