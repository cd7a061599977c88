//! What the stages of a pass observe before `plan::pass` decides them (docs/install-plans.md
//! §7.3–§7.5, §10): the plan's CRDs as they are, the resources an updated CRD stores, where each
//! step's API lives, what a scoped account may do, the objects already under the steps' names
//! and the uids of the CSVs that own them. Reads only: every write of a pass is a stage's.

use std::collections::HashMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::super::apis::step_api;
use super::{Pass, StepError, failed, failed_call, failed_step, step_error};
use crate::api::InstallPlan;
use crate::api::keys::COPIED_FROM_LABEL;
use crate::k8s::errors::{ApiFailure, is_forbidden};
use crate::k8s::read;
use crate::k8s::write::ObjectKey;
use crate::plan::alongside::{AlongsideCsv, AlongsideFacts, alongside_csvs, plan_still_installs};
use crate::plan::crd_reader::{AGGREGATED_ROLE, reader_role_name};
use crate::plan::crd_safety::{VersionToValidate, versions_to_validate};
use crate::plan::execution::{CheckedPlan, planned_apis, served_by_plan};
use crate::plan::kinds::{Scope, StepKind};
use crate::plan::pass::{Observed, StepApi};
use crate::plan::phase::PassOutcome;
use crate::plan::scoped_refusal::{RefusedWrite, ScopedRefusal};

fn csv_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "ClusterServiceVersion"),
        "clusterserviceversions",
    )
}

impl Pass<'_> {
    /// The CRDs of the steps of `which` that exist, read with olm-rs's client.
    pub(super) async fn observe_crds(
        &self,
        plan: &CheckedPlan,
        which: &[usize],
    ) -> Result<Observed, PassOutcome> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        let mut found = Observed::new();
        for &i in which {
            let p = &plan.steps[i];
            let crd = read::get(&crds, &p.object.name)
                .await
                .map_err(|e| failed_step(step_error("reading", p, e)))?;
            if let Some(crd) = crd {
                let crd = serde_json::to_value(&crd).map_err(failed)?;
                found.insert(i, crd);
            }
        }
        Ok(found)
    }

    /// The custom resources each existing CRD of `live` stores in the versions its update
    /// changes (`plan::crd_safety::versions_to_validate`), each listed through its version.
    pub(super) async fn observe_stored(
        &self,
        plan: &CheckedPlan,
        live: &Observed,
    ) -> Result<HashMap<usize, Vec<(VersionToValidate, Vec<Value>)>>, PassOutcome> {
        let mut stored = HashMap::new();
        for (&i, existing) in live {
            let mut resources = Vec::new();
            for version in versions_to_validate(existing, &plan.steps[i].object.manifest) {
                let objects = self.list_resources(existing, &version.version).await?;
                resources.push((version, objects));
            }
            stored.insert(i, resources);
        }
        Ok(stored)
    }

    /// Every custom resource of `crd` at `version`, listed through that version, paginated.
    /// A refused list (the reader role not aggregated yet, or removed) is `Forbidden`: retried,
    /// with the words that say which role grants it.
    async fn list_resources(&self, crd: &Value, version: &str) -> Result<Vec<Value>, PassOutcome> {
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
                let message = format!(
                    "listing existing {}/{} {}: {e}",
                    gvk.group, gvk.version, gvk.kind
                );
                if is_forbidden(&e) {
                    PassOutcome::Forbidden {
                        message: format!(
                            "{message} (olm-rs reads them through the ClusterRole {}, \
                             aggregated into {AGGREGATED_ROLE} that the chart binds to \
                             olm-rs's ServiceAccount)",
                            reader_role_name(&text("/metadata/name"))
                        ),
                    }
                } else {
                    failed_call(message, &e)
                }
            })?;
            for item in page.items {
                let mut value = serde_json::to_value(&item).map_err(failed)?;
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

    /// The resource of each step but CRDs, by step index: served by the cluster, or coming
    /// from a CRD of this very plan.
    pub(super) async fn observe_apis(
        &self,
        plan: &CheckedPlan,
    ) -> Result<HashMap<usize, StepApi>, PassOutcome> {
        let planned = planned_apis(&plan.steps);
        let mut apis = HashMap::new();
        for p in &plan.steps {
            if p.kind == StepKind::CustomResourceDefinition {
                continue;
            }
            match step_api(self.steps, self.served_apis, p.kind, &p.object).await {
                Ok(api) => {
                    apis.insert(p.index, api);
                }
                Err(e) => {
                    let Some((resource, scope)) = served_by_plan(&planned, &p.object) else {
                        return Err(failed(e));
                    };
                    apis.insert(p.index, StepApi { resource, scope });
                }
            }
        }
        Ok(apis)
    }

    /// A scoped install (docs/install-plans.md §10): each of `questions`
    /// (`plan::pass::scoped_questions`) asked as the account with a SelfSubjectAccessReview.
    /// A refusal leads with OLM's sentence for the first refused step, then lists every right
    /// the account lacks (`plan::scoped_refusal`).
    pub(super) async fn ask_scoped(
        &self,
        account: &str,
        questions: Vec<RefusedWrite>,
    ) -> Result<(), PassOutcome> {
        let mut refused = Vec::new();
        for q in questions {
            let namespace = q.namespace.as_deref();
            match crate::access_review::may(self.steps, &q.group, &q.plural, &q.verb, namespace)
                .await
            {
                Ok(true) => {}
                Ok(false) => refused.push(q),
                // An API server without SelfSubjectAccessReview: the writes themselves
                // will be refused or allowed.
                Err(e) if ApiFailure::of(&e) == ApiFailure::NotFound => return Ok(()),
                // olm-rs itself may not act as the account (its ClusterRole lacks
                // `impersonate` on `serviceaccounts`): a permission to grant, as above.
                Err(e) if is_forbidden(&e) => {
                    return Err(PassOutcome::Forbidden {
                        message: format!(
                            "olm-rs may not act as service account {}/{account} (the \
                             OperatorGroup's serviceAccountName): {e}",
                            self.namespace
                        ),
                    });
                }
                Err(e) => {
                    return Err(failed_call(
                        format!(
                            "asking whether service account {}/{account} may {} {}: {e}",
                            self.namespace, q.verb, q.plural
                        ),
                        &e,
                    ));
                }
            }
        }
        if refused.is_empty() {
            return Ok(());
        }
        Err(PassOutcome::Forbidden {
            message: ScopedRefusal {
                namespace: self.namespace.to_owned(),
                account: account.to_owned(),
                refused,
            }
            .to_string(),
        })
    }

    /// What the update of each CRD of `live` must know of the CSVs its annotations name, per
    /// namespace named: first its InstallPlans that still install, then its CSVs (in that
    /// order, so no CSV falls between the two reads, `plan::alongside::AlongsideFacts`). Read
    /// live: a CSV created a moment ago counts.
    pub(super) async fn observe_alongside(
        &self,
        live: &Observed,
    ) -> Result<HashMap<usize, AlongsideFacts>, PassOutcome> {
        let mut all = HashMap::new();
        for (&i, crd) in live {
            let facts = self.alongside_facts(crd).await.map_err(failed_step)?;
            all.insert(i, facts);
        }
        Ok(all)
    }

    async fn alongside_facts(&self, live: &Value) -> Result<AlongsideFacts, StepError> {
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

    /// The objects already under the names of the steps of `which`, read as the steps are
    /// written (with the plan's identity).
    pub(super) async fn observe_objects(
        &self,
        plan: &CheckedPlan,
        which: &[usize],
        apis: &HashMap<usize, StepApi>,
    ) -> Result<Observed, PassOutcome> {
        let mut found = Observed::new();
        for &i in which {
            let p = &plan.steps[i];
            // A step without an API is refused when its stage is decided.
            let Some(api) = apis.get(&i) else {
                continue;
            };
            let key = ObjectKey {
                resource: api.resource.clone(),
                namespace: (api.scope == Scope::Namespaced).then(|| self.namespace.to_owned()),
                name: p.object.name.clone(),
            };
            let live = read::get_dynamic(self.steps, &key)
                .await
                .map_err(|e| failed_step(step_error("reading", p, e)))?;
            if let Some(live) = live {
                found.insert(i, serde_json::to_value(&live).map_err(failed)?);
            }
        }
        Ok(found)
    }

    /// The uid of each CSV of `names` in the plan's namespace that exists.
    pub(super) async fn observe_owners(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, String>, PassOutcome> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.admin.clone(), self.namespace, &csv_resource());
        let mut uids = HashMap::new();
        for csv in names {
            let found = api.get_metadata_opt(csv).await.map_err(|source| {
                failed_step(StepError::ReadOwner {
                    namespace: self.namespace.to_owned(),
                    csv: csv.clone(),
                    source,
                })
            })?;
            if let Some(uid) = found.and_then(|m| m.metadata.uid) {
                uids.insert(csv.clone(), uid);
            }
        }
        Ok(uids)
    }
}
