//! What a scoped install's account is told when it may not write the plan (docs/install-plans.md
//! §10): OLM's own sentence for the first refused step first — the one scripts and people search
//! for, as OLM writes it when the API server refuses that step — then every right the account
//! lacks, so one grant round is enough.

use std::fmt;

use crate::plan::kinds::StepKind;

/// One write of a step the account was refused, as the access review asked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedWrite {
    pub kind: StepKind,
    /// The step object's name.
    pub name: String,
    /// `create`, or `patch` for a kind that is server-side applied.
    pub verb: String,
    /// The API group, empty for the core group.
    pub group: String,
    pub plural: String,
    /// `None` for a cluster-scoped resource.
    pub namespace: Option<String>,
}

impl RefusedWrite {
    /// `plural.group`, or `plural` for the core group: how the API server names a resource.
    fn resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The API server's Forbidden message for this write made by `user`. A create request
    /// carries no name, so the API server names none; a patch names its object.
    fn api_server_sentence(&self, user: &str) -> String {
        let subject = if self.verb == "create" {
            self.resource()
        } else {
            format!("{} \"{}\"", self.resource(), self.name)
        };
        let scope = match &self.namespace {
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".to_owned(),
        };
        format!(
            "{subject} is forbidden: User \"{user}\" cannot {} resource \"{}\" in API group \"{}\" {scope}",
            self.verb, self.plural, self.group
        )
    }

    /// OLM's words before the API server's when it creates this step's object: each of OLM's
    /// step writers wraps the error its own way (some say "updating" on a create, and not all
    /// put a colon before the name). `None` for a patch, which OLM does as an update with other
    /// words per kind.
    fn olm_wrapper(&self) -> Option<String> {
        if self.verb != "create" {
            return None;
        }
        let name = &self.name;
        Some(match self.kind {
            StepKind::ClusterServiceVersion => format!("error creating csv {name}"),
            StepKind::Subscription => format!("error creating subscription {name}"),
            StepKind::ServiceAccount => format!("error creating service account: {name}"),
            StepKind::Service => format!("error updating service: {name}"),
            StepKind::ConfigMap => format!("error updating configmap: {name}"),
            StepKind::BundleSecret => format!("error updating secret: {name}"),
            StepKind::Role => format!("error creating role {name}"),
            StepKind::RoleBinding => format!("error creating rolebinding {name}"),
            StepKind::ClusterRole => format!("error creating clusterrole {name}"),
            StepKind::ClusterRoleBinding => format!("error creating clusterrolebinding {name}"),
            StepKind::Discovered(_) => format!("error creating unstructured object {name}"),
            // CRDs are written with olm-rs's own rights, never as the account.
            StepKind::CustomResourceDefinition => return None,
        })
    }

    /// What the account lacks, as the full list says it: `create deployments.apps`.
    fn right(&self) -> String {
        format!("{} {}", self.verb, self.resource())
    }
}

/// Every write of a plan the scoped account may not do, in the order the plan lists its steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopedRefusal {
    /// The account's namespace (the plan's).
    pub namespace: String,
    /// The account (the OperatorGroup's `serviceAccountName`).
    pub account: String,
    /// Never empty when displayed: a refusal names at least one write.
    pub refused: Vec<RefusedWrite>,
}

impl fmt::Display for ScopedRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let user = format!("system:serviceaccount:{}:{}", self.namespace, self.account);
        if let Some(first) = self.refused.first() {
            let sentence = first.api_server_sentence(&user);
            match first.olm_wrapper() {
                Some(wrapper) => write!(f, "{wrapper}: {sentence}; ")?,
                None => write!(f, "{sentence}; ")?,
            }
        }
        let mut rights: Vec<String> = Vec::new();
        for right in self.refused.iter().map(RefusedWrite::right) {
            if !rights.contains(&right) {
                rights.push(right);
            }
        }
        write!(
            f,
            "service account {}/{} (the OperatorGroup's serviceAccountName) may not {} in \
             namespace {}: nothing of the plan was written; grant these to the account and the \
             plan goes on",
            self.namespace,
            self.account,
            rights.join(", "),
            self.namespace
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::kinds::DiscoveredKind;

    fn write(kind: StepKind, name: &str, verb: &str, group: &str, plural: &str) -> RefusedWrite {
        RefusedWrite {
            kind,
            name: name.into(),
            verb: verb.into(),
            group: group.into(),
            plural: plural.into(),
            namespace: Some("ns".into()),
        }
    }

    fn cluster(mut w: RefusedWrite) -> RefusedWrite {
        w.namespace = None;
        w
    }

    fn refusal(refused: Vec<RefusedWrite>) -> String {
        ScopedRefusal {
            namespace: "ns".into(),
            account: "sa".into(),
            refused,
        }
        .to_string()
    }

    const USER: &str = "User \"system:serviceaccount:ns:sa\"";
    const TAIL: &str = "(the OperatorGroup's serviceAccountName) may not";

    #[test]
    fn olms_sentence_for_the_first_refused_step_comes_first_then_every_missing_right() {
        let csv = || {
            write(
                StepKind::ClusterServiceVersion,
                "etcd.v1",
                "create",
                "operators.coreos.com",
                "clusterserviceversions",
            )
        };
        let service_patch = || write(StepKind::Service, "op", "patch", "", "services");
        let table: Vec<(&str, Vec<RefusedWrite>, String)> = vec![
            (
                "the CSV refused first: OLM's csv wrapper, then the API server's words",
                vec![
                    csv(),
                    write(
                        StepKind::ServiceAccount,
                        "op",
                        "create",
                        "",
                        "serviceaccounts",
                    ),
                ],
                format!(
                    "error creating csv etcd.v1: clusterserviceversions.operators.coreos.com is \
                     forbidden: {USER} cannot create resource \"clusterserviceversions\" in API \
                     group \"operators.coreos.com\" in the namespace \"ns\"; service account ns/sa \
                     {TAIL} create clusterserviceversions.operators.coreos.com, create \
                     serviceaccounts in namespace ns: nothing of the plan was written; grant these \
                     to the account and the plan goes on"
                ),
            ),
            (
                "a core-group kind names the empty group, as the API server does",
                vec![write(
                    StepKind::ServiceAccount,
                    "op",
                    "create",
                    "",
                    "serviceaccounts",
                )],
                format!(
                    "error creating service account: op: serviceaccounts is forbidden: {USER} \
                     cannot create resource \"serviceaccounts\" in API group \"\" in the namespace \
                     \"ns\"; service account ns/sa {TAIL} create serviceaccounts in namespace ns: \
                     nothing of the plan was written; grant these to the account and the plan \
                     goes on"
                ),
            ),
            (
                "a cluster-scoped kind is refused at the cluster scope",
                vec![cluster(write(
                    StepKind::ClusterRole,
                    "etcd.v1-abc",
                    "create",
                    "rbac.authorization.k8s.io",
                    "clusterroles",
                ))],
                format!(
                    "error creating clusterrole etcd.v1-abc: clusterroles.rbac.authorization.k8s.io \
                     is forbidden: {USER} cannot create resource \"clusterroles\" in API group \
                     \"rbac.authorization.k8s.io\" at the cluster scope; service account ns/sa \
                     {TAIL} create clusterroles.rbac.authorization.k8s.io in namespace ns: nothing \
                     of the plan was written; grant these to the account and the plan goes on"
                ),
            ),
            (
                "a patch names its object and has no OLM wrapper; the list keeps one entry per right",
                vec![service_patch(), service_patch(), csv()],
                format!(
                    "services \"op\" is forbidden: {USER} cannot patch resource \"services\" in API \
                     group \"\" in the namespace \"ns\"; service account ns/sa {TAIL} patch \
                     services, create clusterserviceversions.operators.coreos.com in namespace ns: \
                     nothing of the plan was written; grant these to the account and the plan goes \
                     on"
                ),
            ),
            (
                "a discovered kind is OLM's unstructured object",
                vec![write(
                    StepKind::Discovered(DiscoveredKind::PrometheusRule),
                    "rules",
                    "create",
                    "monitoring.coreos.com",
                    "prometheusrules",
                )],
                format!(
                    "error creating unstructured object rules: \
                     prometheusrules.monitoring.coreos.com is forbidden: {USER} cannot create \
                     resource \"prometheusrules\" in API group \"monitoring.coreos.com\" in the \
                     namespace \"ns\"; service account ns/sa {TAIL} create \
                     prometheusrules.monitoring.coreos.com in namespace ns: nothing of the plan \
                     was written; grant these to the account and the plan goes on"
                ),
            ),
        ];
        for (case, refused, want) in table {
            assert_eq!(refusal(refused), want, "{case}");
        }
    }

    #[test]
    fn olms_step_writers_each_word_a_create_their_own_way() {
        let table = [
            (StepKind::Subscription, "error creating subscription x"),
            (StepKind::Service, "error updating service: x"),
            (StepKind::ConfigMap, "error updating configmap: x"),
            (StepKind::BundleSecret, "error updating secret: x"),
            (StepKind::Role, "error creating role x"),
            (StepKind::RoleBinding, "error creating rolebinding x"),
            (
                StepKind::ClusterRoleBinding,
                "error creating clusterrolebinding x",
            ),
        ];
        for (kind, want) in table {
            let w = write(kind, "x", "create", "g", "p");
            assert_eq!(w.olm_wrapper().as_deref(), Some(want), "{kind:?}");
        }
    }
}
