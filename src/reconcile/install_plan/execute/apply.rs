//! The writes of a pass, each through `k8s::write` (the `olm-rs` field manager, typed
//! `ApiError`s) and each idempotent, so an interrupted pass can run again
//! (docs/install-plans.md §7.3, §10). Which step is written when is `plan::order`'s.

use std::collections::HashMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams};

use super::super::apis::StepApi;
use super::{Pass, StepError, csv_resource, step_error, strip_status};
use crate::api::keys::COPIED_FROM_LABEL;
use crate::api::{InstallPlan, StepStatus};
use crate::k8s::effects::{Body, Write, perform};
use crate::k8s::read;
use crate::k8s::write::{self, ApiError, ObjectKey, Ownership};
use crate::plan::alongside::{
    AlongsideCsv, AlongsideFacts, alongside_csvs, alongside_repair, merge_installed_alongside,
    plan_still_installs,
};
use crate::plan::execution::ParsedStep;
use crate::plan::kinds::{Scope, StepKind};
use crate::plan::prepare::{OwnerCsv, merge_owner_references, prepare_object};

impl Pass<'_> {
    /// Creates a CRD (`WaitingForApi` until Established) or updates it, keeping the
    /// installed-alongside annotations of every CSV that exists or that a plan still
    /// installing will create (`plan::alongside`).
    pub(super) async fn apply_crd(&self, p: &ParsedStep) -> Result<StepStatus, StepError> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        let key = ObjectKey::new::<CustomResourceDefinition>(None, &p.object.name);
        let mut desired = prepare_object(
            p.kind,
            Scope::Cluster,
            &p.object.manifest,
            self.namespace,
            &p.resolving,
            None,
        );
        let live = read::get(&crds, &p.object.name)
            .await
            .map_err(|e| step_error("reading", p, e))?;
        let Some(live) = live else {
            let create = Write::Create {
                key,
                object: Body::new(desired),
            };
            return match perform(self.admin, &create).await {
                Ok(created) => {
                    // The created CRD (with its uid, so that its reader role is owned by it).
                    let created = created.map(|o| serde_json::to_value(&o)).transpose()?;
                    if let Some(created) = created {
                        self.ensure_crd_reader(&created)
                            .await
                            .map_err(|e| step_error("granting olm-rs read access for", p, e))?;
                    }
                    Ok(StepStatus::WaitingForApi)
                }
                // Created by an earlier pass that did not record it: same outcome.
                Err(e) if e.is_conflict() => Ok(StepStatus::WaitingForApi),
                Err(e) => Err(step_error("creating", p, e)),
            };
        };
        let live = serde_json::to_value(&live)?;
        let facts = self.alongside_facts(&live).await?;
        merge_installed_alongside(&live, &mut desired, &facts);
        strip_status(&mut desired);
        write::apply_dynamic(self.admin, &key, &desired, Ownership::Force)
            .await
            .map_err(|e| step_error("updating", p, e))?;
        Ok(StepStatus::Present)
    }

    /// olm-rs's read access to the custom resources of `crd` (live, with its uid): its reader
    /// role, server-side applied (docs/install-plans.md §7.5).
    pub(super) async fn ensure_crd_reader(&self, crd: &serde_json::Value) -> Result<(), ApiError> {
        let Some(role) = crate::plan::crd_reader::reader_role(crd) else {
            return Ok(());
        };
        perform(self.admin, &Write::apply(role, Ownership::Force))
            .await
            .map(|_| ())
    }

    /// What a CRD update must know of the CSVs the live CRD's annotations name, per namespace
    /// named: first its InstallPlans that still install, then its CSVs (in that order, so no
    /// CSV falls between the two reads, `plan::alongside::AlongsideFacts`). Read live: a CSV
    /// created a moment ago counts.
    async fn alongside_facts(&self, live: &serde_json::Value) -> Result<AlongsideFacts, StepError> {
        let named = alongside_csvs(live);
        let mut namespaces: Vec<&str> = named.iter().map(|c| c.namespace.as_str()).collect();
        namespaces.dedup();
        let mut facts = AlongsideFacts::default();
        for namespace in namespaces {
            let plans: Api<InstallPlan> = Api::namespaced(self.admin.clone(), namespace);
            let plans = plans.list(&ListParams::default()).await.map_err(|source| {
                StepError::ListPlans {
                    namespace: namespace.to_owned(),
                    source,
                }
            })?;
            for plan in plans.items {
                let installs = plan
                    .status
                    .as_ref()
                    .is_none_or(|s| plan_still_installs(&s.phase));
                if installs {
                    facts.coming.extend(
                        plan.spec
                            .cluster_service_version_names
                            .iter()
                            .map(|name| AlongsideCsv::new(namespace, name)),
                    );
                }
            }
            let csvs: Api<DynamicObject> =
                Api::namespaced_with(self.admin.clone(), namespace, &csv_resource());
            let csvs = csvs
                .list_metadata(&ListParams::default())
                .await
                .map_err(|source| StepError::ListCsvs {
                    namespace: namespace.to_owned(),
                    source,
                })?;
            facts.existing.extend(
                csvs.items
                    .into_iter()
                    .filter(|o| {
                        !o.metadata
                            .labels
                            .as_ref()
                            .is_some_and(|l| l.contains_key(COPIED_FROM_LABEL))
                    })
                    .filter_map(|o| o.metadata.name)
                    .map(|name| AlongsideCsv::new(namespace, &name)),
            );
        }
        Ok(facts)
    }

    /// A CRD step done by an earlier pass is verified before the plan completes: the CRD must
    /// still carry the installed-alongside annotation of the plan's CSV, or that CSV waits on
    /// it forever (docs/install-plans.md §7.3). A missing one is added back by a merge patch
    /// of that annotation alone, guarded by the CRD's resourceVersion: the CRD's spec may
    /// have moved on since this plan applied it, and is not written again.
    pub(super) async fn keep_alongside(&self, p: &ParsedStep) -> Result<(), StepError> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        let crd = read::get(&crds, &p.object.name)
            .await
            .map_err(|source| StepError::ReadCrd {
                name: p.object.name.clone(),
                source,
            })?;
        let Some(crd) = crd else {
            return Err(StepError::CrdGone {
                name: p.object.name.clone(),
            });
        };
        let crd = serde_json::to_value(&crd)?;
        if let Some(repair) = alongside_repair(&crd, self.namespace, &p.resolving) {
            tracing::warn!(
                crd = %p.object.name,
                csv = %format!("{}/{}", self.namespace, p.resolving),
                "the CRD lost the installed-alongside annotation of the plan's CSV; adding it back"
            );
            perform(self.admin, &repair)
                .await
                .map_err(|e| step_error("annotating", p, e))?;
        }
        Ok(())
    }

    /// Whether the CRD `name` is Established with its names accepted.
    pub(super) async fn established(&self, name: &str) -> Result<bool, StepError> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        let crd = read::get(&crds, name)
            .await
            .map_err(|source| StepError::ReadCrd {
                name: name.to_owned(),
                source,
            })?;
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

    /// Writes any step but a CRD, as the pass's step identity: create-only kinds are created
    /// when absent and left alone when present; the others are server-side applied.
    pub(super) async fn apply(
        &self,
        p: &ParsedStep,
        api: &StepApi,
        owners: &mut HashMap<String, OwnerCsv>,
    ) -> Result<StepStatus, StepError> {
        let resolving = p.resolving.as_str();
        let key = ObjectKey {
            resource: api.resource.clone(),
            namespace: (api.scope == Scope::Namespaced).then(|| self.namespace.to_owned()),
            name: p.object.name.clone(),
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
        let live = read::get_dynamic(self.steps, &key)
            .await
            .map_err(|e| step_error("reading", p, e))?;
        if p.kind.create_only() {
            if live.is_some() {
                return Ok(StepStatus::Present);
            }
            let create = Write::Create {
                key,
                object: Body::new(desired),
            };
            return match perform(self.steps, &create).await {
                Ok(_) => Ok(StepStatus::Created),
                Err(e) if e.is_conflict() => Ok(StepStatus::Present),
                Err(e) => Err(step_error("creating", p, e)),
            };
        }
        if p.kind == StepKind::ServiceAccount {
            let live_value = live.as_ref().and_then(|l| serde_json::to_value(l).ok());
            merge_owner_references(live_value.as_ref(), &mut desired);
        }
        let action = if live.is_some() {
            "updating"
        } else {
            "creating"
        };
        write::apply_dynamic(self.steps, &key, &desired, Ownership::Force)
            .await
            .map_err(|e| step_error(action, p, e))?;
        Ok(if live.is_some() {
            StepStatus::Present
        } else {
            StepStatus::Created
        })
    }

    /// The CSV `csv` of the plan's namespace, which namespaced objects are owned by: it must
    /// exist already (CSVs are written before every other step but CRDs).
    async fn owner(
        &self,
        csv: &str,
        owners: &mut HashMap<String, OwnerCsv>,
    ) -> Result<OwnerCsv, StepError> {
        if let Some(owner) = owners.get(csv) {
            return Ok(owner.clone());
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.admin.clone(), self.namespace, &csv_resource());
        let found = api
            .get_metadata_opt(csv)
            .await
            .map_err(|source| StepError::ReadOwner {
                namespace: self.namespace.to_owned(),
                csv: csv.to_owned(),
                source,
            })?
            .and_then(|m| m.metadata.uid)
            .ok_or_else(|| StepError::OwnerMissing {
                namespace: self.namespace.to_owned(),
                csv: csv.to_owned(),
            })?;
        let owner = OwnerCsv {
            name: csv.to_owned(),
            uid: found,
        };
        owners.insert(csv.to_owned(), owner.clone());
        Ok(owner)
    }
}
