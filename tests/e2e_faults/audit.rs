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
    /// The resourceVersion the request's body carries (the harness logs status writes of
    /// OLM's kinds at the `Request` level): the copy a status was computed from.
    pub base: Option<String>,
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
        base: event["requestObject"]["metadata"]["resourceVersion"]
            .as_str()
            .filter(|rv| !rv.is_empty())
            .map(str::to_owned),
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
    /// Status writes of olm-rs to OLM's kinds the API server accepted.
    pub status_writes: usize,
    /// Status writes written backwards (`backwards`).
    pub backwards: Vec<String>,
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
    let status: Vec<&Request> = writes
        .iter()
        .filter(|w| w.at >= from && w.at <= to && by(w) && in_scope(w))
        .filter(|w| is_olm_status_write(w))
        .collect();
    let (status_writes, backwards) = backwards(&status);
    History {
        writes: count,
        duplicates,
        status_writes,
        backwards,
    }
}

/// A status write to one of OLM's kinds (the harness logs their bodies).
fn is_olm_status_write(w: &Request) -> bool {
    w.subresource == "status"
        && matches!(w.verb.as_str(), "update" | "patch")
        && matches!(
            w.resource.as_str(),
            "clusterserviceversions"
                | "installplans"
                | "subscriptions"
                | "catalogsources"
                | "operatorgroups"
                | "operatorconditions"
                | "operators"
                | "olmconfigs"
        )
}

/// Status writes written backwards (docs/reliability.md §1, property 2), among the status
/// writes `writes` in the order the API server logged them: how many it accepted, and each
/// accepted write that
/// - carries no resourceVersion: nothing lets the server refuse it if its copy was stale, so
///   it may overwrite a newer status with an older decision; or
/// - was computed from a copy older than the one the previous accepted status write of the
///   same object was computed from. That write saw the object at a newer version, so this one
///   put a decision made on an older copy over a newer status. (An equal base is no such
///   write: an update that changes nothing leaves the resourceVersion as it was, and the next
///   write at that version is rightly accepted — seen in F7.)
///
/// The API server refuses a write whose resourceVersion is not the object's current one, so
/// with guarded writes the list stays empty; it is the server's word that they were guarded.
pub fn backwards(writes: &[&Request]) -> (usize, Vec<String>) {
    let mut last_base: BTreeMap<String, u64> = BTreeMap::new();
    let mut accepted = 0;
    let mut found = Vec::new();
    for w in writes.iter().filter(|w| w.succeeded()) {
        accepted += 1;
        let object = format!("{} status", w.object());
        let Some(base) = w.base.as_deref() else {
            found.push(format!(
                "{object}: {} at {} without a resourceVersion",
                w.verb, w.at
            ));
            continue;
        };
        let Ok(base) = base.parse::<u64>() else {
            found.push(format!(
                "{object}: resourceVersion {base:?} is not a number"
            ));
            continue;
        };
        if let Some(&previous) = last_base.get(&object)
            && base < previous
        {
            found.push(format!(
                "{object}: {} at {} computed from resourceVersion {base}, after a write computed from {previous}",
                w.verb, w.at
            ));
        }
        last_base.insert(object, base);
    }
    (accepted, found)
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

// The fault suite runs without a test harness: these run in tests/integration (fault_audit).
#[cfg(test)]
#[allow(dead_code)]
mod tests {
    use super::*;

    fn status_write(name: &str, second: i64, base: Option<&str>, code: u16) -> Request {
        Request {
            at: Timestamp::from_second(1_800_000_000 + second).unwrap(),
            verb: "update".into(),
            user: "system:serviceaccount:olm:olm-rs-controller".into(),
            pod: None,
            resource: "installplans".into(),
            subresource: "status".into(),
            namespace: "ns".into(),
            name: name.into(),
            code,
            base: base.map(str::to_owned),
        }
    }

    #[test]
    fn a_status_write_is_backwards_when_unguarded_or_computed_from_an_older_copy() {
        let writes = [
            status_write("a", 0, Some("10"), 200),
            status_write("a", 1, Some("12"), 200),
            // Refused (409): computed from a stale copy, and the server said so.
            status_write("a", 2, Some("11"), 409),
            status_write("b", 3, Some("11"), 200),
            // The write at 12 changed nothing (no new resourceVersion): this one is fine.
            status_write("a", 4, Some("12"), 200),
            status_write("a", 5, Some("11"), 200),
            status_write("a", 6, None, 200),
        ];
        let refs: Vec<&Request> = writes.iter().collect();
        let (accepted, found) = backwards(&refs);
        assert_eq!(accepted, 6);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].contains("computed from resourceVersion 11, after a write computed from 12")
        );
        assert!(found[1].contains("without a resourceVersion"));
    }

    #[test]
    fn the_base_comes_from_the_logged_request_body() {
        let line = r#"{"stage":"ResponseComplete","requestReceivedTimestamp":"2026-11-29T11:00:00.5Z",
            "verb":"update","user":{"username":"u"},"objectRef":{"resource":"installplans",
            "subresource":"status","namespace":"ns","name":"p"},"responseStatus":{"code":200},
            "requestObject":{"metadata":{"name":"p","resourceVersion":"42"}}}"#;
        let request = parse(&line.replace('\n', "")).unwrap();
        assert_eq!(request.base.as_deref(), Some("42"));
        assert!(is_olm_status_write(&request));
    }
}
