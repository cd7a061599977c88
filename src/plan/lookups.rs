//! What working a plan's bundle lookups means, lookup by lookup (pure; docs/install-plans.md §9
//! without Jobs): whether a lookup is pulled now (the timing is `plan::unpack`'s), and what a
//! pull's result does to it — its steps join the plan, or its failure is recorded. The shell
//! (`reconcile::install_plan::lookups`) only pulls the images [`LookupsWorked::attempt`] asks
//! for and hands each result to [`LookupsWorked::pulled`].

use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use super::draft::wire_step;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::image_bundle::{
    image_bundle_steps, lookup_catalog, lookup_content, set_lookup_condition,
};
use super::unpack::{
    DEFAULT_FAILED_RETRY, NextAttempt, PullFailure, UnpackAnnotationError, UnpackPolicy,
    lookup_failure, lookup_pending, next_attempt, record_failure,
};
use crate::api::install_plan::bundle_lookup_reason as reason;
use crate::api::{BundleLookup, BundleLookupConditionType, Step};

/// A lookup that newly failed while its bundle was worked on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupFailure {
    /// The bundle (CSV) name.
    pub bundle: String,
    /// One of the `bundle_lookup_reason`s.
    pub reason: &'static str,
    pub message: String,
}

/// What working the bundle lookups of a plan did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LookupsWorked {
    /// The lookups still to pull, with their conditions brought up to date.
    pub remaining: Vec<BundleLookup>,
    /// The steps of the bundles pulled, to append to the plan.
    pub steps: Vec<Step>,
    /// The catalogs those bundles came from.
    pub catalog_sources: Vec<String>,
    /// Lookups whose failure was just recorded.
    pub failures: Vec<LookupFailure>,
    /// Bundles whose steps were added.
    pub pulled: Vec<String>,
    /// When to look again (a lookup still pending or failed).
    pub requeue: Option<Duration>,
    /// Lookups that just went to an unpack pod: (bundle, why, in the condition's words).
    pub to_pod: Vec<(String, String)>,
    /// Bundles among [`Self::pulled`] an unpack pod handed back: (bundle, how).
    pub unpacked_by_pod: Vec<(String, String)>,
}

/// How often a lookup an unpack pod works on is looked at (the pod is not watched).
pub const POD_POLL: Duration = Duration::from_secs(3);

/// Whether a lookup is being unpacked by a pod (its pending condition says `JobIncomplete`,
/// OLM's reason for an unpack Job not yet done).
pub fn in_pod(lookup: &BundleLookup) -> bool {
    lookup_pending(lookup)
        && lookup.conditions.iter().flatten().any(|c| {
            c.type_ == BundleLookupConditionType::BundleLookupPending
                && c.reason.as_deref() == Some(reason::JOB_INCOMPLETE)
        })
}

/// Whether the node may pull an image the controller failed to pull with `failure`: the
/// registry could not be reached or resolved (TLS refused included) or refused the
/// controller's logins — the kubelet pulls through the node's mirrors, resolver, trust store
/// and credentials. A missing image, bad content, a block or a policy refusal would be no
/// different on the node (or must not be gone around).
pub fn node_may_pull(failure: &PullFailure) -> bool {
    matches!(
        failure.reason,
        reason::REGISTRY_UNREACHABLE | reason::UNAUTHORIZED
    )
}

/// A lookup whose image is to be pulled now.
#[derive(Debug, Clone, PartialEq)]
pub struct Pull {
    pub lookup: BundleLookup,
    /// Give up after this long (`None`: no deadline).
    pub within: Option<Duration>,
    pub policy: UnpackPolicy,
}

/// A bundle image as pulled: its manifests and the digest it was pulled at.
#[derive(Debug, Clone, PartialEq)]
pub struct PulledContent {
    pub manifests: Vec<Value>,
    pub digest: String,
}

impl LookupsWorked {
    /// Whether `lookup` is pulled now (`Some`), or waits (`None`) — it is then recorded as
    /// remaining, with the failure it met when it just passed its deadline. A namespace whose
    /// unpack policy cannot be read fails every lookup in OLM's words.
    pub fn attempt(
        &mut self,
        mut lookup: BundleLookup,
        policy: &Result<UnpackPolicy, UnpackAnnotationError>,
        now: Timestamp,
    ) -> Option<Pull> {
        let policy = match policy {
            Ok(policy) => policy,
            Err(unreadable) => {
                let failure = PullFailure {
                    reason: reason::PULL_FAILED,
                    message: unreadable.to_string(),
                    transient: false,
                };
                let fallback = UnpackPolicy {
                    timeout: None,
                    failed_retry: DEFAULT_FAILED_RETRY,
                };
                self.failed(lookup, &failure, &fallback, now);
                return None;
            }
        };
        match next_attempt(&mut lookup, policy, now) {
            (NextAttempt::PullNow { within }, _) => Some(Pull {
                lookup,
                within,
                policy: *policy,
            }),
            (NextAttempt::Wait(after), changed) => {
                // Changed while waiting: it has just passed its deadline.
                if changed && let Some((_, message)) = lookup_failure(&lookup) {
                    self.failures.push(LookupFailure {
                        bundle: lookup.identifier.clone(),
                        reason: reason::DEADLINE_EXCEEDED,
                        message: message.to_owned(),
                    });
                }
                self.wait(after);
                self.remaining.push(lookup);
                None
            }
        }
    }

    /// Records a pull for a plan in `namespace`: the bundle's steps when its content can be
    /// planned and is the CSV the catalog named, else the failure. Nothing from a bundle that
    /// did not pull completely reaches the plan.
    pub fn pulled(
        &mut self,
        pull: Pull,
        pulled: Result<PulledContent, PullFailure>,
        namespace: &str,
        now: Timestamp,
    ) {
        let Pull { lookup, policy, .. } = pull;
        let policy = &policy;
        let content = match pulled {
            Ok(content) => content,
            Err(failure) => return self.failed(lookup, &failure, policy, now),
        };
        let catalog = lookup_catalog(&lookup);
        let bundle = lookup_content(&lookup, content.manifests);
        let replaces = Some(lookup.replaces.as_str()).filter(|r| !r.is_empty());
        let planned =
            image_bundle_steps(&bundle, namespace, replaces, &lookup.path, &content.digest);
        let failure = match planned {
            Ok(steps)
                if steps.first().map(|s| s.object.name.as_str())
                    == Some(lookup.identifier.as_str()) =>
            {
                self.steps.extend(steps.iter().map(wire_step));
                if !self.catalog_sources.contains(&catalog.name) {
                    self.catalog_sources.push(catalog.name.clone());
                }
                self.pulled.push(lookup.identifier);
                return;
            }
            Ok(steps) => PullFailure {
                reason: reason::INVALID_BUNDLE_CONTENT,
                message: format!(
                    "bundle image {} holds the ClusterServiceVersion {}, but catalog {catalog} lists it as {}",
                    lookup.path,
                    steps
                        .first()
                        .map(|s| s.object.name.as_str())
                        .unwrap_or_default(),
                    lookup.identifier
                ),
                transient: false,
            },
            Err(error) => PullFailure {
                reason: reason::INVALID_BUNDLE_CONTENT,
                message: format!("bundle image {}: {error}", lookup.path),
                transient: false,
            },
        };
        self.failed(lookup, &failure, policy, now);
    }

    /// Records that an unpack pod works on `pull`'s bundle: its pending condition says
    /// `JobIncomplete` with `message` (which mode, why, and what the pod waits for); it is
    /// looked at again after [`POD_POLL`]. The unpack deadline still counts from the first
    /// attempt.
    pub fn unpacking_in_pod(&mut self, pull: Pull, message: &str, now: Timestamp) {
        let Pull { mut lookup, .. } = pull;
        let entering = !in_pod(&lookup);
        set_lookup_condition(
            &mut lookup,
            BundleLookupConditionType::BundleLookupPending,
            reason::JOB_INCOMPLETE,
            message,
            &Time(now),
        );
        if entering {
            self.to_pod
                .push((lookup.identifier.clone(), message.to_owned()));
        }
        self.wait(POD_POLL);
        self.remaining.push(lookup);
    }

    /// Records a bundle an unpack pod handed back (`how` says which pod and why), as
    /// [`Self::pulled`] does a pull.
    pub fn pulled_by_pod(
        &mut self,
        pull: Pull,
        content: PulledContent,
        how: &str,
        namespace: &str,
        now: Timestamp,
    ) {
        let bundle = pull.lookup.identifier.clone();
        self.pulled(pull, Ok(content), namespace, now);
        if self.pulled.last() == Some(&bundle) {
            self.unpacked_by_pod.push((bundle, how.to_owned()));
        }
    }

    /// Records `failure` on `lookup` (an event when it is news and not a transient one).
    fn failed(
        &mut self,
        mut lookup: BundleLookup,
        failure: &PullFailure,
        policy: &UnpackPolicy,
        now: Timestamp,
    ) {
        let (after, changed) = record_failure(&mut lookup, failure, policy, now);
        if changed && !failure.transient {
            self.failures.push(LookupFailure {
                bundle: lookup.identifier.clone(),
                reason: failure.reason,
                message: failure.message.clone(),
            });
        }
        self.wait(after);
        self.remaining.push(lookup);
    }

    fn wait(&mut self, after: Duration) {
        self.requeue = Some(self.requeue.map_or(after, |r| r.min(after)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CatalogRef;
    use crate::plan::image_bundle::bundle_lookup;
    use serde_json::json;

    const START: i64 = 1_800_000_000;

    fn t(second: i64) -> Timestamp {
        Timestamp::from_second(START + second).unwrap()
    }

    fn lookup() -> BundleLookup {
        bundle_lookup(
            "op.v2",
            "quay.io/example/op:v2",
            &CatalogRef::new("olm", "cat"),
            None,
            &[],
            &Time(t(0)),
        )
    }

    const POLICY: UnpackPolicy = UnpackPolicy {
        timeout: Some(Duration::from_secs(120)),
        failed_retry: Duration::from_secs(30),
    };

    fn csv(name: &str) -> Value {
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
               "metadata": {"name": name},
               "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}}})
    }

    fn content(manifests: Vec<Value>) -> Result<PulledContent, PullFailure> {
        Ok(PulledContent {
            manifests,
            digest: "sha256:0123".into(),
        })
    }

    fn failure(reason: &'static str, transient: bool) -> Result<PulledContent, PullFailure> {
        Err(PullFailure {
            reason,
            message: "quay.io/example/op:v2: it went wrong".into(),
            transient,
        })
    }

    /// Whether a lookup is pulled now: (case, lookup, policy, seconds since it started, pulled
    /// within, failure reason recorded, requeue).
    #[test]
    fn when_a_lookup_is_pulled() {
        let mut failed_now = lookup();
        record_failure(
            &mut failed_now,
            &PullFailure {
                reason: reason::IMAGE_NOT_FOUND,
                message: "gone".into(),
                transient: false,
            },
            &POLICY,
            t(10),
        );
        let bad_policy: Result<UnpackPolicy, UnpackAnnotationError> = Err(UnpackAnnotationError {
            what: "unpack timeout",
            key: "operatorframework.io/bundle-unpack-timeout",
            value: "soon".into(),
            source: crate::go_duration::DurationError::Invalid {
                text: "soon".into(),
            },
        });
        type Case<'a> = (
            &'a str,
            BundleLookup,
            &'a Result<UnpackPolicy, UnpackAnnotationError>,
            i64,
            Option<Option<Duration>>,
            Option<&'static str>,
            Option<Duration>,
        );
        let ok = Ok(POLICY);
        let cases: Vec<Case> = vec![
            (
                "new: pulled within the timeout",
                lookup(),
                &ok,
                0,
                Some(Some(Duration::from_secs(120))),
                None,
                None,
            ),
            (
                "pending for a while: pulled within what is left",
                lookup(),
                &ok,
                100,
                Some(Some(Duration::from_secs(20))),
                None,
                None,
            ),
            (
                "past its deadline: fails, retried after the interval",
                lookup(),
                &ok,
                120,
                None,
                Some(reason::DEADLINE_EXCEEDED),
                Some(Duration::from_secs(30)),
            ),
            (
                "failed a moment ago: waits, says nothing new",
                failed_now.clone(),
                &ok,
                20,
                None,
                None,
                Some(Duration::from_secs(20)),
            ),
            (
                "failed long enough ago: pulled again",
                failed_now,
                &ok,
                40,
                Some(Some(Duration::from_secs(120))),
                None,
                None,
            ),
            (
                "unreadable policy: fails in OLM's words",
                lookup(),
                &bad_policy,
                0,
                None,
                Some(reason::PULL_FAILED),
                Some(DEFAULT_FAILED_RETRY),
            ),
        ];
        for (case, lookup, policy, at, pulled_within, failed, requeue) in cases {
            let mut worked = LookupsWorked::default();
            let pull = worked.attempt(lookup, policy, t(at));
            assert_eq!(pull.as_ref().map(|p| p.within), pulled_within, "{case}");
            assert_eq!(worked.failures.first().map(|f| f.reason), failed, "{case}");
            assert_eq!(worked.requeue, requeue, "{case}");
            assert_eq!(
                worked.remaining.len(),
                usize::from(pull.is_none()),
                "{case}"
            );
        }
    }

    /// What a pull's result does: (case, result, steps added, failure reason, still pending).
    #[test]
    fn what_a_pull_brings() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                         "metadata": {"name": "widgets.example.com"}});
        type Case = (
            &'static str,
            Result<PulledContent, PullFailure>,
            usize,
            Option<&'static str>,
            bool,
        );
        let cases: Vec<Case> = vec![
            (
                "the bundle the catalog named",
                content(vec![crd.clone(), csv("op.v2")]),
                2,
                None,
                false,
            ),
            (
                "another CSV than the catalog named",
                content(vec![csv("op.v3")]),
                0,
                Some(reason::INVALID_BUNDLE_CONTENT),
                false,
            ),
            (
                "no CSV at all",
                content(vec![crd]),
                0,
                Some(reason::INVALID_BUNDLE_CONTENT),
                false,
            ),
            (
                "registry down: retried quietly",
                failure(reason::REGISTRY_UNREACHABLE, true),
                0,
                None,
                true,
            ),
            (
                "image gone: failed",
                failure(reason::IMAGE_NOT_FOUND, false),
                0,
                Some(reason::IMAGE_NOT_FOUND),
                false,
            ),
        ];
        for (case, result, steps, failed, pending) in cases {
            let mut worked = LookupsWorked::default();
            let pull = worked.attempt(lookup(), &Ok(POLICY), t(1)).expect(case);
            worked.pulled(pull, result, "ns", t(5));
            assert_eq!(worked.steps.len(), steps, "{case}");
            assert_eq!(worked.failures.first().map(|f| f.reason), failed, "{case}");
            if steps > 0 {
                assert_eq!(worked.pulled, ["op.v2"], "{case}");
                assert_eq!(worked.catalog_sources, ["cat"], "{case}");
                assert!(worked.remaining.is_empty(), "{case}");
                assert_eq!(worked.requeue, None, "{case}");
            } else {
                assert!(worked.pulled.is_empty(), "{case}");
                assert_eq!(worked.remaining.len(), 1, "{case}");
                assert_eq!(lookup_pending(&worked.remaining[0]), pending, "{case}");
                assert!(worked.requeue.is_some(), "{case}");
            }
        }
        let mut worked = LookupsWorked::default();
        let pull = worked.attempt(lookup(), &Ok(POLICY), t(1)).unwrap();
        worked.pulled(pull, content(vec![csv("op.v3")]), "ns", t(5));
        assert_eq!(
            worked.failures[0].message,
            "bundle image quay.io/example/op:v2 holds the ClusterServiceVersion op.v3, but catalog olm/cat lists it as op.v2"
        );
    }

    /// Which failures of the controller's own pull go to an unpack pod: (reason, transient,
    /// to a pod).
    #[test]
    fn only_what_the_node_may_pull_goes_to_a_pod() {
        let table = [
            (reason::REGISTRY_UNREACHABLE, true, true),
            (reason::UNAUTHORIZED, false, true),
            (reason::IMAGE_NOT_FOUND, false, false),
            (reason::INVALID_BUNDLE_CONTENT, false, false),
            (reason::IMAGE_BLOCKED, false, false),
            (reason::IMAGE_POLICY_REFUSED, false, false),
            (reason::DEADLINE_EXCEEDED, true, false),
            (reason::PULL_FAILED, false, false),
        ];
        for (why, transient, to_pod) in table {
            let failure = PullFailure {
                reason: why,
                message: String::new(),
                transient,
            };
            assert_eq!(node_may_pull(&failure), to_pod, "{why}");
        }
    }

    #[test]
    fn a_lookup_in_a_pod_says_so_once_keeps_its_deadline_and_ends_with_the_pods_bundle() {
        let mut worked = LookupsWorked::default();
        let pull = worked.attempt(lookup(), &Ok(POLICY), t(1)).unwrap();
        assert!(!in_pod(&pull.lookup));
        worked.unpacking_in_pod(
            pull,
            "unpack job not completed: olm-rs could not pull it",
            t(2),
        );
        assert_eq!(worked.to_pod.len(), 1, "an event when it goes to the pod");
        assert_eq!(worked.requeue, Some(POD_POLL));
        let waiting = worked.remaining.pop().unwrap();
        assert!(in_pod(&waiting));
        let condition = &waiting.conditions.as_ref().unwrap()[0];
        assert_eq!(condition.reason.as_deref(), Some(reason::JOB_INCOMPLETE));
        assert_eq!(
            condition.last_transition_time.as_ref().map(|t| t.0),
            Some(t(0)),
            "the unpack deadline counts from the first attempt"
        );

        // Next sync: still in the pod, nothing new to say; then past the deadline it fails.
        let mut worked = LookupsWorked::default();
        let pull = worked.attempt(waiting.clone(), &Ok(POLICY), t(60)).unwrap();
        assert_eq!(pull.within, Some(Duration::from_secs(60)));
        worked.unpacking_in_pod(pull, "unpack job not completed: still pulling", t(60));
        assert!(worked.to_pod.is_empty());
        let mut worked = LookupsWorked::default();
        assert!(
            worked
                .attempt(waiting.clone(), &Ok(POLICY), t(120))
                .is_none()
        );
        assert_eq!(worked.failures[0].reason, reason::DEADLINE_EXCEEDED);

        // The pod handed the bundle back: its steps join the plan, and how is said.
        let mut worked = LookupsWorked::default();
        let pull = worked.attempt(waiting, &Ok(POLICY), t(30)).unwrap();
        let content = PulledContent {
            manifests: vec![csv("op.v2")],
            digest: "sha256:0123".into(),
        };
        worked.pulled_by_pod(pull, content, "unpacked in pod olm/x", "ns", t(31));
        assert_eq!(worked.pulled, ["op.v2"]);
        assert_eq!(
            worked.unpacked_by_pod,
            [("op.v2".to_owned(), "unpacked in pod olm/x".to_owned())]
        );
        assert!(worked.remaining.is_empty());
    }
}
