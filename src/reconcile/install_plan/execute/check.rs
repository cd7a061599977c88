//! Before anything is written: every step's API exists (or comes from a CRD of this plan) and
//! every CRD update is safe for the custom resources already stored (docs/install-plans.md
//! §7.3).

use std::collections::HashMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::super::apis::{StepApi, step_api};
use super::{Parsed, Pass, PlanWarning, Warnings, api_error, failed};
use crate::api::{Step, StepStatus};
use crate::plan::crd_safety::{CrdUpdateCheck, check_crd_update, versions_to_validate};
use crate::plan::kinds::{Scope, StepKind};
use crate::plan::phase::PassOutcome;

impl Pass<'_> {
    /// Everything that can be known before writing: APIs exist and CRD updates are safe.
    pub(super) async fn check(
        &self,
        steps: &[Step],
        parsed: &[Parsed],
        apis: &mut HashMap<usize, StepApi>,
        warnings: &mut Warnings,
    ) -> Result<(), PassOutcome> {
        // (group, kind, plural, namespaced) of the APIs this plan's own CRDs will serve.
        let planned_crds: Vec<(String, String, String, bool)> = parsed
            .iter()
            .filter(|p| p.kind == StepKind::CustomResourceDefinition)
            .filter_map(|p| {
                let text = |path: &str| p.object.manifest.pointer(path).and_then(Value::as_str);
                let scope = text("/spec/scope").unwrap_or("Namespaced");
                Some((
                    text("/spec/group")?.to_owned(),
                    text("/spec/names/kind")?.to_owned(),
                    text("/spec/names/plural")?.to_owned(),
                    scope == "Namespaced",
                ))
            })
            .collect();
        for p in parsed {
            if p.kind == StepKind::CustomResourceDefinition {
                if p.object.group == "apiextensions.k8s.io" && p.object.version == "v1beta1" {
                    return Err(PassOutcome::StepFailed {
                        message: format!(
                            "CustomResourceDefinition {} is apiextensions.k8s.io/v1beta1, which Kubernetes has not served since 1.22; the bundle must ship a v1 CRD",
                            p.object.name
                        ),
                        permanent: true,
                    });
                }
                if matches!(
                    steps[p.index].status,
                    StepStatus::Unknown | StepStatus::NotPresent
                ) {
                    self.check_crd(p, warnings).await.map_err(failed)?;
                }
                continue;
            }
            match step_api(self.steps, p.kind, &p.object).await {
                Ok(api) => {
                    apis.insert(p.index, api);
                }
                // The API may come from a CRD of this very plan.
                Err(e) => {
                    let kind = StepKind::manifest_kind(&p.object.kind);
                    let Some((_, _, plural, namespaced)) = planned_crds
                        .iter()
                        .find(|(g, k, _, _)| *g == p.object.group && k == kind)
                    else {
                        return Err(failed(e.to_string()));
                    };
                    let gvk = GroupVersionKind::gvk(&p.object.group, &p.object.version, kind);
                    let scope = if *namespaced {
                        Scope::Namespaced
                    } else {
                        Scope::Cluster
                    };
                    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
                    apis.insert(p.index, StepApi { resource, scope });
                }
            }
        }
        Ok(())
    }

    async fn check_crd(&self, p: &Parsed, warnings: &mut Warnings) -> Result<(), String> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        let Some(existing) = crds
            .get_opt(&p.object.name)
            .await
            .map_err(|e| api_error("reading", p, &e))?
        else {
            return Ok(());
        };
        let existing = serde_json::to_value(&existing).map_err(|e| e.to_string())?;
        let new = &p.object.manifest;
        let mut resources = Vec::new();
        for version in versions_to_validate(&existing, new) {
            let objects = self.list_resources(&existing, &version.version).await?;
            resources.push((version, objects));
        }
        let validate = |schema: &Value, object: &Value| {
            let mut copy = object.clone();
            crate::api::crd::validate::admit_object(schema, None, &mut copy).violations
        };
        match check_crd_update(&existing, new, &resources, validate) {
            Ok(CrdUpdateCheck::Safe) => Ok(()),
            Ok(CrdUpdateCheck::SafeWithWarning(message)) => {
                warnings.push(PlanWarning {
                    reason: "CRDValidation",
                    message,
                    step: Some(p.index),
                });
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Every custom resource of `crd` at `version`, listed through that version, paginated.
    async fn list_resources(&self, crd: &Value, version: &str) -> Result<Vec<Value>, String> {
        let text = |path: &str| {
            crd.pointer(path)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let gvk = GroupVersionKind::gvk(&text("/spec/group"), version, &text("/spec/names/kind"));
        let resource = ApiResource::from_gvk_with_plural(&gvk, &text("/spec/names/plural"));
        let api: Api<DynamicObject> = Api::all_with(self.admin.clone(), &resource);
        let mut out = Vec::new();
        let mut params = ListParams::default().limit(500);
        loop {
            let page = api.list(&params).await.map_err(|e| {
                format!(
                    "listing existing {}/{} {}: {e}",
                    gvk.group, gvk.version, gvk.kind
                )
            })?;
            for item in page.items {
                let mut value = serde_json::to_value(&item).map_err(|e| e.to_string())?;
                // Listed objects carry no apiVersion/kind on every server; the message needs them.
                value["apiVersion"] = resource.api_version.clone().into();
                value["kind"] = resource.kind.clone().into();
                out.push(value);
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(out),
            }
        }
    }
}
