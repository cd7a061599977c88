//! The operation history, read from the API server's audit log (tests/real_control_plane
//! writes one: every write request at the `Metadata` level — who, which verb, which object,
//! which answer, when). docs/reliability.md §1 names the properties checked here.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use jiff::Timestamp;
use serde_json::Value;

/// The audit log's `user.extra` key naming the Pod a bound service-account token belongs to.
const POD_NAME: &str = "authentication.kubernetes.io/pod-name";

/// One request as the API server recorded it once it answered: a write, a list or a read of
/// a Lease (the harness's audit policy).
#[derive(Debug, Clone)]
pub struct Request {
    pub at: Timestamp,
    pub verb: String,
    pub user: String,
    /// The Pod whose token made the request (controller replicas share one ServiceAccount).
    pub pod: Option<String>,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub code: u16,
}

impl Request {
    /// A request that changes stored state (the log also holds lists and Lease reads).
    pub fn is_write(&self) -> bool {
        !matches!(self.verb.as_str(), "get" | "list" | "watch")
    }

    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// `resource namespace/name` (cluster-scoped: `resource name`).
    pub fn object(&self) -> String {
        object_key(&self.resource, &self.namespace, &self.name)
    }
}

fn object_key(resource: &str, namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        format!("{resource} {name}")
    } else {
        format!("{resource} {namespace}/{name}")
    }
}

/// Every completed request in the audit log at `path`, in the order the API server logged them.
/// Lines the API server cut short when it was killed mid-write are skipped.
pub fn read(path: &Path) -> anyhow::Result<Vec<Request>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.lines().filter_map(parse).collect())
}

/// One audit event, if it is at its `ResponseComplete` stage.
pub fn parse(line: &str) -> Option<Request> {
    let event: Value = serde_json::from_str(line).ok()?;
    if event["stage"] != "ResponseComplete" {
        return None;
    }
    let at = event["requestReceivedTimestamp"]
        .as_str()?
        .parse::<Timestamp>()
        .ok()?;
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let object = &event["objectRef"];
    Some(Request {
        at,
        verb: text(&event["verb"]),
        user: text(&event["user"]["username"]),
        pod: event["user"]["extra"][POD_NAME][0]
            .as_str()
            .map(str::to_owned),
        resource: text(&object["resource"]),
        subresource: text(&object["subresource"]),
        namespace: text(&object["namespace"]),
        name: text(&object["name"]),
        code: u16::try_from(event["responseStatus"]["code"].as_u64()?).ok()?,
    })
}

/// What the history says about one fault run's writes.
#[derive(Debug, Default, Clone)]
pub struct History {
    /// Successful writes of olm-rs in the window.
    pub writes: usize,
    /// Objects olm-rs created more than once (a create after a delete of the same name, or two
    /// successful creates), with the sequence of verbs.
    pub duplicates: Vec<String>,
}

/// Checks the writes `by` (olm-rs's ServiceAccount) between `from` and `to` to objects
/// `in_scope` selects: every object created at most once — no create → delete → create of one
/// name. Status and other subresources are updates, not creates, and are not counted; Events
/// and Leases are not objects of the workload.
pub fn check(
    writes: &[Request],
    by: impl Fn(&Request) -> bool,
    from: Timestamp,
    to: Timestamp,
    in_scope: impl Fn(&Request) -> bool,
) -> History {
    let mut verbs: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut count = 0;
    for w in writes {
        if w.at < from || w.at > to || !w.succeeded() || !by(w) || !in_scope(w) {
            continue;
        }
        if !w.is_write() || stores_nothing(&w.resource) {
            continue;
        }
        count += 1;
        if !w.subresource.is_empty() || matches!(w.resource.as_str(), "events" | "leases") {
            continue;
        }
        if matches!(w.verb.as_str(), "create" | "delete") && !w.name.is_empty() {
            verbs.entry(w.object()).or_default().push(w.verb.as_str());
        }
    }
    let duplicates = verbs
        .into_iter()
        .filter(|(_, seq)| seq.iter().filter(|v| **v == "create").count() > 1)
        .map(|(object, seq)| format!("{object}: {}", seq.join(" → ")))
        .collect();
    History {
        writes: count,
        duplicates,
    }
}

/// The writes the Pod `pod` made at or after `after` that change stored state (reviews do
/// not), other than its own Lease (trying to lead again is how a replica comes back) and its own Pod (the one
/// write a restarted replica makes before it may lead, docs/leader-election.md §2).
pub fn writes_by_pod_after<'a>(
    writes: &'a [Request],
    pod: &str,
    after: Timestamp,
) -> Vec<&'a Request> {
    writes
        .iter()
        .filter(|w| w.pod.as_deref() == Some(pod) && w.at >= after && w.is_write())
        .filter(|w| !(w.resource == "leases" || (w.resource == "pods" && w.name == pod)))
        .filter(|w| !stores_nothing(&w.resource))
        .collect()
}

/// Reviews are `create`s that store nothing (a replica asks what it may do at start-up; the
/// fence lets them through, docs/leader-election.md §2).
fn stores_nothing(resource: &str) -> bool {
    matches!(
        resource,
        "tokenreviews"
            | "subjectaccessreviews"
            | "selfsubjectaccessreviews"
            | "localsubjectaccessreviews"
            | "selfsubjectrulesreviews"
            | "selfsubjectreviews"
    )
}

/// When `pod` last renewed the Lease `lease` successfully (the start of that request: the
/// leader counts its deadline from there, docs/leader-election.md §1), before `before`.
pub fn last_renewal(
    writes: &[Request],
    pod: &str,
    lease: &str,
    before: Timestamp,
) -> Option<Timestamp> {
    writes
        .iter()
        .filter(|w| {
            w.pod.as_deref() == Some(pod)
                && w.resource == "leases"
                && w.name == lease
                && w.verb == "update"
                && w.succeeded()
                && w.at < before
        })
        .map(|w| w.at)
        .max()
}
