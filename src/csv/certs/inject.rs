//! The CA consumers of a CSV (docs/certificates.md §4): APIServices, webhook configurations and CRD
//! conversion, each carrying the CA PEM of the Secret its deployment serves with.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, ServiceReference as WebhookService,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, ServiceReference as ConversionService,
    WebhookClientConfig as ConversionClientConfig, WebhookConversion,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
    APIService, APIServiceSpec, ServiceReference,
};

use crate::api::keys::{
    OPERATOR_GROUP_UID_LABEL_PREFIX, WEBHOOK_DESCRIPTION_HASH_LABEL, WEBHOOK_GENERATE_NAME_LABEL,
};
use crate::api::{ApiServiceDescription, ClusterServiceVersion, OperatorGroup, WebhookDescription};
use crate::certs::ServiceName;

use super::super::identity::{managed_owner_labels, namespace};

/// `groupPriorityMinimum` of a newly created APIService (docs/certificates.md §4.1).
pub const GROUP_PRIORITY_MINIMUM: i32 = 2000;
/// `versionPriority` of a newly created APIService (docs/certificates.md §4.1).
pub const VERSION_PRIORITY: i32 = 15;

/// The port an APIService is served on: `containerPort`, or 443 when absent or 0.
pub fn api_service_port(desc: &ApiServiceDescription) -> i32 {
    desc.container_port.filter(|p| *p != 0).unwrap_or(443)
}

/// docs/certificates.md §4.1. Priorities of an existing APIService are kept; `annotations` come from the
/// installing Subscription's `spec.config.annotations`.
pub fn api_service(
    csv: &ClusterServiceVersion,
    desc: &ApiServiceDescription,
    service: &ServiceName,
    ca_pem: &[u8],
    existing: Option<&APIService>,
    annotations: Option<&BTreeMap<String, String>>,
) -> APIService {
    let priorities = existing
        .and_then(|a| a.spec.as_ref())
        .map_or((GROUP_PRIORITY_MINIMUM, VERSION_PRIORITY), |s| {
            (s.group_priority_minimum, s.version_priority)
        });
    APIService {
        metadata: ObjectMeta {
            name: Some(desc.api_service_name()),
            labels: Some(managed_owner_labels(csv)),
            annotations: annotations.filter(|a| !a.is_empty()).cloned(),
            ..Default::default()
        },
        spec: Some(APIServiceSpec {
            group: Some(desc.group.clone()),
            version: Some(desc.version.clone()),
            group_priority_minimum: priorities.0,
            version_priority: priorities.1,
            service: Some(ServiceReference {
                namespace: Some(namespace(csv).to_owned()),
                name: Some(service.service().to_owned()),
                port: Some(api_service_port(desc)),
            }),
            ca_bundle: Some(ByteString(ca_pem.to_vec())),
            insecure_skip_tls_verify: None,
        }),
        status: None,
    }
}

/// docs/certificates.md §4.2 `namespaceSelector`: explicit targets → the group's namespace label; else
/// the group's own selector; else every namespace.
pub fn webhook_namespace_selector(group: &OperatorGroup) -> Option<LabelSelector> {
    let explicit = group
        .spec
        .target_namespaces
        .as_ref()
        .is_some_and(|t| !t.is_empty());
    if explicit {
        let uid = group.metadata.uid.clone().unwrap_or_default();
        return Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                format!("{OPERATOR_GROUP_UID_LABEL_PREFIX}{uid}"),
                String::new(),
            )])),
            match_expressions: None,
        });
    }
    group.spec.selector.clone()
}

/// Owner labels + `olm.webhook-description-generate-name`: how a CSV's configuration for one
/// description is found again (its name is generated).
pub fn webhook_lookup_labels(
    csv: &ClusterServiceVersion,
    desc: &WebhookDescription,
) -> BTreeMap<String, String> {
    let mut labels = super::super::identity::owner_labels(csv);
    labels.insert(
        WEBHOOK_GENERATE_NAME_LABEL.to_owned(),
        desc.generate_name.clone(),
    );
    labels
}

/// Lookup labels + `olm.managed` + `olm.webhook-description-hash`.
pub fn webhook_labels(
    csv: &ClusterServiceVersion,
    desc: &WebhookDescription,
    description_hash: &str,
) -> BTreeMap<String, String> {
    let mut labels = webhook_lookup_labels(csv, desc);
    labels.extend(managed_owner_labels(csv));
    labels.insert(
        WEBHOOK_DESCRIPTION_HASH_LABEL.to_owned(),
        description_hash.to_owned(),
    );
    labels
}

/// The client config of a webhook configuration for `desc`: its deployment's Service and CA.
pub fn webhook_client_config(
    csv: &ClusterServiceVersion,
    desc: &WebhookDescription,
    ca_pem: &[u8],
) -> WebhookClientConfig {
    WebhookClientConfig {
        service: Some(WebhookService {
            namespace: namespace(csv).to_owned(),
            // docs/certificates.md §1: dots become dashes here (olm-rs rejects dotted names before this).
            name: format!("{}-service", desc.domain_name()),
            path: desc.webhook_path.clone(),
            port: Some(desc.effective_container_port()),
        }),
        ca_bundle: Some(ByteString(ca_pem.to_vec())),
        url: None,
    }
}

fn webhook_meta(
    name: Option<&str>,
    desc: &WebhookDescription,
    labels: BTreeMap<String, String>,
) -> ObjectMeta {
    ObjectMeta {
        name: name.map(str::to_owned),
        generate_name: name.is_none().then(|| format!("{}-", desc.generate_name)),
        labels: Some(labels),
        ..Default::default()
    }
}

/// docs/certificates.md §4.2, validating: one webhook named `generateName`. `name` is the existing
/// configuration's; `None` asks the API server to generate one.
pub fn validating_configuration(
    desc: &WebhookDescription,
    name: Option<&str>,
    labels: BTreeMap<String, String>,
    client: WebhookClientConfig,
    namespace_selector: Option<LabelSelector>,
) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: webhook_meta(name, desc, labels),
        webhooks: Some(vec![ValidatingWebhook {
            name: desc.generate_name.clone(),
            client_config: client,
            rules: desc.rules.clone(),
            failure_policy: desc.failure_policy.clone(),
            match_policy: desc.match_policy.clone(),
            namespace_selector,
            object_selector: desc.object_selector.clone(),
            side_effects: desc.side_effects.clone(),
            timeout_seconds: desc.timeout_seconds,
            admission_review_versions: desc.admission_review_versions.clone(),
            match_conditions: None,
        }]),
    }
}

/// docs/certificates.md §4.2, mutating: as validating plus `reinvocationPolicy`.
pub fn mutating_configuration(
    desc: &WebhookDescription,
    name: Option<&str>,
    labels: BTreeMap<String, String>,
    client: WebhookClientConfig,
    namespace_selector: Option<LabelSelector>,
) -> MutatingWebhookConfiguration {
    MutatingWebhookConfiguration {
        metadata: webhook_meta(name, desc, labels),
        webhooks: Some(vec![MutatingWebhook {
            name: desc.generate_name.clone(),
            client_config: client,
            rules: desc.rules.clone(),
            failure_policy: desc.failure_policy.clone(),
            match_policy: desc.match_policy.clone(),
            namespace_selector,
            object_selector: desc.object_selector.clone(),
            side_effects: desc.side_effects.clone(),
            timeout_seconds: desc.timeout_seconds,
            admission_review_versions: desc.admission_review_versions.clone(),
            reinvocation_policy: desc.reinvocation_policy.clone(),
            match_conditions: None,
        }]),
    }
}

/// docs/certificates.md §4.3: `spec.conversion` of a CRD converted by `desc`.
pub fn crd_conversion(
    csv: &ClusterServiceVersion,
    desc: &WebhookDescription,
    ca_pem: &[u8],
) -> CustomResourceConversion {
    CustomResourceConversion {
        strategy: "Webhook".to_owned(),
        webhook: Some(WebhookConversion {
            client_config: Some(ConversionClientConfig {
                service: Some(ConversionService {
                    namespace: namespace(csv).to_owned(),
                    name: format!("{}-service", desc.domain_name()),
                    path: Some(desc.webhook_path.clone().unwrap_or_else(|| "/".to_owned())),
                    port: Some(desc.effective_container_port()),
                }),
                ca_bundle: Some(ByteString(ca_pem.to_vec())),
                url: None,
            }),
            conversion_review_versions: desc.admission_review_versions.clone(),
        }),
    }
}
