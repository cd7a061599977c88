//! The shell of leader election: reads and writes the Lease, sleeps between attempts, and runs
//! the controller's work only while it holds the Lease.
//!
//! Writes are plain updates guarded by `resourceVersion` (not server-side apply): when two
//! candidates race for an expired Lease, the API server lets exactly one write win and answers
//! 409 to the other.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::Api;

use super::decision::{self, Claim, Decision, LeaseConfig, LeaseRecord, Observation};
use super::fence::Fence;
use crate::k8s::clock::Clock;
use crate::k8s::errors::is_conflict;
use crate::metrics::Metrics;

/// Which Lease to hold, and who we are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseLock {
    pub namespace: String,
    pub name: String,
    /// Unique per process (the pod name in a cluster).
    pub identity: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderElectionError {
    #[error("leader election: cannot read Lease {namespace}/{name}: {source}")]
    Read {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("leader election: cannot write Lease {namespace}/{name}: {source}")]
    Write {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("leader election: lost Lease {namespace}/{name}: {why}")]
    Lost {
        namespace: String,
        name: String,
        why: String,
    },
}

/// The result of one attempt to acquire or renew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// We hold the Lease (just created, acquired, taken over or renewed).
    Leading,
    /// Someone else holds a valid Lease.
    HeldBy(String),
    /// Another candidate wrote the Lease between our read and our write; try again later.
    Raced,
}

pub struct LeaderElector {
    api: Api<Lease>,
    lock: LeaseLock,
    config: LeaseConfig,
    clock: Arc<dyn Clock>,
    metrics: Option<Arc<Metrics>>,
    /// Told of every renewal and every loss, so writers stop at the renew deadline.
    fence: Option<Fence>,
    observed: Option<Observation>,
    /// When our last successful write started; `None` while not leading.
    last_renewed: Option<Timestamp>,
}

impl LeaderElector {
    /// `config` must be valid (`LeaseConfig::validate`); the CLI checks it before building one.
    pub fn new(
        client: Client,
        lock: LeaseLock,
        config: LeaseConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            api: Api::namespaced(client, &lock.namespace),
            lock,
            config,
            clock,
            metrics: None,
            fence: None,
            observed: None,
            last_renewed: None,
        }
    }

    /// Reports leadership as `leader_election_master_status{name}`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        metrics.set_leader(&self.lock.name, false);
        self.metrics = Some(metrics);
        self
    }

    /// Keeps `fence` open exactly while this candidate may act (docs/leader-election.md §2).
    pub fn with_fence(mut self, fence: Fence) -> Self {
        fence.renewed(self.last_renewed);
        self.fence = Some(fence);
        self
    }

    pub fn lock(&self) -> &LeaseLock {
        &self.lock
    }

    /// Whether this candidate may act now: it holds the Lease and its last renewal is younger
    /// than the renew deadline.
    pub fn is_leader(&self) -> bool {
        self.last_renewed
            .is_some_and(|at| !decision::must_step_down(at, self.clock.now(), &self.config))
    }

    /// One attempt: read the Lease, decide (pure), write if the decision says so.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Attempt, LeaderElectionError> {
        let now = self.clock.now();
        let current = self.api.get_opt(&self.lock.name).await.map_err(|source| {
            LeaderElectionError::Read {
                namespace: self.lock.namespace.clone(),
                name: self.lock.name.clone(),
                source,
            }
        })?;
        let resource_version = current
            .as_ref()
            .and_then(|lease| lease.metadata.resource_version.clone());
        self.observed = current
            .as_ref()
            .map(|lease| decision::observe(self.observed.as_ref(), record_of(lease), now));

        let written = match decision::decide(
            &self.lock.identity,
            self.observed.as_ref(),
            now,
            &self.config,
        ) {
            Decision::Wait { holder, .. } => {
                self.set_leading(None);
                return Ok(Attempt::HeldBy(holder));
            }
            Decision::Create(record) => {
                let lease = self.lease(record, None);
                self.api.create(&crate::k8s::post_params(), &lease).await
            }
            Decision::Write { record, claim } => {
                if claim != Claim::Renew {
                    tracing::info!(
                        lease = %self.lock.name,
                        namespace = %self.lock.namespace,
                        identity = %self.lock.identity,
                        ?claim,
                        "attempting to acquire the leader Lease"
                    );
                }
                let lease = self.lease(record, resource_version);
                self.api
                    .replace(&self.lock.name, &crate::k8s::post_params(), &lease)
                    .await
            }
        };
        match written {
            Ok(lease) => {
                self.observed = Some(decision::observe(None, record_of(&lease), now));
                self.set_leading(Some(now));
                Ok(Attempt::Leading)
            }
            // 409: a stale resourceVersion on update, or AlreadyExists on create.
            Err(err) if is_conflict(&err) => {
                self.observed = None;
                self.set_leading(None);
                Ok(Attempt::Raced)
            }
            Err(source) => Err(LeaderElectionError::Write {
                namespace: self.lock.namespace.clone(),
                name: self.lock.name.clone(),
                source,
            }),
        }
    }

    /// Hands the Lease back (a clean shutdown), so a standby takes over at its next retry
    /// instead of waiting for the Lease to expire. Does nothing if we do not hold it.
    pub async fn release(&mut self) -> Result<(), LeaderElectionError> {
        let read_error = |source| LeaderElectionError::Read {
            namespace: self.lock.namespace.clone(),
            name: self.lock.name.clone(),
            source,
        };
        let current = self
            .api
            .get_opt(&self.lock.name)
            .await
            .map_err(read_error)?;
        self.set_leading(None);
        let Some(current) = current else {
            return Ok(());
        };
        let Some(record) =
            decision::release(&self.lock.identity, &record_of(&current), self.clock.now())
        else {
            return Ok(());
        };
        let lease = self.lease(record, current.metadata.resource_version.clone());
        self.api
            .replace(&self.lock.name, &crate::k8s::post_params(), &lease)
            .await
            .map_err(|source| LeaderElectionError::Write {
                namespace: self.lock.namespace.clone(),
                name: self.lock.name.clone(),
                source,
            })?;
        tracing::info!(lease = %self.lock.name, identity = %self.lock.identity, "released the leader Lease");
        Ok(())
    }

    /// Retries every retry period (with client-go's jitter) until this candidate leads.
    pub async fn acquire(&mut self) {
        let mut last_holder = None;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Leading) => {
                    tracing::info!(
                        lease = %self.lock.name,
                        namespace = %self.lock.namespace,
                        identity = %self.lock.identity,
                        "became the leader"
                    );
                    return;
                }
                Ok(Attempt::HeldBy(holder)) => {
                    if last_holder.as_ref() != Some(&holder) {
                        tracing::info!(lease = %self.lock.name, %holder, "standing by: another replica leads");
                        last_holder = Some(holder);
                    }
                }
                Ok(Attempt::Raced) => {}
                Err(err) => tracing::warn!(%err, "leader election attempt failed; retrying"),
            }
            tokio::time::sleep(jittered(self.config.retry_period)).await;
        }
    }

    /// Renews every retry period while leading; returns why leadership ended: another holder
    /// took the Lease, or no renewal succeeded within the renew deadline.
    pub async fn keep_renewing(&mut self) -> LeaderElectionError {
        loop {
            tokio::time::sleep(to_std(self.config.retry_period)).await;
            let Some(last) = self.last_renewed else {
                return self.lost("not leading".to_owned());
            };
            let deadline = last
                .checked_add(self.config.renew_deadline)
                .unwrap_or(Timestamp::MAX);
            let left = deadline.duration_since(self.clock.now());
            let why = match tokio::time::timeout(to_std(left), self.try_acquire_or_renew()).await {
                Ok(Ok(Attempt::Leading)) => continue,
                Ok(Ok(Attempt::HeldBy(holder))) => {
                    return self.lost(format!("{holder} holds it now"));
                }
                Ok(Ok(Attempt::Raced)) => "another replica wrote it".to_owned(),
                Ok(Err(err)) => err.to_string(),
                Err(_elapsed) => "renewal timed out".to_owned(),
            };
            tracing::warn!(lease = %self.lock.name, %why, "could not renew the leader Lease");
            if decision::must_step_down(last, self.clock.now(), &self.config) {
                return self.lost(format!(
                    "no renewal succeeded within the renew deadline ({:#}); last error: {why}",
                    self.config.renew_deadline
                ));
            }
        }
    }

    /// Waits for leadership, then runs `work` while renewing. Returns `Ok` when `shutdown`
    /// resolves or `work` ends (releasing the Lease), and `Err(Lost)` when leadership is lost:
    /// `work` is dropped at once and the caller must stop acting (the process exits non-zero
    /// and the kubelet restarts it, as with client-go).
    pub async fn run(
        mut self,
        work: impl Future<Output = ()>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), LeaderElectionError> {
        tokio::pin!(shutdown);
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            () = self.acquire() => {}
        }
        let outcome = tokio::select! {
            () = &mut shutdown => Ok(()),
            () = work => Ok(()),
            lost = self.keep_renewing() => Err(lost),
        };
        if outcome.is_ok()
            && let Err(err) = self.release().await
        {
            tracing::warn!(%err, "could not release the leader Lease; it expires on its own");
        }
        outcome
    }

    fn lost(&mut self, why: String) -> LeaderElectionError {
        self.set_leading(None);
        // The fence's tally, told once as leadership ends: the evidence that a partitioned
        // leader stopped writing on its own (docs/leader-election.md §2.1).
        if let Some(fence) = &self.fence {
            tracing::warn!(
                lease = %self.lock.name,
                %why,
                writes_refused = fence.refused(),
                writes_cut_off = fence.cut_off(),
                "leadership lost; every write is fenced until this replica leads again"
            );
        }
        LeaderElectionError::Lost {
            namespace: self.lock.namespace.clone(),
            name: self.lock.name.clone(),
            why,
        }
    }

    fn set_leading(&mut self, renewed_at: Option<Timestamp>) {
        self.last_renewed = renewed_at;
        if let Some(fence) = &self.fence {
            fence.renewed(renewed_at);
        }
        if let Some(metrics) = &self.metrics {
            metrics.set_leader(&self.lock.name, renewed_at.is_some());
        }
    }

    fn lease(&self, record: LeaseRecord, resource_version: Option<String>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.lock.name.clone()),
                namespace: Some(self.lock.namespace.clone()),
                resource_version,
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                // client-go writes "" for "nobody"; keep that wire form.
                holder_identity: Some(record.holder.unwrap_or_default()),
                lease_duration_seconds: Some(whole_seconds(record.lease_duration)),
                acquire_time: record.acquire_time.map(MicroTime),
                renew_time: record.renew_time.map(MicroTime),
                lease_transitions: Some(record.transitions),
                ..LeaseSpec::default()
            }),
        }
    }
}

/// The election fields of a Lease as the pure rules see them.
pub fn record_of(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseRecord {
        holder: spec.holder_identity.filter(|h| !h.is_empty()),
        lease_duration: SignedDuration::from_secs(spec.lease_duration_seconds.unwrap_or(0).into()),
        acquire_time: spec.acquire_time.map(|t| t.0),
        renew_time: spec.renew_time.map(|t| t.0),
        transitions: spec.lease_transitions.unwrap_or(0),
    }
}

/// A unique identity for this process: the pod name when running in a cluster (set by the
/// chart from the downward API), else the host name plus a random suffix, as client-go does.
pub fn default_identity() -> String {
    if let Ok(pod) = std::env::var("POD_NAME")
        && !pod.is_empty()
    {
        return pod;
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "olm-rs".to_owned());
    format!("{host}_{:08x}", rand::random::<u32>())
}

/// Lease durations are whole seconds on the wire; round up so a Lease never lives shorter than
/// configured.
fn whole_seconds(duration: SignedDuration) -> i32 {
    let secs = duration.as_secs() + i64::from(duration.subsec_nanos() > 0);
    i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
}

fn to_std(duration: SignedDuration) -> Duration {
    // Negative durations (a deadline already past) mean "no time left".
    Duration::try_from(duration).unwrap_or(Duration::ZERO)
}

/// client-go's `wait.Jitter(period, 1.2)`: up to 20% longer, so candidates do not retry in
/// lockstep.
fn jittered(period: SignedDuration) -> Duration {
    let factor = 1.0 + (decision::JITTER_FACTOR - 1.0) * rand::random::<f64>();
    to_std(period).mul_f64(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_seconds_round_up_and_stay_positive() {
        assert_eq!(whole_seconds(SignedDuration::from_secs(15)), 15);
        assert_eq!(whole_seconds(SignedDuration::from_millis(1500)), 2);
        assert_eq!(whole_seconds(SignedDuration::from_millis(10)), 1);
        assert_eq!(whole_seconds(SignedDuration::ZERO), 1);
    }

    #[test]
    fn an_empty_holder_on_the_wire_means_nobody() {
        let lease = Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(String::new()),
                lease_duration_seconds: Some(1),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        let record = record_of(&lease);
        assert_eq!(record.holder, None);
        assert_eq!(record.lease_duration, SignedDuration::from_secs(1));
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        for _ in 0..100 {
            let d = jittered(SignedDuration::from_secs(2));
            assert!(
                d >= Duration::from_secs(2) && d <= Duration::from_millis(2400),
                "{d:?}"
            );
        }
    }
}
