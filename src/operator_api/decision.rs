//! One Operator's sync, decided (docs/operator-api.md §2–§4): the component labels to add or
//! remove, then the Operator to create or the status to write.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::component::{Component, SubscriptionView, csv_owners};
use super::names::{component_label_key, operator_name};
use super::operands::OperandSource;
use crate::api::{
    ClusterServiceVersion, Components, InstallPlan, Operator, OperatorSpec, OperatorStatus,
};
use crate::k8s::effects::{Body, Effects, Write};
use crate::k8s::write::ObjectKey;

/// A CSV whose objects join the Operator: one its Subscription installed, or one labelled
/// for it (docs/operator-api.md §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdopteeCsv {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    /// `spec.customresourcedefinitions.owned[].name`.
    pub owned_crds: BTreeSet<String>,
    /// Where its operands are and who reads them.
    pub operands: OperandSource,
}

impl AdopteeCsv {
    pub fn of(csv: &ClusterServiceVersion) -> Self {
        Self {
            namespace: csv.namespace().unwrap_or_default(),
            name: csv.name_any(),
            uid: csv.uid(),
            owned_crds: csv
                .spec
                .custom_resource_definitions
                .iter()
                .flat_map(|d| d.owned.iter().flatten())
                .map(|d| d.name.clone())
                .collect(),
            operands: OperandSource::of(csv),
        }
    }
}

/// What the shell must observe for the Operator `name`: its label key, its Subscriptions'
/// keys and the CSVs it adopts for. [`Interest::wants`] picks the objects the decision reads.
#[derive(Debug, Clone)]
pub struct Interest {
    pub label_key: String,
    pub csvs: Vec<AdopteeCsv>,
    /// CSVs and InstallPlans a Subscription of the Operator names.
    referenced: BTreeSet<(String, String, String)>,
}

impl Interest {
    /// `None` when `name` makes no label key (docs/operator-api.md §1).
    pub fn new<'a>(
        name: &str,
        subscriptions: &[SubscriptionView],
        csvs: impl IntoIterator<Item = &'a ClusterServiceVersion>,
    ) -> Option<Self> {
        let label_key = component_label_key(name)?;
        let mut referenced = BTreeSet::new();
        for sub in subscriptions {
            let ns = sub.namespace().to_owned();
            if let Some(csv) = &sub.installed_csv {
                referenced.insert((csv_kind(), ns.clone(), csv.clone()));
            }
            if let Some((ip_ns, ip)) = &sub.install_plan {
                referenced.insert((plan_kind(), ip_ns.clone(), ip.clone()));
            }
        }
        let csvs = csvs
            .into_iter()
            .filter(|c| {
                c.labels().contains_key(&label_key)
                    || referenced.contains(&(
                        csv_kind(),
                        c.namespace().unwrap_or_default(),
                        c.name_any(),
                    ))
            })
            .map(AdopteeCsv::of)
            .collect();
        Some(Self {
            label_key,
            csvs,
            referenced,
        })
    }

    /// Whether the decision reads `obj`: it carries the label, an adoptee CSV owns it (or
    /// lists it among its owned CRDs), or a Subscription names it.
    pub fn wants<K: Resource<DynamicType = ()>>(&self, obj: &K) -> bool {
        let kind = K::kind(&());
        let ns = obj.namespace().unwrap_or_default();
        let name = obj.name_any();
        obj.labels().contains_key(&self.label_key)
            || self
                .referenced
                .contains(&(kind.to_string(), ns.clone(), name.clone()))
            || (kind == CustomResourceDefinition::kind(&())
                && self.csvs.iter().any(|c| c.owned_crds.contains(&name)))
            || csv_owners(obj).iter().any(|o| {
                self.csvs.iter().any(|c| {
                    c.namespace == o.namespace
                        && c.name == o.name
                        && (o.uid.is_none() || c.uid.is_none() || o.uid == c.uid)
                })
            })
    }
}

fn csv_kind() -> String {
    ClusterServiceVersion::kind(&()).into_owned()
}

fn plan_kind() -> String {
    InstallPlan::kind(&()).into_owned()
}

/// Everything one sync of the Operator `name` reads.
pub struct Observed<'a> {
    pub name: &'a str,
    pub operator: Option<&'a Operator>,
    /// The Subscriptions whose package and namespace make `name`.
    pub subscriptions: &'a [SubscriptionView],
    pub interest: &'a Interest,
    /// Every object [`Interest::wants`], Subscriptions included.
    pub components: &'a [Component],
}

/// The writes of one sync: label patches first (adopt, disown), then the Operator's create or
/// status. Nothing when all agrees.
pub fn decide(seen: &Observed<'_>) -> Effects {
    let key = &seen.interest.label_key;
    let mut effects = Effects::default();
    let mut adopt: Vec<&Component> = Vec::new();
    let mut disown: Vec<&Component> = Vec::new();
    let find = |kind: &str, ns: &str, name: &str| {
        seen.components.iter().find(|c| {
            c.key.resource.kind == kind
                && c.key.namespace.as_deref() == Some(ns)
                && c.key.name == name
        })
    };
    // docs/operator-api.md §2: a Subscription, its installed CSV and its latest InstallPlan;
    // older plans of the namespace lose the label.
    for sub in seen.subscriptions {
        if operator_name(&sub.package, sub.namespace()) != seen.name {
            continue;
        }
        adopt.push(&sub.component);
        if let Some(csv) = &sub.installed_csv
            && let Some(c) = find(&csv_kind(), sub.namespace(), csv)
        {
            adopt.push(c);
        }
        if let Some((ns, name)) = &sub.install_plan {
            if let Some(c) = find(&plan_kind(), ns, name) {
                adopt.push(c);
            }
            disown.extend(seen.components.iter().filter(|c| {
                c.key.resource.kind == plan_kind()
                    && c.key.namespace.as_deref() == Some(ns)
                    && c.key.name != *name
                    && c.has_label(key)
            }));
        }
    }
    // §2: what each adoptee CSV owns, and the CRDs it owns.
    for csv in &seen.interest.csvs {
        for c in seen.components {
            let owned_crd = c.key.resource.kind == CustomResourceDefinition::kind(&())
                && csv.owned_crds.contains(&c.key.name);
            if owned_crd || c.owned_by(&csv.namespace, &csv.name, csv.uid.as_deref()) {
                adopt.push(c);
            }
        }
    }
    let mut done: Vec<&ObjectKey> = Vec::new();
    for c in adopt {
        if !c.has_label(key) && !done.contains(&&c.key) {
            done.push(&c.key);
            effects.write(label_patch(&c.key, key, json!("")));
        }
    }
    for c in disown {
        if !done.contains(&&c.key) {
            done.push(&c.key);
            effects.write(label_patch(&c.key, key, serde_json::Value::Null));
        }
    }
    let status = status_of(key, seen.components);
    match seen.operator {
        // §4: an Operator is made while it has components, also after a user deleted it.
        None if status_has_refs(&status) => {
            effects.write(Write::create(Operator::new(seen.name, OperatorSpec {})));
        }
        None => {}
        Some(op) if op.status.as_ref() != Some(&status) => {
            if let Some(write) = Write::status(op, status) {
                effects.write(write);
            }
        }
        Some(_) => {}
    }
    effects
}

/// A merge patch of the one label: `""` adds it, `null` removes it; nothing else of the
/// object (a Deployment's pod template above all) is touched.
fn label_patch(k: &ObjectKey, key: &str, value: serde_json::Value) -> Write {
    Write::MergePatch {
        key: k.clone(),
        patch: Body::new(json!({"metadata": {"labels": {key: value}}})),
        resource_version: None,
    }
}

/// The status: the selector `<key> exists` and a reference to every object carrying the
/// label, sorted by kind, apiVersion, namespace and name (OLM's order, so a sync that finds
/// the same objects writes nothing).
pub fn status_of(key: &str, components: &[Component]) -> OperatorStatus {
    let mut refs: Vec<_> = components
        .iter()
        .filter(|c| c.has_label(key))
        .map(Component::reference)
        .collect();
    refs.sort_by(|a, b| {
        (&a.kind, &a.api_version, &a.namespace, &a.name).cmp(&(
            &b.kind,
            &b.api_version,
            &b.namespace,
            &b.name,
        ))
    });
    refs.dedup();
    OperatorStatus {
        components: Some(Components {
            label_selector: LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: key.to_owned(),
                    operator: "Exists".to_owned(),
                    values: None,
                }]),
                match_labels: None,
            },
            refs: (!refs.is_empty()).then_some(refs),
        }),
    }
}

fn status_has_refs(status: &OperatorStatus) -> bool {
    status.components.as_ref().is_some_and(|c| c.refs.is_some())
}

#[cfg(test)]
#[path = "decision_tests.rs"]
mod tests;
