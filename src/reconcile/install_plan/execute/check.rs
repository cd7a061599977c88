//! Before anything is written, what needs the cluster: every step's API exists (or comes from a
//! CRD of this plan) and every CRD update is safe for the custom resources already stored
//! (docs/install-plans.md §7.3, §7.4). The refusals themselves are `plan::execution`'s and
//! `plan::crd_safety`'s.

use std::collections::HashMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::super::apis::{StepApi, step_api};
use super::{Pass, failed, failed_call, failed_step, step_error};
use crate::api::Step;
use crate::k8s::errors::{ApiFailure, is_forbidden};
use crate::k8s::read;
use crate::plan::crd_reader::{AGGREGATED_ROLE, reader_role_name};
use crate::plan::crd_safety::{CrdUpdateCheck, check_crd_update, versions_to_validate};
use crate::plan::execution::{
    CRD_VALIDATION, ParsedStep, PlanWarning, planned_apis, served_by_plan,
};
use crate::plan::kinds::StepKind;
use crate::plan::order::{StepAction, step_action};
use crate::plan::phase::PassOutcome;
use crate::plan::scoped_refusal::{RefusedWrite, ScopedRefusal};

impl Pass<'_> {
    /// What needs the cluster before anything is written: every step's API is served (or will
    /// be, by a CRD of this plan) and every CRD update is safe. The resource of each step but
    /// CRDs, by step index.
    pub(super) async fn check(
        &self,
        steps: &[Step],
        parsed: &[ParsedStep],
        warnings: &mut Vec<PlanWarning>,
    ) -> Result<HashMap<usize, StepApi>, PassOutcome> {
        let planned = planned_apis(parsed);
        let mut apis = HashMap::new();
        for p in parsed {
            if p.kind == StepKind::CustomResourceDefinition {
                if step_action(p.kind, &steps[p.index].status) == StepAction::Write {
                    self.check_crd(p, warnings).await?;
                }
                continue;
            }
            match step_api(self.steps, self.served_apis, p.kind, &p.object).await {
                Ok(api) => {
                    apis.insert(p.index, api);
                }
                // The API may come from a CRD of this very plan.
                Err(e) => {
                    let Some((resource, scope)) = served_by_plan(&planned, &p.object) else {
                        return Err(failed(e.to_string()));
                    };
                    apis.insert(p.index, StepApi { resource, scope });
                }
            }
        }
        if let Some(account) = self.scoped_as {
            self.check_scoped(account, steps, parsed, &apis).await?;
        }
        Ok(apis)
    }

    /// A scoped install (docs/install-plans.md §10): the OperatorGroup's ServiceAccount must be
    /// allowed every step it will write before anything is written — CRDs included, which olm-rs
    /// applies with its own rights once this check passes, as OLM applies them only after the
    /// account wrote the CSV listed before them. One SelfSubjectAccessReview per step and verb,
    /// asked as the account. A refusal leads with OLM's sentence for the first refused step,
    /// then lists every right the account lacks (`plan::scoped_refusal`).
    async fn check_scoped(
        &self,
        account: &str,
        steps: &[Step],
        parsed: &[ParsedStep],
        apis: &HashMap<usize, StepApi>,
    ) -> Result<(), PassOutcome> {
        let mut refused = Vec::new();
        for p in parsed {
            if p.kind == StepKind::CustomResourceDefinition
                || step_action(p.kind, &steps[p.index].status) != StepAction::Write
            {
                continue;
            }
            let Some(api) = apis.get(&p.index) else {
                continue;
            };
            let namespace =
                (api.scope == crate::plan::kinds::Scope::Namespaced).then_some(self.namespace);
            let verbs: &[&str] = if p.kind.create_only() {
                &["create"]
            } else {
                &["create", "patch"]
            };
            for verb in verbs {
                let group = &api.resource.group;
                let plural = &api.resource.plural;
                match crate::access_review::may(self.steps, group, plural, verb, namespace).await {
                    Ok(true) => {}
                    Ok(false) => refused.push(RefusedWrite {
                        kind: p.kind,
                        name: p.object.name.clone(),
                        verb: (*verb).to_owned(),
                        group: group.clone(),
                        plural: plural.clone(),
                        namespace: namespace.map(str::to_owned),
                    }),
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
                                "asking whether service account {}/{account} may {verb} {plural}: {e}",
                                self.namespace
                            ),
                            &e,
                        ));
                    }
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

    async fn check_crd(
        &self,
        p: &ParsedStep,
        warnings: &mut Vec<PlanWarning>,
    ) -> Result<(), PassOutcome> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        let Some(existing) = read::get(&crds, &p.object.name)
            .await
            .map_err(|e| failed_step(step_error("reading", p, e)))?
        else {
            return Ok(());
        };
        let existing = serde_json::to_value(&existing).map_err(failed)?;
        // Before listing the CRD's objects, olm-rs grants itself their read (a CRD installed
        // before olm-rs, by OLM say, has no reader role yet).
        self.ensure_crd_reader(&existing)
            .await
            .map_err(|e| failed_step(step_error("granting olm-rs read access for", p, e)))?;
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
                    reason: CRD_VALIDATION,
                    message,
                    step: Some(p.index),
                });
                Ok(())
            }
            Err(e) => Err(failed(e)),
        }
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
}
