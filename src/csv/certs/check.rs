//! Checks on a running CSV's certificates (docs/certificates.md §6.2, §7) and the APIService/webhook part
//! of the health evaluation (docs/csv-phases.md §8 steps 2–3).

use crate::api::keys::{WEBHOOK_DESCRIPTION_HASH_LABEL, WEBHOOK_GENERATE_NAME_LABEL};
use crate::api::{ClusterServiceVersion, WebhookAdmissionType};
use crate::certs::{OLM_CA_HASH_ANNOTATION, is_certificate_pem, olm_ca_hash};

use super::super::identity::{has_owner_labels, namespace};
use super::super::observed::Observed;
use super::super::ownership::api_service_adoptable;
use super::super::strategy::{certificate_deployments, deployment_strategy};
use super::install::description_hash;
use super::{service_of, webhooks};
use crate::certs::deployment::service_account_of;
use crate::certs::objects::{auth_delegator_binding_name, auth_reader_binding_name};

/// The first cert deployment whose Secret must be re-issued at `now`, with why
/// (docs/certificates.md §6.1; a missing Secret counts).
pub fn rotation_due(
    csv: &ClusterServiceVersion,
    seen: &Observed,
    now: jiff::Timestamp,
) -> Option<String> {
    // The CSV only names each cert deployment's Service and Secret; the question is
    // `certs::rotation_due`'s.
    certificate_deployments(csv).into_iter().find_map(|d| {
        let svc = service_of(csv, &d);
        let secret = seen.certs.secret(&svc.secret_name()).map(|s| &s.data);
        let why = crate::certs::rotation_due(secret, &svc, now)?;
        Some(format!("deployment {d}: {why}"))
    })
}

/// One failed check of docs/certificates.md §7.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiServiceIssue {
    pub message: String,
    /// False only for an APIService another owner holds: reinstalling cannot fix it.
    pub recoverable: bool,
}

/// docs/certificates.md §7 for every owned APIService (webhook-only deployments are not checked here).
pub fn api_service_issues(csv: &ClusterServiceVersion, seen: &Observed) -> Vec<ApiServiceIssue> {
    let owned = csv
        .spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.owned.as_ref());
    let mut issues = Vec::new();
    let mut issue = |message: String| {
        issues.push(ApiServiceIssue {
            message,
            recoverable: true,
        })
    };
    let strategy = deployment_strategy(csv).ok();
    let ns = namespace(csv);
    let mut unadoptable = Vec::new();
    for desc in owned.into_iter().flatten() {
        let api_name = desc.api_service_name();
        let deployment = desc.deployment_name.clone().unwrap_or_default();
        let svc = service_of(csv, &deployment);
        // 1.
        let Some(api) = seen.api_service(&api_name) else {
            issue(format!("APIService {api_name} not found"));
            continue;
        };
        if !api_service_adoptable(csv, api, seen) {
            unadoptable.push(format!(
                "APIService {api_name} is owned by another operator"
            ));
            continue;
        }
        let spec = api.spec.clone().unwrap_or_default();
        // 2.
        if seen.certs.service(svc.service()).is_none() {
            issue(format!("Service {}/{} not found", ns, svc.service()));
        }
        let target = spec.service.as_ref();
        if target.and_then(|s| s.name.as_deref()) != Some(svc.service())
            || target.and_then(|s| s.namespace.as_deref()) != Some(ns)
        {
            issue(format!(
                "APIService {api_name} does not point to Service {ns}/{}",
                svc.service()
            ));
        }
        // 3.
        let ca_bundle = spec.ca_bundle.map(|b| b.0).unwrap_or_default();
        if !is_certificate_pem(&ca_bundle) {
            issue(format!(
                "APIService {api_name}: caBundle is not a certificate"
            ));
            continue;
        }
        let ca_hash = olm_ca_hash(&ca_bundle);
        // 4. and 5.
        match seen.certs.secret(&svc.secret_name()) {
            None => issue(format!("Secret {ns}/{} not found", svc.secret_name())),
            Some(secret) => {
                if !secret
                    .data
                    .tls_crt
                    .as_deref()
                    .is_some_and(is_certificate_pem)
                {
                    issue(format!(
                        "Secret {ns}/{}: tls.crt is not a certificate",
                        svc.secret_name()
                    ));
                }
                if secret.ca_hash_annotation.as_deref() != Some(ca_hash.as_str()) {
                    issue(format!(
                        "Secret {ns}/{}: {OLM_CA_HASH_ANNOTATION} does not match the caBundle of APIService {api_name}",
                        svc.secret_name()
                    ));
                }
            }
        }
        // 6.
        match seen.deployment(&deployment) {
            None => issue(format!("Deployment {ns}/{deployment} not found")),
            Some(live) => {
                let template_hash = live
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.metadata.as_ref())
                    .and_then(|m| m.annotations.as_ref())
                    .and_then(|a| a.get(OLM_CA_HASH_ANNOTATION));
                if template_hash != Some(&ca_hash) {
                    issue(format!(
                        "Deployment {ns}/{deployment}: pod template {OLM_CA_HASH_ANNOTATION} does not match the caBundle of APIService {api_name}"
                    ));
                }
            }
        }
        // 7.
        let sa = strategy
            .as_ref()
            .and_then(|s| s.deployments.iter().find(|e| e.name == deployment))
            .map(|e| service_account_of(&e.spec));
        if let Some(sa) = &sa
            && seen.service_account(sa).is_none()
        {
            issue(format!("ServiceAccount {ns}/{sa} not found"));
        }
        // 8.
        let secret_name = svc.secret_name();
        let named = |n: Option<&String>, want: &str| n.map(String::as_str) == Some(want);
        if !seen
            .roles
            .iter()
            .any(|r| named(r.metadata.name.as_ref(), &secret_name))
        {
            issue(format!("Role {ns}/{secret_name} not found"));
        }
        if !seen
            .role_bindings
            .iter()
            .any(|r| named(r.metadata.name.as_ref(), &secret_name))
        {
            issue(format!("RoleBinding {ns}/{secret_name} not found"));
        }
        let delegator = auth_delegator_binding_name(&svc);
        if !seen
            .cluster_role_bindings
            .iter()
            .any(|r| named(r.metadata.name.as_ref(), &delegator))
        {
            issue(format!("ClusterRoleBinding {delegator} not found"));
        }
        let reader = auth_reader_binding_name(&svc);
        if !seen
            .certs
            .auth_reader_bindings
            .iter()
            .any(|r| named(r.metadata.name.as_ref(), &reader))
        {
            issue(format!("RoleBinding kube-system/{reader} not found"));
        }
    }
    issues.extend(unadoptable.into_iter().map(|message| ApiServiceIssue {
        message,
        recoverable: false,
    }));
    issues
}

/// The APIService and webhook part of "is it installed?" (docs/csv-phases.md §8 steps 2–3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertHealth {
    Healthy,
    /// An owned APIService is missing or not `Available`.
    ApiServicesNotReady(String),
    /// A webhook configuration or CRD conversion is missing.
    WebhooksMissing(String),
    /// A webhook configuration is there but was made for another description: reinstall.
    WebhookOutdated(String),
}

pub fn cert_health(csv: &ClusterServiceVersion, seen: &Observed) -> CertHealth {
    let owned = csv
        .spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.owned.as_ref());
    for desc in owned.into_iter().flatten() {
        let api_name = desc.api_service_name();
        let available = seen.api_service(&api_name).is_some_and(|api| {
            api.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "Available" && c.status == "True")
        });
        if !available {
            return CertHealth::ApiServicesNotReady(format!(
                "APIService {api_name} is not available"
            ));
        }
    }
    for desc in webhooks(csv) {
        if desc.type_ == WebhookAdmissionType::ConversionWebhook {
            for crd in desc.conversion_crds.iter().flatten() {
                let wired = seen.crd(crd).is_some_and(|c| {
                    c.spec.conversion.as_ref().is_some_and(|conv| {
                        conv.strategy == "Webhook"
                            && conv
                                .webhook
                                .as_ref()
                                .and_then(|w| w.client_config.as_ref())
                                .and_then(|c| c.ca_bundle.as_ref())
                                .is_some_and(|b| !b.0.is_empty())
                    })
                });
                if !wired {
                    return CertHealth::WebhooksMissing(format!(
                        "CRD {crd} has no conversion webhook"
                    ));
                }
            }
            continue;
        }
        let metas: Vec<_> = if desc.type_ == WebhookAdmissionType::MutatingAdmissionWebhook {
            seen.certs
                .mutating_webhooks
                .iter()
                .map(|w| &w.metadata)
                .collect()
        } else {
            seen.certs
                .validating_webhooks
                .iter()
                .map(|w| &w.metadata)
                .collect()
        };
        let mine: Vec<_> = metas
            .into_iter()
            .filter(|m| has_owner_labels(csv, m.labels.as_ref()))
            .filter(|m| {
                m.labels
                    .as_ref()
                    .and_then(|l| l.get(WEBHOOK_GENERATE_NAME_LABEL))
                    == Some(&desc.generate_name)
            })
            .collect();
        if mine.is_empty() {
            return CertHealth::WebhooksMissing(format!(
                "webhook configuration for {} not found",
                desc.generate_name
            ));
        }
        let Ok(want) = description_hash(desc) else {
            return CertHealth::WebhookOutdated(format!(
                "cannot hash webhook description {}",
                desc.generate_name
            ));
        };
        let current = mine.iter().any(|m| {
            m.labels
                .as_ref()
                .and_then(|l| l.get(WEBHOOK_DESCRIPTION_HASH_LABEL))
                == Some(&want)
        });
        if !current {
            return CertHealth::WebhookOutdated(format!(
                "webhook configuration for {} does not match its description",
                desc.generate_name
            ));
        }
    }
    CertHealth::Healthy
}

/// Which kind of webhook configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookKind {
    Validating,
    Mutating,
}

/// docs/csv-phases.md §8 step 3: this CSV's webhook configurations whose generate-name label matches no
/// current definition of their kind (a webhook dropped or renamed in the CSV).
pub fn stale_webhooks(csv: &ClusterServiceVersion, seen: &Observed) -> Vec<(WebhookKind, String)> {
    let wanted = |kind: WebhookKind| -> Vec<&str> {
        webhooks(csv)
            .filter(|w| match kind {
                WebhookKind::Mutating => w.type_ == WebhookAdmissionType::MutatingAdmissionWebhook,
                WebhookKind::Validating => {
                    w.type_ == WebhookAdmissionType::ValidatingAdmissionWebhook
                }
            })
            .map(|w| w.generate_name.as_str())
            .collect()
    };
    let stale =
        |kind: WebhookKind,
         metas: Vec<&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>| {
            let keep = wanted(kind);
            metas
                .into_iter()
                .filter(|m| has_owner_labels(csv, m.labels.as_ref()))
                .filter(|m| {
                    let generated = m
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(WEBHOOK_GENERATE_NAME_LABEL))
                        .map(String::as_str)
                        .unwrap_or_default();
                    !keep.contains(&generated)
                })
                .filter_map(|m| m.name.clone())
                .map(|n| (kind, n))
                .collect::<Vec<_>>()
        };
    let mut out = stale(
        WebhookKind::Validating,
        seen.certs
            .validating_webhooks
            .iter()
            .map(|w| &w.metadata)
            .collect(),
    );
    out.extend(stale(
        WebhookKind::Mutating,
        seen.certs
            .mutating_webhooks
            .iter()
            .map(|w| &w.metadata)
            .collect(),
    ));
    out
}

/// docs/csv-phases.md §10: CRDs whose conversion webhook goes with the CSV — every `conversionCRDs` entry,
/// unless a CSV in the namespace replaces this one (it takes the conversion over).
pub fn conversion_resets(csv: &ClusterServiceVersion, seen: &Observed) -> Vec<String> {
    let me = super::super::identity::name(csv);
    let replaced = seen
        .csvs
        .iter()
        .any(|c| super::super::identity::replaces(c) == Some(me));
    if replaced {
        return Vec::new();
    }
    let mut crds: Vec<String> = webhooks(csv)
        .filter(|w| w.type_ == WebhookAdmissionType::ConversionWebhook)
        .flat_map(|w| w.conversion_crds.iter().flatten().cloned())
        .filter(|crd| {
            seen.crd(crd).is_some_and(|c| {
                c.spec
                    .conversion
                    .as_ref()
                    .is_some_and(|conv| conv.strategy == "Webhook")
            })
        })
        .collect();
    crds.sort();
    crds.dedup();
    crds
}
