//! `olm-rs takeover --dry-run` (docs/migrating-from-olm.md §2): the controller runs against the
//! cluster as it is, every write it sends goes out with `dryRun=All` — the API server validates
//! it, admits it and answers with the object it would store, and stores nothing — and each
//! answer is compared with the object as it is. This module is the pure part: which requests are
//! writes, the request as sent, and what a write would change.

use std::collections::BTreeMap;

use serde_json::Value;

/// Requests that create a review (an access check), not an object: sent as they are, and not
/// reported (they change nothing, and not every API server accepts `dryRun` on them).
const REVIEWS: [&str; 4] = [
    "selfsubjectaccessreviews",
    "subjectaccessreviews",
    "selfsubjectrulesreviews",
    "tokenreviews",
];

/// What a request path names: `/api/v1/namespaces/ns/pods/name/status`,
/// `/apis/apps/v1/deployments`, ...
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    /// `group/version`, or `version` for the core group.
    pub api_version: String,
    pub resource: String,
    pub namespace: Option<String>,
    /// `None` for a collection (a create).
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Target {
    /// Parses a request path; `None` for anything that is not a resource path.
    pub fn parse(path: &str) -> Option<Self> {
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (api_version, rest) = match parts.as_slice() {
            ["api", version, rest @ ..] => ((*version).to_owned(), rest),
            ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, resource, rest @ ..] => (Some((*ns).to_owned()), {
                let mut all = vec![*resource];
                all.extend_from_slice(rest);
                all
            }),
            other => (None, other.to_vec()),
        };
        let mut rest = rest.into_iter();
        let resource = rest.next()?.to_owned();
        Some(Self {
            api_version,
            resource,
            namespace,
            name: rest.next().map(str::to_owned),
            subresource: rest.next().map(str::to_owned),
        })
    }

    /// The path of the object itself (no subresource), for reading it as it is.
    pub fn object_path(&self, name: &str) -> String {
        let prefix = if self.api_version.contains('/') {
            format!("/apis/{}", self.api_version)
        } else {
            format!("/api/{}", self.api_version)
        };
        match &self.namespace {
            Some(ns) => format!("{prefix}/namespaces/{ns}/{}/{name}", self.resource),
            None => format!("{prefix}/{}/{name}", self.resource),
        }
    }
}

/// Whether a request with `method` to `path` is a write to send with `dryRun=All`.
pub fn is_write(method: &str, path: &str) -> bool {
    if matches!(method, "GET" | "HEAD" | "OPTIONS") {
        return false;
    }
    Target::parse(path).is_none_or(|t| !REVIEWS.contains(&t.resource.as_str()))
}

/// `path_and_query` with `dryRun=All` added.
pub fn with_dry_run(path_and_query: &str) -> String {
    match path_and_query.split_once('?') {
        Some((path, query)) if !query.is_empty() => format!("{path}?{query}&dryRun=All"),
        Some((path, _)) => format!("{path}?dryRun=All"),
        None => format!("{path_and_query}?dryRun=All"),
    }
}

/// One write the controller sent, and the object the API server answered it would store.
#[derive(Debug, Clone)]
pub struct Sent {
    pub method: String,
    pub target: Target,
    pub status: u16,
    /// The answer: the object as it would be stored, or a `Status` when refused.
    pub answer: Value,
}

/// What a write would do to one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// A new object.
    Create,
    Delete,
    /// These JSON pointers would change (`/spec/template/...: old → new`).
    Change(Vec<String>),
    /// Sent, but the object would stay as it is (only `managedFields`, or nothing at all).
    NoChange,
    /// The API server refused it (the status code and message).
    Refused(u16, String),
}

/// The report's line for one object: its kind, name, the verbs sent, how often, and the effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub kind: String,
    pub object: String,
    pub verbs: Vec<String>,
    pub count: usize,
    pub effect: Effect,
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let effect = match &self.effect {
            Effect::Create => "would create".to_owned(),
            Effect::Delete => "would delete".to_owned(),
            Effect::NoChange => "sent, changes nothing".to_owned(),
            Effect::Change(paths) => format!("would change {}", paths.join("; ")),
            Effect::Refused(code, message) => format!("refused ({code}): {message}"),
        };
        write!(
            f,
            "{} {} [{} ×{}]: {effect}",
            self.kind,
            self.object,
            self.verbs.join(","),
            self.count
        )
    }
}

/// The effect of `sent` on `current` (the object as it is; `None` when absent).
pub fn effect(sent: &Sent, current: Option<&Value>) -> Effect {
    if sent.status >= 300 {
        let message = sent.answer["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        return Effect::Refused(sent.status, message);
    }
    if sent.method == "DELETE" {
        return Effect::Delete;
    }
    let Some(current) = current else {
        return Effect::Create;
    };
    let paths = crate::json_diff::paths(&comparable(current), &comparable(&sent.answer));
    if paths.is_empty() {
        Effect::NoChange
    } else {
        Effect::Change(paths)
    }
}

/// An object without what every write moves: `resourceVersion`, `managedFields`, and the
/// `generation` (which follows the spec, already compared). A Secret's values are replaced by
/// their length and a short SHA-256, so the report says which key would change without
/// printing key material.
fn comparable(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["resourceVersion", "managedFields", "generation"] {
            meta.remove(field);
        }
    }
    if object["kind"] == "Secret" {
        for field in ["data", "stringData"] {
            if let Some(values) = object.get_mut(field).and_then(Value::as_object_mut) {
                for value in values.values_mut() {
                    *value = Value::String(fingerprint(value));
                }
            }
        }
    }
    object
}

/// `<n> bytes, sha256 <12 hex>` of a Secret value (as the API server holds it, base64).
fn fingerprint(value: &Value) -> String {
    use sha2::{Digest as _, Sha256};
    let text = value.as_str().unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{} bytes, sha256 {hex}", text.len())
}

/// The report: one line per object, in the order kind, namespace/name; events are counted,
/// not listed.
pub fn report(sent: &[Sent], current: impl Fn(&Target, &str) -> Option<Value>) -> Vec<Line> {
    let mut by_object: BTreeMap<(String, String), Vec<&Sent>> = BTreeMap::new();
    for one in sent {
        let name = one
            .target
            .name
            .clone()
            .or_else(|| one.answer["metadata"]["name"].as_str().map(str::to_owned))
            .unwrap_or_default();
        let object = match &one.target.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name,
        };
        by_object
            .entry((kind_of(one), object))
            .or_default()
            .push(one);
    }
    let mut lines = Vec::new();
    for ((kind, object), all) in by_object {
        let Some(last) = all.last() else { continue };
        let name = object.rsplit('/').next().unwrap_or_default();
        let mut verbs: Vec<String> = all.iter().map(|s| verb(s)).collect();
        verbs.sort();
        verbs.dedup();
        // The last answer is what the controller settles on; compared with the object as it is.
        let effect = effect(last, current(&last.target, name).as_ref());
        lines.push(Line {
            kind,
            object,
            verbs,
            count: all.len(),
            effect,
        });
    }
    lines
}

/// The kind an answer names, else the resource (`deployments`), with the subresource.
fn kind_of(sent: &Sent) -> String {
    let kind = sent.answer["kind"]
        .as_str()
        .filter(|k| *k != "Status")
        .map(str::to_owned)
        .unwrap_or_else(|| sent.target.resource.clone());
    match &sent.target.subresource {
        Some(sub) => format!("{kind}/{sub}"),
        None => kind,
    }
}

fn verb(sent: &Sent) -> String {
    match (sent.method.as_str(), sent.target.name.is_some()) {
        ("POST", false) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        _ => "other",
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn secret_values_are_never_printed() {
        let target = super::Target::parse("/api/v1/namespaces/ns/secrets/op-service-cert").unwrap();
        let secret = |key: &str| {
            json!({"kind": "Secret", "metadata": {"name": "op-service-cert", "namespace": "ns"},
                   "data": {"tls.key": key, "tls.crt": "Y2VydA=="}})
        };
        let sent = super::Sent {
            method: "PATCH".into(),
            target,
            status: 200,
            answer: secret("TkVXLUtFWS1NQVRFUklBTA=="),
        };
        let effect = super::effect(&sent, Some(&secret("T0xELUtFWS1NQVRFUklBTA==")));
        let super::Effect::Change(paths) = effect else {
            panic!("a changed key is a change: {effect:?}");
        };
        assert_eq!(paths.len(), 1, "{paths:?}");
        assert!(
            paths[0].starts_with("/data/tls.key: \"24 bytes, sha256 "),
            "{paths:?}"
        );
        assert!(
            !paths[0].contains("TkVX") && !paths[0].contains("T0xE"),
            "{paths:?}"
        );
    }

    use super::*;

    #[test]
    fn paths_name_the_object_and_the_subresource() {
        let t = Target::parse("/apis/apps/v1/namespaces/ns/deployments/op").unwrap();
        assert_eq!(
            (t.api_version.as_str(), t.resource.as_str()),
            ("apps/v1", "deployments")
        );
        assert_eq!(
            (t.namespace.as_deref(), t.name.as_deref(), t.subresource),
            (Some("ns"), Some("op"), None)
        );
        let t = Target::parse(
            "/apis/operators.coreos.com/v1alpha1/namespaces/ns/clusterserviceversions/a.v1/status",
        )
        .unwrap();
        assert_eq!(t.subresource.as_deref(), Some("status"));
        assert_eq!(
            t.object_path("a.v1"),
            "/apis/operators.coreos.com/v1alpha1/namespaces/ns/clusterserviceversions/a.v1"
        );
        let t = Target::parse("/apis/rbac.authorization.k8s.io/v1/clusterroles/r").unwrap();
        assert_eq!((t.namespace, t.name.as_deref()), (None, Some("r")));
        let t = Target::parse("/api/v1/namespaces/ns/secrets").unwrap();
        assert_eq!((t.resource.as_str(), t.name.as_deref()), ("secrets", None));
        assert_eq!(t.object_path("s"), "/api/v1/namespaces/ns/secrets/s");
        assert_eq!(Target::parse("/version"), None);
    }

    #[test]
    fn writes_go_out_dry_and_reviews_and_reads_as_they_are() {
        assert!(is_write(
            "PATCH",
            "/apis/apps/v1/namespaces/ns/deployments/op"
        ));
        assert!(is_write("DELETE", "/api/v1/namespaces/ns/pods/p"));
        assert!(!is_write("GET", "/api/v1/namespaces/ns/pods"));
        assert!(!is_write(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        ));
        assert_eq!(
            with_dry_run(
                "/apis/apps/v1/namespaces/ns/deployments/op?fieldManager=olm-rs&force=true"
            ),
            "/apis/apps/v1/namespaces/ns/deployments/op?fieldManager=olm-rs&force=true&dryRun=All"
        );
        assert_eq!(
            with_dry_run("/api/v1/namespaces/ns/secrets"),
            "/api/v1/namespaces/ns/secrets?dryRun=All"
        );
    }

    fn sent(method: &str, path: &str, status: u16, answer: Value) -> Sent {
        Sent {
            method: method.to_owned(),
            target: Target::parse(path).unwrap(),
            status,
            answer,
        }
    }

    #[test]
    fn a_write_that_moves_only_managed_fields_changes_nothing() {
        let current = json!({"kind": "ClusterRole", "metadata": {"name": "r",
            "resourceVersion": "1", "managedFields": [{"manager": "olm"}]},
            "rules": [{"verbs": ["get"]}]});
        let mut answer = current.clone();
        answer["metadata"]["resourceVersion"] = json!("2");
        answer["metadata"]["managedFields"] = json!([{"manager": "olm"}, {"manager": "olm-rs"}]);
        let one = sent(
            "PATCH",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/r",
            200,
            answer.clone(),
        );
        assert_eq!(effect(&one, Some(&current)), Effect::NoChange);

        answer["rules"][0]["verbs"] = json!(["get", "list"]);
        let one = sent(
            "PATCH",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/r",
            200,
            answer,
        );
        assert_eq!(
            effect(&one, Some(&current)),
            Effect::Change(vec![
                r#"/rules/0/verbs: 1 → 2 items, dropped [], added ["list"]"#.to_owned()
            ])
        );
    }

    #[test]
    fn the_report_has_one_line_per_object_with_the_last_answer() {
        let csv = |phase: &str| {
            json!({"kind": "ClusterServiceVersion",
                   "metadata": {"name": "a.v1", "namespace": "ns"},
                   "status": {"phase": phase}})
        };
        let path =
            "/apis/operators.coreos.com/v1alpha1/namespaces/ns/clusterserviceversions/a.v1/status";
        let all = vec![
            sent("PUT", path, 200, csv("Pending")),
            sent("PUT", path, 200, csv("Succeeded")),
            sent(
                "POST",
                "/api/v1/namespaces/ns/secrets",
                201,
                json!({"kind": "Secret", "metadata": {"name": "op-service-cert", "namespace": "ns"}}),
            ),
            sent(
                "DELETE",
                "/apis/apps/v1/namespaces/ns/deployments/old",
                200,
                json!({"kind": "Status"}),
            ),
            sent(
                "PATCH",
                "/apis/apps/v1/namespaces/ns/deployments/op",
                422,
                json!({"kind": "Status", "message": "spec.selector: immutable"}),
            ),
        ];
        let lines = report(&all, |target, name| {
            (target.resource == "clusterserviceversions" && name == "a.v1")
                .then(|| csv("Succeeded"))
        });
        let shown: Vec<String> = lines.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "ClusterServiceVersion/status ns/a.v1 [update ×2]: sent, changes nothing",
                "Secret ns/op-service-cert [create ×1]: would create",
                "deployments ns/old [delete ×1]: would delete",
                "deployments ns/op [patch ×1]: refused (422): spec.selector: immutable",
            ]
        );
    }
}
