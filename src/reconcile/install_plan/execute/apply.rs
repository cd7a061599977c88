//! The writes of a pass: CRDs (then wait until Established), CSVs, everything else; each
//! idempotent so an interrupted pass can run again (docs/install-plans.md §7.3, §10).

use std::collections::HashMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};

use super::super::apis::StepApi;
use super::{Parsed, Pass, api_error, csv_resource, strip_status};
use crate::api::StepStatus;
use crate::k8s::MANAGER;
use crate::k8s::errors::is_conflict;
use crate::plan::kinds::{Scope, StepKind};
use crate::plan::prepare::{
    OwnerCsv, merge_installed_alongside, merge_owner_references, prepare_object,
};

impl Pass<'_> {
    pub(super) async fn apply_crd(&self, p: &Parsed) -> Result<StepStatus, String> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        let mut desired = prepare_object(
            p.kind,
            Scope::Cluster,
            &p.object.manifest,
            self.namespace,
            &p.resolving,
            None,
        );
        match crds
            .get_opt(&p.object.name)
            .await
            .map_err(|e| api_error("reading", p, &e))?
        {
            None => {
                let crd: CustomResourceDefinition = serde_json::from_value(desired)
                    .map_err(|e| format!("CustomResourceDefinition {}: {e}", p.object.name))?;
                match crds.create(&crate::k8s::post_params(), &crd).await {
                    Ok(_) => Ok(StepStatus::WaitingForApi),
                    Err(err) if is_conflict(&err) => Ok(StepStatus::WaitingForApi),
                    Err(e) => Err(api_error("creating", p, &e)),
                }
            }
            Some(live) => {
                let live = serde_json::to_value(&live).map_err(|e| e.to_string())?;
                let csvs = self.csv_names().await?;
                merge_installed_alongside(&live, &mut desired, |ns, name| {
                    ns == self.namespace && csvs.iter().any(|c| c == name)
                });
                strip_status(&mut desired);
                crds.patch(
                    &p.object.name,
                    &PatchParams::apply(MANAGER).force(),
                    &Patch::Apply(&desired),
                )
                .await
                .map_err(|e| api_error("updating", p, &e))?;
                Ok(StepStatus::Present)
            }
        }
    }

    pub(super) async fn csv_names(&self) -> Result<Vec<String>, String> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.admin.clone(), self.namespace, &csv_resource());
        let list = api
            .list_metadata(&ListParams::default())
            .await
            .map_err(|e| format!("listing CSVs in {}: {e}", self.namespace))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .collect())
    }

    pub(super) async fn established(&self, name: &str) -> Result<bool, String> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        let crd = crds
            .get_opt(name)
            .await
            .map_err(|e| format!("reading CustomResourceDefinition {name}: {e}"))?;
        let conditions = crd
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .unwrap_or_default();
        let is_true = |t: &str| {
            conditions
                .iter()
                .any(|c| c.type_ == t && c.status == "True")
        };
        Ok(is_true("Established") && is_true("NamesAccepted"))
    }

    pub(super) async fn apply(
        &self,
        p: &Parsed,
        api: &StepApi,
        owners: &mut HashMap<String, OwnerCsv>,
    ) -> Result<StepStatus, String> {
        let resolving = p.resolving.as_str();
        let resources: Api<DynamicObject> = match api.scope {
            Scope::Namespaced => {
                Api::namespaced_with(self.steps.clone(), self.namespace, &api.resource)
            }
            Scope::Cluster => Api::all_with(self.steps.clone(), &api.resource),
        };
        let needs_owner = api.scope == Scope::Namespaced && !p.kind.create_only();
        let owner = if needs_owner {
            Some(self.owner(resolving, owners).await?)
        } else {
            None
        };
        let mut desired = prepare_object(
            p.kind,
            api.scope,
            &p.object.manifest,
            self.namespace,
            resolving,
            owner.as_ref(),
        );
        let live = resources
            .get_opt(&p.object.name)
            .await
            .map_err(|e| api_error("reading", p, &e))?;
        if p.kind.create_only() {
            if live.is_some() {
                return Ok(StepStatus::Present);
            }
            let object: DynamicObject = serde_json::from_value(desired)
                .map_err(|e| format!("{} {}: {e}", p.object.kind, p.object.name))?;
            return match resources.create(&crate::k8s::post_params(), &object).await {
                Ok(_) => Ok(StepStatus::Created),
                Err(err) if is_conflict(&err) => Ok(StepStatus::Present),
                Err(e) => Err(api_error("creating", p, &e)),
            };
        }
        if p.kind == StepKind::ServiceAccount {
            let live_value = live.as_ref().and_then(|l| serde_json::to_value(l).ok());
            merge_owner_references(live_value.as_ref(), &mut desired);
        }
        resources
            .patch(
                &p.object.name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&desired),
            )
            .await
            .map_err(|e| {
                api_error(
                    if live.is_some() {
                        "updating"
                    } else {
                        "creating"
                    },
                    p,
                    &e,
                )
            })?;
        Ok(if live.is_some() {
            StepStatus::Present
        } else {
            StepStatus::Created
        })
    }

    async fn owner(
        &self,
        csv: &str,
        owners: &mut HashMap<String, OwnerCsv>,
    ) -> Result<OwnerCsv, String> {
        if let Some(owner) = owners.get(csv) {
            return Ok(owner.clone());
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.admin.clone(), self.namespace, &csv_resource());
        let found = api
            .get_metadata_opt(csv)
            .await
            .map_err(|e| format!("reading ClusterServiceVersion {}/{csv}: {e}", self.namespace))?
            .and_then(|m| m.metadata.uid)
            .ok_or_else(|| format!("ClusterServiceVersion {}/{csv} does not exist yet, so objects owned by it cannot be created", self.namespace))?;
        let owner = OwnerCsv {
            name: csv.to_owned(),
            uid: found,
        };
        owners.insert(csv.to_owned(), owner.clone());
        Ok(owner)
    }
}
