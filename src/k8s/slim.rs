//! What a stored object keeps (docs/controller-startup.md, "One reconciler shape"): stores
//! hold every object of a kind, so what no decision reads is dropped before an object enters one.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::Resource;

use crate::api::keys::LAST_APPLIED_ANNOTATION;

/// Drops what no decision reads before an object enters a store: kubectl's last-applied copy
/// and the managed fields' field sets, often most of a small object's size. Of the managed fields one entry stays, without its fields: the newest change
/// by another manager than olm-rs (else one of olm-rs's), which the NoRetry trigger reads
/// (docs/csv-phases.md §1.1).
pub fn slim<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = meta.managed_fields.take().map(newest_change);
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
}

/// The one managed-fields entry [`slim`] keeps: manager and time only.
fn newest_change(fields: Vec<ManagedFieldsEntry>) -> Vec<ManagedFieldsEntry> {
    let ours = |f: &&ManagedFieldsEntry| f.manager.as_deref() == Some(crate::k8s::MANAGER);
    let newest = fields
        .iter()
        .filter(|f| !ours(f))
        .max_by_key(|f| f.time.as_ref().map(|t| t.0))
        .or_else(|| fields.iter().find(ours));
    newest
        .map(|f| ManagedFieldsEntry {
            manager: f.manager.clone(),
            time: f.time.clone(),
            ..ManagedFieldsEntry::default()
        })
        .into_iter()
        .collect()
}

/// [`slim`], and a CRD's OpenAPI schemas and managed fields: the CSV requirement checks read
/// its names, versions, conditions, conversion and annotations (docs/csv-phases.md §6), the
/// OperatorGroup side its name and uid, while the schemas of OLM's own CRDs alone are megabytes
/// once decoded. The CSV controller only merge-patches `spec.conversion`, so the stored copy is
/// never written back.
pub fn slim_crd(crd: &mut CustomResourceDefinition) {
    slim(crd);
    crd.metadata.managed_fields = None;
    for version in &mut crd.spec.versions {
        version.schema = None;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceValidation, JSONSchemaProps,
    };

    use super::*;
    use k8s_openapi::api::rbac::v1::Role;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinitionCondition, CustomResourceDefinitionSpec,
        CustomResourceDefinitionStatus, CustomResourceDefinitionVersion,
    };

    /// A served, established CRD with one version (what requirement checks read).
    fn crd(name: &str, version: &str) -> CustomResourceDefinition {
        let mut crd = CustomResourceDefinition::default();
        crd.metadata.name = Some(name.to_owned());
        crd.spec = CustomResourceDefinitionSpec {
            versions: vec![CustomResourceDefinitionVersion {
                name: version.to_owned(),
                served: true,
                storage: true,
                ..Default::default()
            }],
            ..Default::default()
        };
        crd.status = Some(CustomResourceDefinitionStatus {
            conditions: Some(vec![CustomResourceDefinitionCondition {
                type_: "Established".to_owned(),
                status: "True".to_owned(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        crd
    }

    #[test]
    fn slim_keeps_only_the_newest_change_by_another_manager() {
        let entry = |manager: &str, second: i64| ManagedFieldsEntry {
            manager: Some(manager.into()),
            time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::from_second(second).unwrap(),
            )),
            fields_v1: Some(Default::default()),
            ..Default::default()
        };
        let mut role = Role::default();
        role.metadata.managed_fields = Some(vec![
            entry("kubectl", 10),
            entry(crate::k8s::MANAGER, 30),
            entry("helm", 20),
        ]);
        slim(&mut role);
        let kept = role.metadata.managed_fields.unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].manager.as_deref(), Some("helm"));
        assert!(kept[0].fields_v1.is_none(), "field sets are dropped");

        let mut ours = Role::default();
        ours.metadata.managed_fields = Some(vec![entry(crate::k8s::MANAGER, 30)]);
        slim(&mut ours);
        assert_eq!(
            ours.metadata.managed_fields.unwrap()[0].manager.as_deref(),
            Some(crate::k8s::MANAGER)
        );
    }

    #[test]
    fn slim_crd_keeps_what_requirement_checks_read_and_drops_the_rest() {
        let alongside = "operatorframework.io/installed-alongside-0a1b2c";
        let mut expected = crd("demos.example.com", "v1");
        expected.metadata.annotations =
            Some([(alongside.to_owned(), "ns/demo.v1".to_owned())].into());

        let mut stored = expected.clone();
        stored.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kubectl".into()),
            ..Default::default()
        }]);
        stored.metadata.annotations.get_or_insert_default().insert(
            LAST_APPLIED_ANNOTATION.to_owned(),
            "{\"big\": true}".to_owned(),
        );
        stored.spec.versions[0].schema = Some(CustomResourceValidation {
            open_api_v3_schema: Some(JSONSchemaProps {
                type_: Some("object".into()),
                ..Default::default()
            }),
        });

        slim_crd(&mut stored);
        assert_eq!(stored, expected);
    }

    #[test]
    fn slim_leaves_an_object_without_bookkeeping_unchanged() {
        let plain = crd("demos.example.com", "v1");
        let mut slimmed = plain.clone();
        slim(&mut slimmed);
        assert_eq!(slimmed, plain);
    }
}
