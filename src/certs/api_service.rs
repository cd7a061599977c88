//! An aggregated API server's serving certificate kept by olm-rs itself (the package API,
//! docs/packagemanifests.md §9; docs/certificates.md): the Secret `<service>-cert` created when
//! missing and re-issued when due ([`super::plan_certs`]), and the CA set as the `caBundle` of
//! the APIService that points at the Service — never of one pointing elsewhere. Pure but for
//! the randomness of a new key: the Secret, the APIService and the time come in as values; the
//! caller (`package_server::cert_keeper`) observes them and carries the writes out.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::json;

use crate::k8s::effects::{Body, Effects, Write};
use crate::k8s::write::ObjectKey;

use super::{CertError, CertSecretData, RotationReason, SECRET_TYPE_TLS, ServiceName, plan_certs};

/// What to do about the APIService (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiServiceAction {
    /// None exists (the chart's is turned off): nothing to keep.
    Absent,
    /// It points at another Service (OLM's packageserver): report, never touch.
    Foreign {
        service: String,
    },
    UpToDate,
    /// Ours, with another (or no) caBundle: set it, at this resourceVersion.
    SetCaBundle {
        resource_version: Option<String>,
    },
}

pub fn apiservice_action(
    existing: Option<&APIService>,
    ours: &ServiceName,
    ca_pem: &[u8],
) -> ApiServiceAction {
    let Some(existing) = existing else {
        return ApiServiceAction::Absent;
    };
    let spec = existing.spec.as_ref();
    let service = spec.and_then(|s| s.service.as_ref());
    let points_at_us = service.is_some_and(|s| {
        s.name.as_deref() == Some(ours.service())
            && s.namespace.as_deref() == Some(ours.namespace())
    });
    if !points_at_us {
        return ApiServiceAction::Foreign {
            service: service
                .map(|s| {
                    format!(
                        "{}/{}",
                        s.namespace.as_deref().unwrap_or(""),
                        s.name.as_deref().unwrap_or("")
                    )
                })
                .unwrap_or_else(|| "no Service (served locally)".to_owned()),
        };
    }
    if spec
        .and_then(|s| s.ca_bundle.as_ref())
        .map(|b| b.0.as_slice())
        == Some(ca_pem)
    {
        ApiServiceAction::UpToDate
    } else {
        ApiServiceAction::SetCaBundle {
            resource_version: existing.metadata.resource_version.clone(),
        }
    }
}

/// What one pass does with the certificate, decided from the Secret, the APIService and the
/// time.
#[derive(Debug)]
pub struct ServingDecision {
    /// The Secret's creation or re-issue, when its certificate is missing or due.
    pub secret: Effects,
    /// The serving certificate and key once `secret` is written.
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
    /// Then the APIService's `caBundle`, when it is ours and out of date.
    pub apiservice: Effects,
    pub action: ApiServiceAction,
    /// Why a certificate is issued (`None`: the Secret's is kept).
    pub issued: Option<RotationReason>,
}

/// The certificate of the Service `service`, kept in `secret`, and the `caBundle` of the
/// APIService `apiservice_name` (pure but for the randomness of a new key).
pub fn decide(
    secret: Option<&Secret>,
    apiservice: Option<&APIService>,
    apiservice_name: &str,
    service: &ServiceName,
    now: jiff::Timestamp,
) -> Result<ServingDecision, CertError> {
    let name = service.secret_name();
    let data = secret
        .and_then(|s| s.data.as_ref())
        .map(CertSecretData::from_secret_data);
    let plan = plan_certs(data.as_ref(), service, now)?;
    let mut writes = Effects::default();
    if !plan.reused {
        writes.write(match secret {
            None => {
                let mut created = Secret {
                    type_: Some(SECRET_TYPE_TLS.to_owned()),
                    data: Some(plan.secret_data.to_secret_data()),
                    ..Secret::default()
                };
                created.metadata.name = Some(name.clone());
                created.metadata.namespace = Some(service.namespace().to_owned());
                created.metadata.labels = Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_owned(),
                    "olm-rs".to_owned(),
                )]));
                Write::create(created)
            }
            Some(old) => {
                use base64::Engine as _;
                let encoded: BTreeMap<String, String> = plan
                    .secret_data
                    .to_secret_data()
                    .into_iter()
                    .map(|(k, v)| (k, base64::engine::general_purpose::STANDARD.encode(v.0)))
                    .collect();
                Write::MergePatch {
                    key: ObjectKey::new::<Secret>(Some(service.namespace()), &name),
                    patch: Body::new(json!({"data": encoded})),
                    resource_version: old.metadata.resource_version.clone(),
                }
            }
        });
    }
    let (Some(cert), Some(key)) = (&plan.secret_data.tls_crt, &plan.secret_data.tls_key) else {
        return Err(CertError::IncompleteSecret(name));
    };
    let action = apiservice_action(apiservice, service, &plan.ca_pem);
    let mut bundle_write = Effects::default();
    if let ApiServiceAction::SetCaBundle { resource_version } = &action {
        use base64::Engine as _;
        let bundle = base64::engine::general_purpose::STANDARD.encode(&plan.ca_pem);
        bundle_write.write(Write::MergePatch {
            key: ObjectKey::new::<APIService>(None, apiservice_name),
            patch: Body::new(json!({"spec": {"caBundle": bundle}})),
            resource_version: resource_version.clone(),
        });
    }
    Ok(ServingDecision {
        secret: writes,
        cert: cert.clone(),
        key: key.clone(),
        apiservice: bundle_write,
        action,
        issued: plan.reissue_reason,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
        APIServiceSpec, ServiceReference,
    };

    /// The package API's APIService, its Service `ns/name`, with `ca` as its `caBundle`; also
    /// the package API keeper's tests' (package_server/cert_keeper.rs).
    pub(crate) fn apiservice(ns: &str, name: &str, ca: Option<&[u8]>) -> APIService {
        let mut a = APIService {
            spec: Some(APIServiceSpec {
                service: Some(ServiceReference {
                    namespace: Some(ns.into()),
                    name: Some(name.into()),
                    port: Some(443),
                }),
                ca_bundle: ca.map(|c| ByteString(c.to_vec())),
                group: Some("packages.operators.coreos.com".into()),
                version: Some("v1".into()),
                group_priority_minimum: 2000,
                version_priority: 15,
                ..APIServiceSpec::default()
            }),
            ..APIService::default()
        };
        a.metadata.resource_version = Some("7".into());
        a
    }

    #[test]
    fn only_our_apiservice_gets_our_ca() {
        let ours = ServiceName::new("olm-rs-packageserver", "olm-rs");
        assert_eq!(
            apiservice_action(None, &ours, b"CA"),
            ApiServiceAction::Absent
        );
        assert_eq!(
            apiservice_action(
                Some(&apiservice("olm", "packageserver-service", None)),
                &ours,
                b"CA"
            ),
            ApiServiceAction::Foreign {
                service: "olm/packageserver-service".into()
            }
        );
        assert_eq!(
            apiservice_action(
                Some(&apiservice("olm-rs", "olm-rs-packageserver", Some(b"old"))),
                &ours,
                b"CA"
            ),
            ApiServiceAction::SetCaBundle {
                resource_version: Some("7".into())
            }
        );
        assert_eq!(
            apiservice_action(
                Some(&apiservice("olm-rs", "olm-rs-packageserver", Some(b"CA"))),
                &ours,
                b"CA"
            ),
            ApiServiceAction::UpToDate
        );
    }

    #[test]
    fn a_broken_certificate_is_reissued_in_place_and_its_ca_set_on_our_apiservice() {
        let ours = ServiceName::new("olm-rs-packageserver", "olm-rs");
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let name = "v1.packages.operators.coreos.com";
        let first = decide(None, None, name, &ours, now).unwrap();
        assert_eq!(first.issued, Some(RotationReason::SecretMissing));
        assert!(matches!(
            first.secret.writes.as_slice(),
            [Write::Create { .. }]
        ));
        assert_eq!(first.action, ApiServiceAction::Absent);
        // A Secret that lost its CA entry: re-issued by a patch at the version read, and the
        // new CA goes to the APIService that points at us.
        let mut secret = Secret {
            data: Some(
                CertSecretData {
                    tls_crt: Some(first.cert.clone()),
                    tls_key: Some(first.key.clone()),
                    olm_ca_key: None,
                }
                .to_secret_data(),
            ),
            ..Secret::default()
        };
        secret.metadata.resource_version = Some("3".into());
        let api = apiservice("olm-rs", "olm-rs-packageserver", Some(b"old"));
        let due = decide(Some(&secret), Some(&api), name, &ours, now).unwrap();
        assert!(matches!(
            due.issued,
            Some(RotationReason::EntryMissing { key: "olmCAKey" })
        ));
        assert!(matches!(
            due.secret.writes.as_slice(),
            [Write::MergePatch { resource_version: Some(v), .. }] if v == "3"
        ));
        assert_eq!(
            due.action,
            ApiServiceAction::SetCaBundle {
                resource_version: Some("7".into())
            }
        );
        assert!(matches!(
            due.apiservice.writes.as_slice(),
            [Write::MergePatch { key, .. }] if key.name == name
        ));
    }
}
