//! One execution pass over an InstallPlan's steps (subscription-installplan.md §7.3).
//!
//! The whole plan is checked before anything is written (manifests readable, kinds supported,
//! APIs served, CRD updates safe), then applied in this order: CRDs; wait until they are
//! Established (`WaitingForApi`); CSVs; everything else in plan order. Every write is
//! idempotent (create-if-absent or server-side apply of a fixed name), so a pass interrupted by
//! a crash is simply run again: nothing is duplicated.

use std::collections::HashMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::apis::{StepApi, step_api};
use crate::api::{Step, StepStatus};
use crate::k8s::MANAGER;
use crate::k8s::warnings::WarningLog;
use crate::plan::crd_safety::{CrdUpdateCheck, check_crd_update, versions_to_validate};
use crate::plan::kinds::{Scope, StepKind, supported_kind_names};
use crate::plan::object::StepObject;
use crate::plan::phase::PassOutcome;
use crate::plan::prepare::{
    OwnerCsv, merge_installed_alongside, merge_owner_references, prepare_object,
};

/// What a pass needs.
pub struct Pass<'a> {
    /// olm-rs's own client: CRDs are always applied with it (§10).
    pub admin: &'a Client,
    /// The client for every other step (olm-rs's, or the OperatorGroup's service account).
    pub steps: &'a Client,
    pub namespace: &'a str,
    /// Where both clients record the API server's warnings (`k8s::warnings::recording`).
    pub api_warnings: &'a WarningLog,
}

/// A Warning event to publish on the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanWarning {
    /// `CRDValidation`, or `AppliedWithWarnings` for warnings the API server returned.
    pub reason: &'static str,
    pub message: String,
    /// The step it concerns: the event's `fieldPath` is then `status.plan[<step>]`.
    pub step: Option<usize>,
}

/// The event reason for API-server warnings drawn by a step (subscription-installplan.md §7.3).
pub const APPLIED_WITH_WARNINGS: &str = "AppliedWithWarnings";

pub type Warnings = Vec<PlanWarning>;

/// OLM's words for the warnings one step drew.
fn applied_with_warnings(p: &Parsed, texts: &[String]) -> PlanWarning {
    let what = format!("({} {:?})", p.object.kind, p.object.name);
    let message = if p.resolving.is_empty() {
        format!(
            "{} warning(s) generated during operator installation {what}: {}",
            texts.len(),
            texts.join(", ")
        )
    } else {
        format!(
            "{} warning(s) generated during installation of operator {:?} {what}: {}",
            texts.len(),
            p.resolving,
            texts.join(", ")
        )
    };
    PlanWarning {
        reason: APPLIED_WITH_WARNINGS,
        message,
        step: Some(p.index),
    }
}

struct Parsed {
    index: usize,
    kind: StepKind,
    object: StepObject,
    /// The CSV the step belongs to.
    resolving: String,
}

impl Pass<'_> {
    /// Runs one pass, updating each step's status in place.
    pub async fn run(&self, steps: &mut [Step], warnings: &mut Warnings) -> PassOutcome {
        let parsed = match parse(steps) {
            Ok(parsed) => parsed,
            Err(message) => {
                return PassOutcome::StepFailed {
                    message,
                    permanent: true,
                };
            }
        };
        let mut apis: HashMap<usize, StepApi> = HashMap::new();
        if let Err(outcome) = self.check(steps, &parsed, &mut apis, warnings).await {
            return outcome;
        }
        // CRDs first, then wait for them to be served.
        for p in parsed
            .iter()
            .filter(|p| p.kind == StepKind::CustomResourceDefinition)
        {
            if steps[p.index].status == StepStatus::Unknown
                || steps[p.index].status == StepStatus::NotPresent
            {
                self.api_warnings.take();
                let applied = self.apply_crd(p).await;
                self.note_api_warnings(p, warnings);
                match applied {
                    Ok(status) => steps[p.index].status = status,
                    Err(message) => return failed(message),
                }
            }
        }
        let mut waiting = false;
        for p in parsed
            .iter()
            .filter(|p| p.kind == StepKind::CustomResourceDefinition)
        {
            if steps[p.index].status == StepStatus::WaitingForApi {
                match self.established(&p.object.name).await {
                    Ok(true) => steps[p.index].status = StepStatus::Created,
                    Ok(false) => waiting = true,
                    Err(message) => return failed(message),
                }
            }
        }
        if waiting {
            return PassOutcome::WaitingForApi;
        }
        let mut owners: HashMap<String, OwnerCsv> = HashMap::new();
        let order = parsed
            .iter()
            .filter(|p| p.kind == StepKind::ClusterServiceVersion)
            .chain(parsed.iter().filter(|p| {
                p.kind != StepKind::ClusterServiceVersion
                    && p.kind != StepKind::CustomResourceDefinition
            }));
        for p in order {
            if matches!(
                steps[p.index].status,
                StepStatus::Created | StepStatus::Present
            ) {
                continue;
            }
            let Some(api) = apis.get(&p.index) else {
                return failed(format!(
                    "no API resolved for step {} ({} {})",
                    p.index, p.object.kind, p.object.name
                ));
            };
            self.api_warnings.take();
            let applied = self.apply(p, api, &mut owners).await;
            self.note_api_warnings(p, warnings);
            match applied {
                Ok(status) => steps[p.index].status = status,
                Err(message) => return failed(message),
            }
        }
        PassOutcome::Done
    }

    /// Turns the warnings the API server returned while applying step `p` into an event.
    fn note_api_warnings(&self, p: &Parsed, warnings: &mut Warnings) {
        let mut texts = self.api_warnings.take();
        // A step reads before it writes, and both draw the same warning: say it once.
        let mut seen = std::collections::HashSet::new();
        texts.retain(|t| seen.insert(t.clone()));
        if !texts.is_empty() {
            warnings.push(applied_with_warnings(p, &texts));
        }
    }

    /// Everything that can be known before writing: APIs exist and CRD updates are safe.
    async fn check(
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

    async fn apply_crd(&self, p: &Parsed) -> Result<StepStatus, String> {
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
                match crds.create(&PostParams::default(), &crd).await {
                    Ok(_) => Ok(StepStatus::WaitingForApi),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(StepStatus::WaitingForApi),
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

    async fn csv_names(&self) -> Result<Vec<String>, String> {
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

    async fn established(&self, name: &str) -> Result<bool, String> {
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

    async fn apply(
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
            return match resources.create(&PostParams::default(), &object).await {
                Ok(_) => Ok(StepStatus::Created),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(StepStatus::Present),
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

fn csv_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "ClusterServiceVersion"),
        "clusterserviceversions",
    )
}

fn strip_status(object: &mut Value) {
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
}

fn failed(message: String) -> PassOutcome {
    PassOutcome::StepFailed {
        message,
        permanent: false,
    }
}

fn api_error(action: &str, p: &Parsed, error: &kube::Error) -> String {
    let detail = match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    };
    format!(
        "error {action} {} {}: {detail}",
        StepKind::manifest_kind(&p.object.kind),
        p.object.name
    )
}

/// Reads every step; an unsupported kind or unreadable manifest makes the plan unusable.
fn parse(steps: &mut [Step]) -> Result<Vec<Parsed>, String> {
    let mut out = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter_mut().enumerate() {
        let r = &step.resource;
        let Some(kind) = StepKind::of(&r.kind) else {
            step.status = StepStatus::UnsupportedResource;
            return Err(format!(
                "the InstallPlan contains invalid data: step {index} ({} {} of {}) has a kind olm-rs does not install; supported kinds: {}",
                r.kind,
                r.name,
                step.resolving,
                supported_kind_names().join(", ")
            ));
        };
        let manifest: Value = r
            .manifest
            .as_deref()
            .ok_or_else(|| format!("the InstallPlan contains invalid data: step {index} ({} {}) has no manifest", r.kind, r.name))
            .and_then(|m| serde_json::from_str(m).map_err(|e| format!("the InstallPlan contains invalid data: step {index} ({} {}): manifest is not JSON: {e}", r.kind, r.name)))?;
        if manifest.get("catalogSourceName").is_some()
            && manifest.get("kind").and_then(Value::as_str) == Some("ConfigMap")
            && r.kind != "ConfigMap"
        {
            return Err(format!(
                "step {index} ({} {}) refers to an unpacked bundle ConfigMap; olm-rs does not read unpacked bundle images yet",
                r.kind, r.name
            ));
        }
        out.push(Parsed {
            index,
            kind,
            object: StepObject {
                group: r.group.clone(),
                version: r.version.clone(),
                kind: r.kind.clone(),
                name: r.name.clone(),
                manifest,
            },
            resolving: step.resolving.clone(),
        });
    }
    Ok(out)
}
