//! Which registry pods to keep, delete or create for an image catalog (docs/catalog.md §3.3,
//! §3.4), decided from what is observed. Pure.
//!
//! Where olm-rs departs from OLM, on purpose:
//! - Polling asks the image registry for the tag's digest; a new pod is started only when the
//!   digest differs from the one the serving pod was created with (OLM starts a whole "update
//!   pod" on every poll and compares image IDs afterwards).
//! - A new pod is started *beside* the serving one and the old one is deleted once the new one
//!   is Ready (OLM deletes first: a short outage on every update).

use jiff::{SignedDuration, Timestamp};

/// What the plan needs to know about one live registry pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    pub name: String,
    pub created: Option<Timestamp>,
    /// Images of all containers and init containers, in order.
    pub images: Vec<String>,
    pub spec_hash: Option<String>,
    /// The catalog image digest the pod was created for (olm-rs annotation).
    pub digest: Option<String>,
    /// Condition Ready=True.
    pub ready: bool,
    /// Condition DisruptionTarget=True: being evicted or preempted; OLM force-deletes it.
    pub disrupted: bool,
    /// Phase Failed/Unknown, or a container waiting in CrashLoopBackOff.
    pub failing: bool,
    /// `deletionTimestamp` set: already going away.
    pub deleting: bool,
}

/// What the desired pod looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredPod {
    pub images: Vec<String>,
    pub spec_hash: String,
}

/// The pods of an image catalog as they should be. Every live pod of the catalog not in `keep`
/// goes: the registry decision hands `keep` and the pods found to the owned-set applier
/// (`k8s::owned_set`), which deletes the others as they were observed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodPlan {
    /// Live pods that stay.
    pub keep: Vec<String>,
    /// Of the pods that go, those deleted with grace period 0 (disrupted: OLM force-deletes
    /// them); the others get grace period 1.
    pub force: Vec<String>,
    /// Create a pod, recording this digest (if known).
    pub create: Option<Option<String>>,
    /// No pod is serving the current spec: the registry is being (re)created.
    pub recreating: bool,
    /// Pods for two digests coexist: requeue soon to finish the switch.
    pub rolling: bool,
    /// A newer pod failed to start and was given up (until the next poll).
    pub failed_update: Option<String>,
}

/// Decides the pod changes. `resolved_digest` is the digest the poll just got from the image
/// registry (`None` when no poll ran or it failed). Pods already terminating are left alone.
pub fn plan_pods(pods: &[PodView], desired: &DesiredPod, resolved_digest: Option<&str>) -> PodPlan {
    let mut plan = PodPlan::default();
    // Pods of another spec (stale) are not kept.
    let mut current: Vec<&PodView> = pods
        .iter()
        .filter(|p| {
            !p.deleting
                && p.images == desired.images
                && p.spec_hash.as_deref() == Some(&desired.spec_hash)
        })
        .collect();
    current.retain(|p| {
        if p.disrupted {
            plan.force.push(p.name.clone());
        }
        !p.disrupted
    });
    if current.is_empty() {
        plan.create = Some(resolved_digest.map(str::to_owned));
        plan.recreating = true;
        return plan;
    }

    // Newest first: the newest pod's digest is what is being rolled to.
    current.sort_by(|a, b| b.created.cmp(&a.created).then_with(|| a.name.cmp(&b.name)));
    let names = |pods: &[&PodView]| pods.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
    if let Some(digest) = resolved_digest
        && !current.iter().any(|p| p.digest.as_deref() == Some(digest))
    {
        plan.keep = names(&current);
        plan.create = Some(Some(digest.to_owned()));
        plan.rolling = true;
        return plan;
    }
    let target = resolved_digest
        .map(str::to_owned)
        .or_else(|| current[0].digest.clone());
    let (newest, older): (Vec<&PodView>, Vec<&PodView>) =
        current.iter().partition(|p| p.digest == target);
    if older.is_empty() {
        plan.keep = names(&current);
        return plan;
    }
    if newest.iter().any(|p| p.ready) {
        // The new pod is Ready: only now do the older ones go (docs/catalog.md §3.3).
        plan.keep = names(&newest);
    } else if newest.iter().all(|p| p.failing) {
        // The new pods do not start; the old ones keep serving. Give up until the next poll.
        plan.keep = names(&older);
        plan.failed_update = Some(format!(
            "registry pod {} for image digest {} does not start; keeping the serving pod",
            newest[0].name,
            target.as_deref().unwrap_or("(unknown)")
        ));
    } else {
        plan.keep = names(&current);
        plan.rolling = true;
    }
    plan
}

/// The registry pods serving once a change has fully settled: every pod in the store is live,
/// matches the desired pod, is Ready and was made for one digest. `None` while any other pod
/// still exists, even one terminating: a connection made through the Service then could still
/// reach it and read the old content. Sorted names, to compare with what a connection was last
/// made for.
pub fn settled_pods(pods: &[PodView], desired: &DesiredPod) -> Option<Vec<String>> {
    let first = pods.first()?;
    let settled = pods.iter().all(|p| {
        !p.deleting
            && p.ready
            && p.images == desired.images
            && p.spec_hash.as_deref() == Some(&desired.spec_hash)
            && p.digest == first.digest
    });
    if !settled {
        return None;
    }
    let mut names: Vec<String> = pods.iter().map(|p| p.name.clone()).collect();
    names.sort();
    Some(names)
}

/// Whether pods of more than one kind exist side by side (terminating, of another spec or of
/// another digest): a connection made now may read either.
pub fn mixed_pods(pods: &[PodView], desired: &DesiredPod) -> bool {
    let other_spec = |p: &PodView| {
        p.images != desired.images || p.spec_hash.as_deref() != Some(&desired.spec_hash)
    };
    pods.iter().any(|p| p.deleting || other_spec(p))
        || pods.windows(2).any(|w| w[0].digest != w[1].digest)
}

/// Whether a poll is due: `interval` after the last poll (or the catalog's creation).
pub fn poll_due(
    last_poll: Option<Timestamp>,
    created: Option<Timestamp>,
    interval: std::time::Duration,
    now: Timestamp,
) -> bool {
    until_next_poll(last_poll, created, interval, now).is_zero()
}

/// Time until the next poll is due (zero when due).
pub fn until_next_poll(
    last_poll: Option<Timestamp>,
    created: Option<Timestamp>,
    interval: std::time::Duration,
    now: Timestamp,
) -> std::time::Duration {
    let Some(since) = last_poll.or(created) else {
        return std::time::Duration::ZERO;
    };
    let interval = SignedDuration::try_from(interval).unwrap_or(SignedDuration::MAX);
    let due = since.checked_add(interval).unwrap_or(Timestamp::MAX);
    let left = due.duration_since(now);
    std::time::Duration::try_from(left).unwrap_or(std::time::Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn pod(name: &str, created: &str, digest: Option<&str>, ready: bool) -> PodView {
        PodView {
            name: name.into(),
            created: Some(t(created)),
            images: vec!["quay.io/c:1".into()],
            spec_hash: Some("h1".into()),
            digest: digest.map(Into::into),
            ready,
            disrupted: false,
            failing: false,
            deleting: false,
        }
    }

    fn desired() -> DesiredPod {
        DesiredPod {
            images: vec!["quay.io/c:1".into()],
            spec_hash: "h1".into(),
        }
    }

    /// The live pods the plan does not keep (the owned set deletes them).
    fn gone(pods: &[PodView], plan: &PodPlan) -> Vec<String> {
        pods.iter()
            .filter(|p| !p.deleting && !plan.keep.contains(&p.name))
            .map(|p| p.name.clone())
            .collect()
    }

    #[test]
    fn no_pod_creates_one_with_the_known_digest() {
        let plan = plan_pods(&[], &desired(), Some("sha256:a"));
        assert_eq!(plan.create, Some(Some("sha256:a".into())));
        assert!(plan.recreating);
        let plan = plan_pods(&[], &desired(), None);
        assert_eq!(plan.create, Some(None));
    }

    #[test]
    fn stale_and_disrupted_pods_are_replaced() {
        let mut stale = pod("old", "2026-01-01T00:00:00Z", None, true);
        stale.spec_hash = Some("h0".into());
        let mut disrupted = pod("evicted", "2026-01-01T00:00:00Z", None, true);
        disrupted.disrupted = true;
        let pods = [stale, disrupted];
        let plan = plan_pods(&pods, &desired(), None);
        assert_eq!(gone(&pods, &plan), ["old", "evicted"]);
        assert_eq!(plan.force, ["evicted"]);
        assert_eq!(plan.create, Some(None));
    }

    #[test]
    fn unchanged_digest_changes_nothing() {
        let pods = [pod("p1", "2026-01-01T00:00:00Z", Some("sha256:a"), true)];
        let kept = PodPlan {
            keep: vec!["p1".into()],
            ..PodPlan::default()
        };
        assert_eq!(plan_pods(&pods, &desired(), Some("sha256:a")), kept);
        assert_eq!(plan_pods(&pods, &desired(), None), kept);
    }

    #[test]
    fn changed_digest_starts_a_pod_beside_and_switches_when_ready() {
        let old = pod("p1", "2026-01-01T00:00:00Z", Some("sha256:a"), true);
        let pods = [old.clone()];
        let plan = plan_pods(&pods, &desired(), Some("sha256:b"));
        assert_eq!(plan.create, Some(Some("sha256:b".into())));
        assert!(plan.rolling && gone(&pods, &plan).is_empty() && !plan.recreating);

        let starting = pod("p2", "2026-01-01T01:00:00Z", Some("sha256:b"), false);
        let pods = [old.clone(), starting.clone()];
        let plan = plan_pods(&pods, &desired(), None);
        assert!(plan.rolling);
        assert!(gone(&pods, &plan).is_empty() && plan.create.is_none());

        let ready = PodView {
            ready: true,
            ..starting
        };
        let pods = [old, ready];
        let plan = plan_pods(&pods, &desired(), None);
        assert_eq!(gone(&pods, &plan), ["p1"]);
        assert_eq!(plan.keep, ["p2"]);
        assert!(!plan.rolling);
    }

    #[test]
    fn pod_without_recorded_digest_is_rolled_once() {
        let unknown = pod("p1", "2026-01-01T00:00:00Z", None, true);
        let plan = plan_pods(&[unknown], &desired(), Some("sha256:a"));
        assert_eq!(plan.create, Some(Some("sha256:a".into())));
    }

    #[test]
    fn failing_new_pod_is_given_up_old_keeps_serving() {
        let old = pod("p1", "2026-01-01T00:00:00Z", Some("sha256:a"), true);
        let mut new = pod("p2", "2026-01-01T01:00:00Z", Some("sha256:b"), false);
        new.failing = true;
        let pods = [old, new];
        let plan = plan_pods(&pods, &desired(), None);
        assert_eq!(gone(&pods, &plan), ["p2"]);
        assert!(plan.failed_update.unwrap().contains("sha256:b"));
        // A lone failing pod is left to the kubelet's restarts: deleting it would only churn.
        let mut alone = pod("p3", "2026-01-01T00:00:00Z", Some("sha256:a"), false);
        alone.failing = true;
        let plan = plan_pods(&[alone], &desired(), None);
        assert_eq!(plan.keep, ["p3"]);
        assert!(plan.create.is_none() && plan.failed_update.is_none());
    }

    #[test]
    fn settled_only_when_no_other_pod_is_left_even_terminating() {
        let old = pod("p1", "2026-01-01T00:00:00Z", Some("sha256:a"), true);
        let new = pod("p2", "2026-01-01T01:00:00Z", Some("sha256:b"), true);
        assert_eq!(settled_pods(&[], &desired()), None);
        assert_eq!(
            settled_pods(std::slice::from_ref(&old), &desired()),
            Some(vec!["p1".to_owned()])
        );
        // Two digests side by side: not settled.
        assert_eq!(settled_pods(&[old.clone(), new.clone()], &desired()), None);
        // The old pod deleted but still terminating: still not settled.
        let terminating = PodView {
            deleting: true,
            ..old
        };
        assert_eq!(settled_pods(&[terminating, new.clone()], &desired()), None);
        // A pod not Ready yet, or of another spec: not settled.
        let starting = PodView {
            ready: false,
            ..new.clone()
        };
        assert_eq!(settled_pods(&[starting], &desired()), None);
        let mut stale = new.clone();
        stale.spec_hash = Some("h0".into());
        assert_eq!(settled_pods(&[stale], &desired()), None);
        assert_eq!(
            settled_pods(&[new], &desired()),
            Some(vec!["p2".to_owned()])
        );
    }

    #[test]
    fn pods_are_mixed_while_another_kind_is_left() {
        let old = pod("p1", "2026-01-01T00:00:00Z", Some("sha256:a"), true);
        let new = pod("p2", "2026-01-01T01:00:00Z", Some("sha256:b"), false);
        assert!(!mixed_pods(&[], &desired()));
        // A lone pod starting is not mixed: nothing else could be read.
        assert!(!mixed_pods(std::slice::from_ref(&new), &desired()));
        assert!(mixed_pods(&[old.clone(), new.clone()], &desired()));
        let terminating = PodView {
            deleting: true,
            ..old
        };
        assert!(mixed_pods(&[terminating], &desired()));
        let mut stale = new;
        stale.spec_hash = Some("h0".into());
        assert!(mixed_pods(&[stale], &desired()));
    }

    #[test]
    fn polls_are_due_an_interval_after_the_last_one() {
        let interval = std::time::Duration::from_secs(600);
        let created = Some(t("2026-01-01T00:00:00Z"));
        assert!(!poll_due(
            None,
            created,
            interval,
            t("2026-01-01T00:09:59Z")
        ));
        assert!(poll_due(None, created, interval, t("2026-01-01T00:10:00Z")));
        let last = Some(t("2026-01-01T00:10:00Z"));
        assert!(!poll_due(
            last,
            created,
            interval,
            t("2026-01-01T00:15:00Z")
        ));
        assert_eq!(
            until_next_poll(last, created, interval, t("2026-01-01T00:15:00Z")),
            std::time::Duration::from_secs(300)
        );
        assert!(poll_due(None, None, interval, t("2026-01-01T00:00:00Z")));
    }
}
