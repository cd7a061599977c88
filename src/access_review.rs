//! Before the reconcilers start: does olm-rs's identity hold the permissions its watches need?
//!
//! A watch the API server refuses (403) is retried with back-off forever, so a ClusterRole that
//! lacks one rule would otherwise show as a controller that is "ready" and silently never
//! installs. One SelfSubjectAccessReview per verb and resource tells at start-up, and the process
//! stops naming every missing permission (docs/controller-startup.md).

use std::fmt;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::Api;

/// A resource the controller lists and watches in every namespace.
#[derive(Debug, Clone, Copy)]
pub struct Watched {
    pub group: &'static str,
    pub resource: &'static str,
}

const fn watched(group: &'static str, resource: &'static str) -> Watched {
    Watched { group, resource }
}

/// Every resource a reconciler watches cluster-wide (src/reconcile/*: reflectors and watchers).
pub const WATCHED: &[Watched] = &[
    watched("operators.coreos.com", "clusterserviceversions"),
    watched("operators.coreos.com", "operatorgroups"),
    watched("operators.coreos.com", "subscriptions"),
    watched("operators.coreos.com", "installplans"),
    watched("operators.coreos.com", "catalogsources"),
    watched("operators.coreos.com", "operatorconditions"),
    watched("operators.coreos.com", "operators"),
    watched("apiextensions.k8s.io", "customresourcedefinitions"),
    watched("apiregistration.k8s.io", "apiservices"),
    watched("apps", "deployments"),
    watched("", "namespaces"),
    watched("", "serviceaccounts"),
    watched("", "secrets"),
    watched("", "services"),
    watched("", "pods"),
    watched("", "configmaps"),
    watched("networking.k8s.io", "networkpolicies"),
    watched("rbac.authorization.k8s.io", "roles"),
    watched("rbac.authorization.k8s.io", "rolebindings"),
    watched("rbac.authorization.k8s.io", "clusterroles"),
    watched("rbac.authorization.k8s.io", "clusterrolebindings"),
    watched(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    ),
    watched(
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    ),
];

/// The verbs a watch needs.
pub const WATCH_VERBS: [&str; 2] = ["list", "watch"];

/// A permission the API server says olm-rs does not have.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Missing {
    pub verb: String,
    pub group: String,
    pub resource: String,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{} {}", self.verb, self.resource)
        } else {
            write!(f, "{} {}.{}", self.verb, self.resource, self.group)
        }
    }
}

/// The sentence for a log line and for `/readyz`.
pub fn missing_message(missing: &[Missing]) -> String {
    let list: Vec<String> = missing.iter().map(Missing::to_string).collect();
    format!(
        "olm-rs may not {} in all namespaces: the ClusterRole bound to its ServiceAccount \
         (the chart's olm-rs-controller, config/rbac/cluster_role.yaml) must grant {}",
        list.join(", "),
        if missing.len() == 1 { "it" } else { "them" }
    )
}

/// Asks the API server, for every watched resource and verb, whether olm-rs may. `Err` when a
/// review itself fails (an API server that does not serve SelfSubjectAccessReview, say).
pub async fn missing_watch_permissions(client: &Client) -> Result<Vec<Missing>, kube::Error> {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let asks: Vec<_> = WATCHED
        .iter()
        .flat_map(|w| WATCH_VERBS.map(|verb| review(&reviews, w.group, w.resource, verb)))
        .collect();
    let mut missing = Vec::new();
    for answer in futures::future::join_all(asks).await {
        missing.extend(answer?);
    }
    Ok(missing)
}

/// One review: `Some` when the answer is "not allowed".
async fn review(
    reviews: &Api<SelfSubjectAccessReview>,
    group: &'static str,
    resource: &'static str,
    verb: &'static str,
) -> Result<Option<Missing>, kube::Error> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                verb: Some(verb.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = reviews.create(&crate::k8s::post_params(), &review).await?;
    let allowed = answer.status.is_some_and(|s| s.allowed);
    Ok((!allowed).then(|| Missing {
        verb: verb.to_owned(),
        group: group.to_owned(),
        resource: resource.to_owned(),
    }))
}

/// Whether the identity of `client` may `verb` the `resource` of `group` (in `namespace`, or
/// cluster-wide when `None`): one SelfSubjectAccessReview. Sent through an impersonating client
/// it answers for the impersonated ServiceAccount (scoped installs, docs/install-plans.md §10).
pub async fn may(
    client: &Client,
    group: &str,
    resource: &str,
    verb: &str,
    namespace: Option<&str>,
) -> Result<bool, kube::Error> {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                verb: Some(verb.to_owned()),
                namespace: namespace.map(str::to_owned),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = reviews.create(&crate::k8s::post_params(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_each_verb_and_resource_with_its_group() {
        let missing = [
            Missing {
                verb: "list".to_owned(),
                group: "apps".to_owned(),
                resource: "deployments".to_owned(),
            },
            Missing {
                verb: "watch".to_owned(),
                group: String::new(),
                resource: "secrets".to_owned(),
            },
        ];
        let text = missing_message(&missing);
        assert!(
            text.contains("list deployments.apps, watch secrets"),
            "{text}"
        );
        assert!(text.contains("ClusterRole"), "{text}");
        assert!(text.ends_with("grant them"), "{text}");
    }

    #[test]
    fn every_watched_resource_is_named_once() {
        let mut seen = std::collections::BTreeSet::new();
        for w in WATCHED {
            assert!(seen.insert((w.group, w.resource)), "{w:?} twice");
        }
    }
}
