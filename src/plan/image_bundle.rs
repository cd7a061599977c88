//! Bundles known only by their image (pure). The plan first carries a `bundleLookups` entry for
//! the image; once the controller has pulled it, the bundle's steps are appended to the plan.
//! Those steps never hold the bundle's objects: each holds a small reference to the bundle by
//! its manifest digest, the way OLM's steps reference its unpack ConfigMap, and the executor
//! takes the objects from the pulled bundle when it applies them. A bundle of any size thus fits
//! in an InstallPlan, and what is applied is exactly what was pulled and verified.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::PlanError;
use super::steps::{BundleContent, PlannedStep, bundle_steps};
use crate::api::CatalogRef;
use crate::api::install_plan::bundle_lookup_reason;
use crate::api::{
    BundleLookup, BundleLookupCondition, BundleLookupConditionType, ConditionStatus, Step,
    set_condition,
};

/// `kind` of a step manifest that references a pulled bundle image.
pub const BUNDLE_REFERENCE_KIND: &str = "BundleImage";

/// What an image-bundle step stores instead of the object: which bundle, by digest, and what
/// is needed to rebuild its steps exactly as they were planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleReference {
    /// Always [`BUNDLE_REFERENCE_KIND`].
    pub kind: String,
    /// The image as the catalog names it.
    pub image: String,
    /// The digest of the image manifest that was pulled (`sha256:…`): the executor applies
    /// this content and no other, even if the tag moved meanwhile.
    pub digest: String,
    pub catalog_source_name: String,
    pub catalog_source_namespace: String,
    /// The CSV the bundle replaces (`""` for a fresh install).
    #[serde(default)]
    pub replaces: String,
    /// `{"properties":[…]}` projected onto the CSV; only the CSV step carries it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub properties: String,
}

impl BundleReference {
    /// The reference held by a step manifest, if it is one.
    pub fn of_manifest(manifest: &str) -> Option<BundleReference> {
        // Cheap test first: most manifests are objects, not references.
        if !manifest.contains(BUNDLE_REFERENCE_KIND) {
            return None;
        }
        serde_json::from_str::<BundleReference>(manifest)
            .ok()
            .filter(|r| r.kind == BUNDLE_REFERENCE_KIND)
    }

    /// `image@digest`: the exact content to fetch.
    pub fn pinned_image(&self) -> String {
        pinned_image(&self.image, &self.digest)
    }

    pub fn catalog(&self) -> CatalogRef {
        CatalogRef::new(&self.catalog_source_namespace, &self.catalog_source_name)
    }
}

/// `repository@digest` for `image` (a tag or an older digest dropped).
pub fn pinned_image(image: &str, digest: &str) -> String {
    let without_digest = image.split_once('@').map_or(image, |(repo, _)| repo);
    // A tag is the part after the last ':' that follows the last '/' (a port has a '/' after it).
    let repository = match without_digest.rfind(':') {
        Some(colon) if !without_digest[colon..].contains('/') => &without_digest[..colon],
        _ => without_digest,
    };
    format!("{repository}@{digest}")
}

/// The lookup a plan carries for a bundle that must be pulled first (`status.bundleLookups[]`).
pub fn bundle_lookup(
    bundle: &str,
    image: &str,
    catalog: &CatalogRef,
    replaces: Option<&str>,
    properties: &[Value],
    now: &Time,
) -> BundleLookup {
    let mut lookup = BundleLookup {
        path: image.to_owned(),
        identifier: bundle.to_owned(),
        replaces: replaces.unwrap_or_default().to_owned(),
        catalog_source_ref: ObjectReference {
            name: Some(catalog.name.clone()),
            namespace: Some(catalog.namespace.clone()),
            ..ObjectReference::default()
        },
        conditions: None,
        properties: Some(json!({ "properties": properties }).to_string()),
    };
    set_lookup_condition(
        &mut lookup,
        BundleLookupConditionType::BundleLookupPending,
        bundle_lookup_reason::PULL_NOT_STARTED,
        &format!("bundle image {image} not yet pulled"),
        now,
    );
    lookup
}

/// Sets the lookup's one condition (`BundleLookupPending` or `BundleLookupFailed`), keeping
/// its transition time when the type stays; returns whether anything changed.
pub fn set_lookup_condition(
    lookup: &mut BundleLookup,
    type_: BundleLookupConditionType,
    reason: &str,
    message: &str,
    now: &Time,
) -> bool {
    let mut conditions = lookup.conditions.take().unwrap_or_default();
    let before = conditions.len();
    conditions.retain(|c| c.type_ == type_);
    let mut changed = conditions.len() != before;
    changed |= set_condition(
        &mut conditions,
        BundleLookupCondition {
            type_,
            status: ConditionStatus::True,
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            last_update_time: None,
            last_transition_time: None,
        },
        now,
    );
    lookup.conditions = Some(conditions);
    changed
}

/// The bundle a finished lookup describes, with `manifests` as pulled (the CSV among them).
pub fn lookup_content(lookup: &BundleLookup, manifests: Vec<Value>) -> BundleContent {
    BundleContent {
        name: lookup.identifier.clone(),
        manifests,
        properties: lookup_properties(lookup.properties.as_deref().unwrap_or_default()),
        catalog: lookup_catalog(lookup),
    }
}

/// The CatalogSource a lookup names.
pub fn lookup_catalog(lookup: &BundleLookup) -> CatalogRef {
    let r = &lookup.catalog_source_ref;
    CatalogRef::new(
        r.namespace.clone().unwrap_or_default(),
        r.name.clone().unwrap_or_default(),
    )
}

fn lookup_properties(text: &str) -> Vec<Value> {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("properties").and_then(Value::as_array).cloned())
        .unwrap_or_default()
}

/// The steps of a pulled image bundle, in the §7.2 order (CSV, other manifests, RBAC), each
/// holding a [`BundleReference`] to `image@digest` instead of the object.
pub fn image_bundle_steps(
    bundle: &BundleContent,
    namespace: &str,
    replaces: Option<&str>,
    image: &str,
    digest: &str,
) -> Result<Vec<PlannedStep>, PlanError> {
    let mut steps = bundle_steps(bundle, namespace, replaces)?;
    let base = BundleReference {
        kind: BUNDLE_REFERENCE_KIND.to_owned(),
        image: image.to_owned(),
        digest: digest.to_owned(),
        catalog_source_name: bundle.catalog.name.clone(),
        catalog_source_namespace: bundle.catalog.namespace.clone(),
        replaces: replaces.unwrap_or_default().to_owned(),
        properties: String::new(),
    };
    let properties = json!({ "properties": bundle.properties }).to_string();
    for step in &mut steps {
        let mut reference = base.clone();
        if step.object.is_csv() {
            reference.properties = properties.clone();
        }
        // Serialising a struct of strings cannot fail.
        step.object.manifest = serde_json::to_value(&reference).unwrap_or(Value::Null);
    }
    Ok(steps)
}

/// Identity of a step's object: (group, version, step kind, name).
type StepIdentity = (String, String, String, String);

/// The objects of a pulled bundle by step identity, rebuilt exactly as [`image_bundle_steps`]
/// planned them (same namespace, replaced CSV and properties).
#[derive(Debug, Clone)]
pub struct PulledObjects {
    objects: HashMap<StepIdentity, Value>,
}

impl PulledObjects {
    pub fn new(
        reference: &BundleReference,
        csv_properties: &str,
        manifests: Vec<Value>,
        bundle: &str,
        namespace: &str,
    ) -> Result<Self, PlanError> {
        let content = BundleContent {
            name: bundle.to_owned(),
            manifests,
            properties: lookup_properties(csv_properties),
            catalog: reference.catalog(),
        };
        let replaces = Some(reference.replaces.as_str()).filter(|r| !r.is_empty());
        let objects = bundle_steps(&content, namespace, replaces)?
            .into_iter()
            .map(|s| {
                let o = s.object;
                ((o.group, o.version, o.kind, o.name), o.manifest)
            })
            .collect();
        Ok(PulledObjects { objects })
    }

    /// The object of `step`, or why the bundle has no such object.
    pub fn object_for(&self, step: &Step) -> Result<&Value, MissingStepObject> {
        let r = &step.resource;
        let key = (
            r.group.clone(),
            r.version.clone(),
            r.kind.clone(),
            r.name.clone(),
        );
        self.objects.get(&key).ok_or_else(|| MissingStepObject {
            kind: r.kind.clone(),
            name: r.name.clone(),
            group: r.group.clone(),
            version: r.version.clone(),
            bundle: step.resolving.clone(),
        })
    }
}

/// A step of a plan whose object the pulled bundle does not hold; the text is OLM's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "couldn't find unpacked step for {kind} {name} (group {group:?}, version {version}) in the bundle image of {bundle}"
)]
pub struct MissingStepObject {
    pub kind: String,
    pub name: String,
    pub group: String,
    pub version: String,
    /// The CSV the step resolves.
    pub bundle: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;

    fn content() -> BundleContent {
        BundleContent {
            name: "op.v2".into(),
            manifests: vec![
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                       "metadata": {"name": "widgets.example.com"}}),
                json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                       "metadata": {"name": "op.v2"},
                       "spec": {"install": {"strategy": "deployment", "spec": {
                           "permissions": [{"serviceAccountName": "op", "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}],
                           "deployments": []}}}}),
            ],
            properties: vec![
                json!({"type": "olm.package", "value": {"packageName": "op", "version": "2.0.0"}}),
            ],
            catalog: CatalogRef::new("olm", "cat"),
        }
    }

    #[test]
    fn steps_hold_a_reference_and_the_executor_gets_the_planned_object_back() {
        let digest = "sha256:0123";
        let steps = image_bundle_steps(
            &content(),
            "ns",
            Some("op.v1"),
            "quay.io/x/op-bundle:v2",
            digest,
        )
        .unwrap();
        let kinds: Vec<&str> = steps.iter().map(|s| s.object.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "ClusterServiceVersion",
                "CustomResourceDefinition",
                "ServiceAccount",
                "Role",
                "RoleBinding"
            ]
        );
        let wire: Vec<Step> = steps.iter().map(super::super::wire_step).collect();
        for step in &wire {
            let text = step.resource.manifest.as_deref().unwrap();
            assert!(text.len() < 400, "a reference stays small: {text}");
            let r = BundleReference::of_manifest(text).unwrap();
            assert_eq!(r.digest, digest);
            assert_eq!(r.pinned_image(), "quay.io/x/op-bundle@sha256:0123");
            assert_eq!(
                r.properties.is_empty(),
                step.resource.kind != "ClusterServiceVersion"
            );
        }
        let csv_ref =
            BundleReference::of_manifest(wire[0].resource.manifest.as_deref().unwrap()).unwrap();
        let objects = PulledObjects::new(
            &csv_ref,
            &csv_ref.properties,
            content().manifests,
            "op.v2",
            "ns",
        )
        .unwrap();
        let csv = objects.object_for(&wire[0]).unwrap();
        assert_eq!(csv["spec"]["replaces"], "op.v1");
        assert_eq!(csv["metadata"]["namespace"], "ns");
        assert!(
            csv["metadata"]["annotations"]["operatorframework.io/properties"]
                .as_str()
                .unwrap()
                .contains("olm.package")
        );
        assert_eq!(
            objects.object_for(&wire[1]).unwrap()["metadata"]["name"],
            "widgets.example.com"
        );
        let mut missing = wire[1].clone();
        missing.resource.name = "gadgets.example.com".into();
        assert!(
            objects
                .object_for(&missing)
                .unwrap_err()
                .to_string()
                .starts_with(
                    "couldn't find unpacked step for CustomResourceDefinition gadgets.example.com"
                )
        );
    }

    #[test]
    fn pinned_images_drop_tags_but_keep_ports() {
        assert_eq!(
            pinned_image("localhost:5000/a/b:v1", "sha256:1"),
            "localhost:5000/a/b@sha256:1"
        );
        assert_eq!(
            pinned_image("localhost:5000/a/b", "sha256:1"),
            "localhost:5000/a/b@sha256:1"
        );
        assert_eq!(
            pinned_image("quay.io/a/b@sha256:0", "sha256:1"),
            "quay.io/a/b@sha256:1"
        );
    }

    #[test]
    fn a_new_lookup_is_pending_and_carries_the_catalog_properties() {
        let now = Time(Timestamp::from_second(1_000).unwrap());
        let lookup = bundle_lookup(
            "op.v2",
            "quay.io/x/op-bundle:v2",
            &CatalogRef::new("olm", "cat"),
            None,
            &content().properties,
            &now,
        );
        assert_eq!(lookup.path, "quay.io/x/op-bundle:v2");
        assert_eq!(lookup.replaces, "");
        let c = &lookup.conditions.as_ref().unwrap()[0];
        assert_eq!(c.type_, BundleLookupConditionType::BundleLookupPending);
        assert_eq!(c.last_transition_time, Some(now));
        let back = lookup_content(&lookup, vec![]);
        assert_eq!(back.properties, content().properties);
        assert_eq!(back.catalog, CatalogRef::new("olm", "cat"));
    }
}
