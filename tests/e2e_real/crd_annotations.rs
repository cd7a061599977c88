//! The CRD update's two writes on a real API server (docs/install-plans.md §7.3,
//! docs/reliability.md §3.7): a server-side apply without installed-alongside annotations, then
//! a merge patch of them. Field ownership is the API server's, so only a real one shows that an
//! update decided on an older copy of the CRD, landing after another plan annotated it, keeps
//! that annotation — the defect F4 found, when the annotations were part of the apply.

use std::collections::BTreeSet;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use olm_rs::k8s::effects::{Write, execute_noted};
use olm_rs::k8s::warnings::WarningLog;
use olm_rs::k8s::write::ObjectKey;
use olm_rs::olm_hash::installed_alongside_annotation_key;
use olm_rs::plan::alongside::{AlongsideCsv, AlongsideFacts, alongside_csvs, crd_update_writes};

const NAME: &str = "gizmos.alongside.olm-rs.dev";

/// The CRD as a plan of CSV `csv` (namespace `demo`) wants it: the bundle's manifest with the
/// plan's own annotation, as `plan::prepare` adds it.
fn desired(csv: &str, description: &str) -> Value {
    let key = installed_alongside_annotation_key("demo", csv);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": NAME,
            "labels": {"olm.managed": "true"},
            "annotations": {key: format!("demo/{csv}")},
        },
        "spec": {
            "group": "alongside.olm-rs.dev",
            "names": {"kind": "Gizmo", "listKind": "GizmoList", "plural": "gizmos", "singular": "gizmo"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "description": description}},
            }],
        },
    })
}

/// The update a plan of `csv` decides on `copy` of the CRD, keeping `existing` CSVs: the
/// writes `plan::pass::crd_writes` hands the executor.
fn update(csv: &str, description: &str, copy: &Value, existing: &[&str]) -> [Write; 2] {
    let facts = AlongsideFacts {
        existing: existing
            .iter()
            .map(|c| AlongsideCsv::new("demo", c))
            .collect(),
        coming: BTreeSet::new(),
    };
    crd_update_writes(
        ObjectKey::new::<CustomResourceDefinition>(None, NAME),
        desired(csv, description),
        copy,
        &facts,
    )
}

async fn write(client: &Client, writes: &[Write]) -> anyhow::Result<()> {
    let noted = execute_noted(client, &WarningLog::default(), writes).await;
    if let Some(failed) = noted.failed {
        bail!("writing CRD {NAME}: {}", failed.error);
    }
    Ok(())
}

async fn named(crds: &Api<CustomResourceDefinition>) -> anyhow::Result<Vec<String>> {
    let crd = serde_json::to_value(crds.get(NAME).await?)?;
    Ok(alongside_csvs(&crd).into_iter().map(|c| c.name).collect())
}

/// Two plans update one CRD; the one decided first lands last.
pub async fn run(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let _ = crds.delete(NAME, &DeleteParams::default()).await;
    // An olm-rs before this fix applied the annotations: v0.1.0's is owned by that apply.
    let legacy: CustomResourceDefinition = serde_json::from_value(desired("demo.v0.1.0", "first"))?;
    crds.patch(
        NAME,
        &PatchParams::apply("olm-rs").force(),
        &Patch::Apply(&legacy),
    )
    .await
    .context("the CRD as an older olm-rs applied it")?;
    let old_copy = serde_json::to_value(crds.get(NAME).await?)?;

    // The dependency namespace's plan (of v0.2.0) decides on this copy ...
    let stale = update("demo.v0.2.0", "second", &old_copy, &["demo.v0.1.0"]);
    // ... while the chain's plan of v0.3.0 reads the CRD, updates it and completes.
    let fresh_copy = serde_json::to_value(crds.get(NAME).await?)?;
    write(
        client,
        &update("demo.v0.3.0", "third", &fresh_copy, &["demo.v0.1.0"]),
    )
    .await?;
    let after_fresh = named(&crds).await?;
    ensure!(
        after_fresh == ["demo.v0.1.0", "demo.v0.3.0"],
        "the older olm-rs's annotation written again beside the plan's own: {after_fresh:?}"
    );
    // The stale update lands now.
    write(client, &stale).await?;
    let after_stale = named(&crds).await?;
    ensure!(
        after_stale == ["demo.v0.1.0", "demo.v0.2.0", "demo.v0.3.0"],
        "an update decided before v0.3.0 annotated the CRD kept v0.3.0's annotation: {after_stale:?}"
    );
    // v0.1.0 is gone and its plan finished: the next update removes its annotation only.
    let copy = serde_json::to_value(crds.get(NAME).await?)?;
    write(
        client,
        &update(
            "demo.v0.3.0",
            "third",
            &copy,
            &["demo.v0.2.0", "demo.v0.3.0"],
        ),
    )
    .await?;
    let pruned = named(&crds).await?;
    ensure!(
        pruned == ["demo.v0.2.0", "demo.v0.3.0"],
        "a CSV gone for good loses its annotation, the others stay: {pruned:?}"
    );
    let spec = crds.get(NAME).await?.spec;
    let description = spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.description.clone());
    ensure!(
        description.as_deref() == Some("third"),
        "the spec is the last apply's: {description:?}"
    );
    crds.delete(NAME, &DeleteParams::default()).await?;
    Ok(())
}
