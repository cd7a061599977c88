//! Would the API server let a ServiceAccount do everything a PolicyRule names? (docs/csv-phases.md §6.4)
//!
//! OLM answers this with Kubernetes' own RBAC authorizer over its caches; this module evaluates
//! Roles, ClusterRoles and their bindings the same way: a rule is satisfied when every
//! (verb × group × resource × resourceName) — or (verb × nonResourceURL) — combination it names
//! is authorised. Wildcards in the *requested* rule are literal: asking for verb `*` needs a
//! grant of verb `*`, exactly as a request with verb `*` would at the API server.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};

use crate::operator_group::label_selector;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The identity a ServiceAccount authenticates as.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServiceAccountUser {
    pub namespace: String,
    pub name: String,
}

impl ServiceAccountUser {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// `system:serviceaccount:<ns>:<name>`.
    pub fn user_name(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// The groups the API server puts every ServiceAccount token in.
    pub fn groups(&self) -> [String; 3] {
        [
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".to_owned(),
        ]
    }

    /// Whether a binding subject names this account. `binding_namespace` is the RoleBinding's
    /// namespace (empty for ClusterRoleBindings): a ServiceAccount subject without a namespace
    /// means the binding's own namespace, as in the API server.
    fn is_subject(&self, subject: &Subject, binding_namespace: &str) -> bool {
        match subject.kind.as_str() {
            "ServiceAccount" => {
                let ns = subject
                    .namespace
                    .as_deref()
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or(binding_namespace);
                subject.name == self.name && ns == self.namespace
            }
            "User" => subject.name == self.user_name(),
            "Group" => self.groups().contains(&subject.name),
            _ => false,
        }
    }
}

/// Where permissions are evaluated: `permissions` in the CSV namespace, `clusterPermissions`
/// cluster-wide (only ClusterRoleBindings count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    Namespace(&'a str),
    Cluster,
}

/// One authorisation request derived from a PolicyRule.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Request {
    Resource {
        verb: String,
        group: String,
        resource: String,
        subresource: String,
        name: String,
    },
    NonResource {
        verb: String,
        path: String,
    },
}

impl fmt::Display for Request {
    /// Worded like the API server's "forbidden" message, so users recognise it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Resource {
                verb,
                group,
                resource,
                subresource,
                name,
            } => {
                write!(f, "cannot {verb} resource \"{resource}")?;
                if !subresource.is_empty() {
                    write!(f, "/{subresource}")?;
                }
                write!(f, "\" in API group \"{group}\"")?;
                if !name.is_empty() {
                    write!(f, " named \"{name}\"")?;
                }
                Ok(())
            }
            Request::NonResource { verb, path } => {
                write!(f, "cannot {verb} path \"{path}\"")
            }
        }
    }
}

/// Every request a rule names. Empty `apiGroups`, `resources` or `resourceNames` stand for the
/// empty string (core group, no name), as OLM expands them; a rule naming non-resource URLs
/// yields only non-resource requests (a rule mixing both is rejected earlier as an invalid
/// strategy). `pods/log` is split into resource and subresource like a request path would be.
pub fn requests_for(rule: &PolicyRule) -> Vec<Request> {
    let or_empty = |list: &Option<Vec<String>>| -> Vec<String> {
        match list {
            Some(items) if !items.is_empty() => items.clone(),
            _ => vec![String::new()],
        }
    };
    let mut out = Vec::new();
    if let Some(urls) = rule.non_resource_urls.as_ref().filter(|u| !u.is_empty()) {
        for verb in &rule.verbs {
            for path in urls {
                out.push(Request::NonResource {
                    verb: verb.clone(),
                    path: path.clone(),
                });
            }
        }
    } else {
        let groups = or_empty(&rule.api_groups);
        let resources = or_empty(&rule.resources);
        let names = or_empty(&rule.resource_names);
        for verb in &rule.verbs {
            for group in &groups {
                for resource in &resources {
                    let (resource, subresource) = match resource.split_once('/') {
                        Some((r, s)) => (r.to_owned(), s.to_owned()),
                        None => (resource.clone(), String::new()),
                    };
                    for name in &names {
                        out.push(Request::Resource {
                            verb: verb.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            subresource: subresource.clone(),
                            name: name.clone(),
                        });
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The cluster's RBAC objects, indexed for evaluation.
pub struct RbacIndex<'a> {
    roles: HashMap<(&'a str, &'a str), &'a Role>,
    role_bindings: Vec<&'a RoleBinding>,
    cluster_roles: HashMap<&'a str, &'a ClusterRole>,
    cluster_role_bindings: Vec<&'a ClusterRoleBinding>,
}

impl<'a> RbacIndex<'a> {
    pub fn new(
        roles: impl IntoIterator<Item = &'a Role>,
        role_bindings: impl IntoIterator<Item = &'a RoleBinding>,
        cluster_roles: impl IntoIterator<Item = &'a ClusterRole>,
        cluster_role_bindings: impl IntoIterator<Item = &'a ClusterRoleBinding>,
    ) -> Self {
        let roles = roles
            .into_iter()
            .filter_map(|r| {
                Some((
                    (
                        r.metadata.namespace.as_deref()?,
                        r.metadata.name.as_deref()?,
                    ),
                    r,
                ))
            })
            .collect();
        let cluster_roles = cluster_roles
            .into_iter()
            .filter_map(|r| Some((r.metadata.name.as_deref()?, r)))
            .collect();
        Self {
            roles,
            role_bindings: role_bindings.into_iter().collect(),
            cluster_roles,
            cluster_role_bindings: cluster_role_bindings.into_iter().collect(),
        }
    }

    /// Every rule granted to `sa` in `scope`: ClusterRoleBindings always, RoleBindings of the
    /// namespace for a namespaced scope (whether they reference a Role or a ClusterRole).
    pub fn grants_for(&self, sa: &ServiceAccountUser, scope: Scope<'_>) -> Grants {
        let mut grants = Grants::default();
        for binding in &self.cluster_role_bindings {
            let subjects = binding.subjects.as_deref().unwrap_or_default();
            if subjects.iter().any(|s| sa.is_subject(s, ""))
                && binding.role_ref.kind == "ClusterRole"
            {
                grants.add_cluster_role(self, &binding.role_ref, true);
            }
        }
        if let Scope::Namespace(ns) = scope {
            for binding in &self.role_bindings {
                if binding.metadata.namespace.as_deref() != Some(ns) {
                    continue;
                }
                let subjects = binding.subjects.as_deref().unwrap_or_default();
                if !subjects.iter().any(|s| sa.is_subject(s, ns)) {
                    continue;
                }
                match binding.role_ref.kind.as_str() {
                    "Role" => {
                        if let Some(role) = self.roles.get(&(ns, binding.role_ref.name.as_str())) {
                            grants
                                .resource_rules
                                .extend(role.rules.iter().flatten().cloned());
                        }
                    }
                    // Non-resource URLs are cluster-wide requests; a RoleBinding cannot grant
                    // them even when it references a ClusterRole that lists some.
                    "ClusterRole" => grants.add_cluster_role(self, &binding.role_ref, false),
                    _ => {}
                }
            }
        }
        grants
    }

    /// The ClusterRole's own rules plus, when it aggregates, the rules of every ClusterRole its
    /// selectors match (what the aggregation controller writes into `rules` on a real cluster;
    /// doing it here too keeps the answer right before that controller has caught up).
    fn cluster_role_rules(&self, role: &ClusterRole) -> Vec<PolicyRule> {
        let mut rules: Vec<PolicyRule> = role.rules.iter().flatten().cloned().collect();
        let selectors = role
            .aggregation_rule
            .as_ref()
            .and_then(|a| a.cluster_role_selectors.as_deref())
            .unwrap_or_default();
        if selectors.is_empty() {
            return rules;
        }
        let empty = BTreeMap::new();
        for (name, other) in &self.cluster_roles {
            if Some(*name) == role.metadata.name.as_deref() {
                continue;
            }
            let labels = other.metadata.labels.as_ref().unwrap_or(&empty);
            // A selector the API server would reject selects nothing.
            let selected = selectors
                .iter()
                .any(|s| label_selector::parse(s).is_ok_and(|parsed| parsed.matches(labels)));
            if selected {
                for rule in other.rules.iter().flatten() {
                    if !rules.contains(rule) {
                        rules.push(rule.clone());
                    }
                }
            }
        }
        rules
    }
}

/// Rules granted to one account in one scope.
#[derive(Clone, Debug, Default)]
pub struct Grants {
    resource_rules: Vec<PolicyRule>,
    non_resource_rules: Vec<PolicyRule>,
}

impl Grants {
    fn add_cluster_role(&mut self, index: &RbacIndex<'_>, role_ref: &RoleRef, cluster_wide: bool) {
        if !role_ref.api_group.is_empty() && role_ref.api_group != RBAC_GROUP {
            return;
        }
        let Some(role) = index.cluster_roles.get(role_ref.name.as_str()) else {
            return;
        };
        for rule in index.cluster_role_rules(role) {
            if cluster_wide {
                self.non_resource_rules.push(rule.clone());
            }
            self.resource_rules.push(rule);
        }
    }

    /// Whether one request is allowed.
    pub fn allows(&self, request: &Request) -> bool {
        match request {
            Request::Resource { .. } => self.resource_rules.iter().any(|r| rule_allows(r, request)),
            Request::NonResource { .. } => self
                .non_resource_rules
                .iter()
                .any(|r| rule_allows(r, request)),
        }
    }

    /// The first request of `rule` that is not allowed; `None` when the rule is satisfied.
    pub fn first_denied(&self, rule: &PolicyRule) -> Option<Request> {
        requests_for(rule).into_iter().find(|req| !self.allows(req))
    }
}

/// Kubernetes' `RuleAllows`.
fn rule_allows(rule: &PolicyRule, request: &Request) -> bool {
    let verb_ok = |verb: &str| rule.verbs.iter().any(|v| v == "*" || v == verb);
    match request {
        Request::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
        } => {
            let groups = rule.api_groups.as_deref().unwrap_or_default();
            let group_ok = groups.iter().any(|g| g == "*" || g == group);
            let combined = if subresource.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{subresource}")
            };
            let resources = rule.resources.as_deref().unwrap_or_default();
            let resource_ok = resources.iter().any(|r| {
                r == "*"
                    || *r == combined
                    || (!subresource.is_empty()
                        && r.strip_prefix("*/") == Some(subresource.as_str()))
            });
            let names = rule.resource_names.as_deref().unwrap_or_default();
            let name_ok = names.is_empty() || names.iter().any(|n| n == name);
            verb_ok(verb) && group_ok && resource_ok && name_ok
        }
        Request::NonResource { verb, path } => {
            let urls = rule.non_resource_urls.as_deref().unwrap_or_default();
            let url_ok = urls.iter().any(|u| {
                u == "*"
                    || u == path
                    || u.strip_suffix('*')
                        .is_some_and(|prefix| path.starts_with(prefix))
            });
            verb_ok(verb) && url_ok
        }
    }
}

#[cfg(test)]
mod tests;
