//! May a Subscription go back to an older bundle? (docs/upgrades.md, "Downgrade on request")
//!
//! A downgrade is refused, before anything is written, when a CRD version the older CSV owns or
//! requires is no longer served by the cluster's CRD (the newer operator retired it; what was
//! stored through it may no longer read back), or when the older bundle's own CRD lacks a
//! version the cluster's CRD still lists in `status.storedVersions` (objects stored at that
//! version would become unreadable — the rule `crd_safety` applies to every CRD update).
//! Custom resources are never touched either way.

use serde_json::Value;

/// What the check reads of a CRD on the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterCrd {
    /// `<plural>.<group>`.
    pub name: String,
    pub group: String,
    pub kind: String,
    /// `spec.versions[].name` with `served: true`.
    pub served: Vec<String>,
    /// `status.storedVersions`.
    pub stored: Vec<String>,
}

/// Why a downgrade is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DowngradeRefused {
    #[error(
        "downgrade to {bundle} refused: it {relation} CRD {crd} at version {version}, which the cluster's CRD no longer serves (served: {served}); nothing was changed"
    )]
    VersionNotServed {
        bundle: String,
        crd: String,
        version: String,
        /// `owns` or `requires`.
        relation: &'static str,
        served: String,
    },
    #[error(
        "downgrade to {bundle} refused: its CRD {crd} has no version {version}, which is still in the cluster CRD's status.storedVersions, so objects stored at {version} would be lost; nothing was changed"
    )]
    DropsStoredVersion {
        bundle: String,
        crd: String,
        version: String,
    },
}

/// Checks a downgrade to `bundle`, whose manifests (CSV and CRDs) are `manifests`, against the
/// cluster's `crds`. CRDs the cluster does not have are not in the way.
pub fn check_downgrade(
    bundle: &str,
    manifests: &[Value],
    crds: &[ClusterCrd],
) -> Result<(), DowngradeRefused> {
    let find = |name: &str| crds.iter().find(|c| c.name == name);
    for csv in manifests
        .iter()
        .filter(|m| kind(m) == "ClusterServiceVersion")
    {
        for (relation, list) in [("owns", "owned"), ("requires", "required")] {
            let pointer = format!("/spec/customresourcedefinitions/{list}");
            for d in csv
                .pointer(&pointer)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let (Some(name), Some(version)) = (str_at(d, "/name"), str_at(d, "/version"))
                else {
                    continue;
                };
                if let Some(crd) = find(name)
                    && !crd.served.iter().any(|v| v == version)
                {
                    return Err(DowngradeRefused::VersionNotServed {
                        bundle: bundle.to_owned(),
                        crd: name.to_owned(),
                        version: version.to_owned(),
                        relation,
                        served: crd.served.join(", "),
                    });
                }
            }
        }
    }
    check_stored(bundle, manifests, crds)
}

/// The APIs (`olm.gvk`, `olm.gvk.required`) of a bundle known only by its image, checked the
/// same way: an API the older bundle provides or requires at a version the cluster's CRD of
/// that group and kind no longer serves. (Its CRDs' versions are checked by the InstallPlan
/// once the image is pulled: `crd_safety`.)
pub fn check_downgrade_apis(
    bundle: &str,
    properties: &[Value],
    crds: &[ClusterCrd],
) -> Result<(), DowngradeRefused> {
    for p in properties {
        let relation = match str_at(p, "/type") {
            Some("olm.gvk") => "owns",
            Some("olm.gvk.required") => "requires",
            _ => continue,
        };
        let (Some(group), Some(version), Some(kind)) = (
            str_at(p, "/value/group"),
            str_at(p, "/value/version"),
            str_at(p, "/value/kind"),
        ) else {
            continue;
        };
        if let Some(crd) = crds.iter().find(|c| c.group == group && c.kind == kind)
            && !crd.served.iter().any(|v| v == version)
        {
            return Err(DowngradeRefused::VersionNotServed {
                bundle: bundle.to_owned(),
                crd: crd.name.clone(),
                version: version.to_owned(),
                relation,
                served: crd.served.join(", "),
            });
        }
    }
    Ok(())
}

fn check_stored(
    bundle: &str,
    manifests: &[Value],
    crds: &[ClusterCrd],
) -> Result<(), DowngradeRefused> {
    for new in manifests
        .iter()
        .filter(|m| kind(m) == "CustomResourceDefinition")
    {
        let Some(name) = str_at(new, "/metadata/name") else {
            continue;
        };
        let Some(existing) = crds.iter().find(|c| c.name == name) else {
            continue;
        };
        let versions = crd_versions(new);
        if let Some(lost) = existing.stored.iter().find(|s| !versions.contains(s)) {
            return Err(DowngradeRefused::DropsStoredVersion {
                bundle: bundle.to_owned(),
                crd: name.to_owned(),
                version: lost.clone(),
            });
        }
    }
    Ok(())
}

/// Every version a CRD manifest declares: `spec.versions[].name`, and v1beta1's `spec.version`.
fn crd_versions(crd: &Value) -> Vec<String> {
    let mut out: Vec<String> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| str_at(v, "/name").map(str::to_owned))
        .collect();
    if let Some(v) = str_at(crd, "/spec/version") {
        out.push(v.to_owned());
    }
    out
}

fn kind(v: &Value) -> &str {
    str_at(v, "/kind").unwrap_or_default()
}

fn str_at<'v>(v: &'v Value, pointer: &str) -> Option<&'v str> {
    v.pointer(pointer).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cluster(served: &[&str], stored: &[&str]) -> Vec<ClusterCrd> {
        vec![ClusterCrd {
            name: "gears.example.com".into(),
            group: "example.com".into(),
            kind: "Gear".into(),
            served: served.iter().map(|s| (*s).to_owned()).collect(),
            stored: stored.iter().map(|s| (*s).to_owned()).collect(),
        }]
    }

    fn bundle(owned: Option<&str>, required: Option<&str>, crd_versions: &[&str]) -> Vec<Value> {
        let d = |v: Option<&str>| -> Vec<Value> {
            v.map(|v| json!({"name": "gears.example.com", "version": v, "kind": "Gear"}))
                .into_iter()
                .collect()
        };
        let mut out = vec![json!({
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "op.v1.0.0"},
            "spec": {"customresourcedefinitions": {"owned": d(owned), "required": d(required)}},
        })];
        if !crd_versions.is_empty() {
            out.push(json!({
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "gears.example.com"},
                "spec": {"versions": crd_versions.iter().map(|v| json!({"name": v})).collect::<Vec<_>>()},
            }));
        }
        out
    }

    /// (owned, required, the bundle's CRD versions, served, stored, refused with)
    type Case<'a> = (
        Option<&'a str>,
        Option<&'a str>,
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
        Option<&'a str>,
    );

    #[test]
    fn a_downgrade_is_refused_for_unserved_or_stored_versions_only() {
        let table: &[Case] = &[
            (Some("v1"), None, &["v1"], &["v1"], &["v1"], None),
            (
                Some("v1alpha1"),
                None,
                &["v1alpha1", "v1"],
                &["v1alpha1", "v1"],
                &["v1"],
                None,
            ),
            (
                Some("v1alpha1"),
                None,
                &["v1alpha1"],
                &["v1"],
                &["v1"],
                Some(
                    "it owns CRD gears.example.com at version v1alpha1, which the cluster's CRD no longer serves (served: v1)",
                ),
            ),
            (
                None,
                Some("v1alpha1"),
                &[],
                &["v1"],
                &["v1"],
                Some("it requires CRD gears.example.com at version v1alpha1"),
            ),
            (
                Some("v1alpha1"),
                None,
                &["v1alpha1"],
                &["v1alpha1", "v1"],
                &["v1alpha1", "v1"],
                Some(
                    "its CRD gears.example.com has no version v1, which is still in the cluster CRD's status.storedVersions",
                ),
            ),
            // A required CRD is not the bundle's to replace: its stored versions are not at stake.
            (None, Some("v1"), &[], &["v1"], &["v1alpha1", "v1"], None),
        ];
        for (owned, required, versions, served, stored, refused) in table {
            let result = check_downgrade(
                "op.v1.0.0",
                &bundle(*owned, *required, versions),
                &cluster(served, stored),
            );
            match refused {
                None => assert_eq!(
                    result,
                    Ok(()),
                    "{owned:?} {required:?} {served:?} {stored:?}"
                ),
                Some(words) => {
                    let error = result.expect_err("refused").to_string();
                    assert!(error.contains(words), "{error}");
                    assert!(
                        error.starts_with("downgrade to op.v1.0.0 refused"),
                        "{error}"
                    );
                }
            }
        }
    }

    #[test]
    fn crds_the_cluster_lacks_are_not_in_the_way() {
        assert_eq!(
            check_downgrade(
                "op.v1.0.0",
                &bundle(Some("v1alpha1"), None, &["v1alpha1"]),
                &[]
            ),
            Ok(())
        );
    }

    #[test]
    fn image_bundles_are_checked_through_their_api_properties() {
        let props = [
            json!({"type": "olm.gvk", "value": {"group": "example.com", "version": "v1alpha1", "kind": "Gear"}}),
        ];
        let error = check_downgrade_apis("op.v1.0.0", &props, &cluster(&["v1"], &["v1"]))
            .expect_err("refused")
            .to_string();
        assert!(
            error.contains("CRD gears.example.com at version v1alpha1"),
            "{error}"
        );
        assert_eq!(
            check_downgrade_apis("op.v1.0.0", &props, &cluster(&["v1alpha1", "v1"], &["v1"])),
            Ok(())
        );
    }
}
