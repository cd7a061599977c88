//! The objects a `grpc` + `image` CatalogSource runs its registry with — ServiceAccount,
//! NetworkPolicy, Service and Pod — built exactly as OLM builds them (docs/catalog.md §3.1, §3.2)
//! so that a cluster moving from OLM keeps working. Pure: the CatalogSource and the namespace's
//! labels in, desired objects out.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, GRPCAction,
    LocalObjectReference, Pod, PodSecurityContext, PodSpec, Probe, ResourceRequirements,
    SeccompProfile, SecurityContext, Service, ServiceAccount, ServicePort, ServiceSpec, Volume,
    VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};

use crate::api::keys::{
    CATALOG_PRIORITY_CLASS_ANNOTATION, CATALOG_SOURCE_LABEL, MANAGED_LABEL, MANAGED_LABEL_VALUE,
    POD_SPEC_HASH_LABEL, SAFE_TO_EVICT_ANNOTATION, SERVICE_SPEC_HASH_LABEL,
};
use crate::api::{CatalogSource, SecurityConfig};

use crate::quantity::{QuantityError, unsigned_value};

/// The registry gRPC port, everywhere: container, Service, probes.
pub const REGISTRY_PORT: i32 = 50051;
/// Container name of the registry pod.
pub const REGISTRY_CONTAINER: &str = "registry-server";
/// Namespace label that makes an unset `securityContextConfig` mean `restricted`.
pub const POD_SECURITY_ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
/// Pod annotation olm-rs records the catalog image digest in (the one the registry reported
/// when the pod was created), so a poll can tell whether the tag moved (docs/catalog.md §3.4).
pub const IMAGE_DIGEST_ANNOTATION: &str = "olm-rs/catalog-image-digest";
/// When olm-rs created a registry pod (RFC 3339, nanoseconds, from the controller's clock).
/// `creationTimestamp` has one-second precision, too coarse to tell which of two pods created
/// in the same second is the one being rolled to.
pub const CREATED_AT_ANNOTATION: &str = "olm-rs/created-at";

/// Settings of the controller that shape registry pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryPodOptions {
    /// `--set-workload-user-id`: under `restricted`, run as this user (OLM: 1001).
    pub workload_user_id: Option<i64>,
    /// Image with `/bin/opm`, serving extracted content (`grpcPodConfig.extractContent`).
    pub opm_image: String,
    /// Image with `/bin/copy-content` (`grpcPodConfig.extractContent`).
    pub util_image: String,
}

impl Default for RegistryPodOptions {
    fn default() -> Self {
        Self {
            workload_user_id: None,
            opm_image: "quay.io/operator-framework/opm:latest".to_owned(),
            util_image: "quay.io/operator-framework/olm:latest".to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryObjectsError {
    #[error("CatalogSource has no {field} yet (not read from the API server?)")]
    MissingMetadata { field: &'static str },
    #[error("CatalogSource {namespace}/{name}: spec.image is empty")]
    NoImage { namespace: String, name: String },
    #[error("CatalogSource {namespace}/{name}: spec.grpcPodConfig.memoryTarget: {source}")]
    MemoryTarget {
        namespace: String,
        name: String,
        source: MemoryTargetError,
    },
}

/// A `memoryTarget` that is not a memory quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{quantity:?} is not a memory quantity (e.g. 512Mi, 1Gi, 500M)")]
pub struct MemoryTargetError {
    pub quantity: String,
    #[source]
    pub cause: QuantityError,
}

/// `GOMEMLIMIT` for a memory target (docs/catalog.md §3.2): the byte count in the largest
/// binary unit that divides it exactly, with a `B` suffix (`512Mi` → `512MiB`, `1G` →
/// `1000000000B`).
pub fn go_mem_limit(quantity: &str) -> Result<String, MemoryTargetError> {
    let value = unsigned_value(quantity).map_err(|cause| MemoryTargetError {
        quantity: quantity.to_owned(),
        cause,
    })?;
    const UNITS: [(&str, u64); 6] = [
        ("Ei", 1 << 60),
        ("Pi", 1 << 50),
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if value >= size && value % size == 0 {
            return Ok(format!("{}{unit}B", value / size));
        }
    }
    Ok(format!("{value}B"))
}

/// Everything OLM creates for an image catalog, plus the hashes that tell whether a live object
/// is still what is wanted.
#[derive(Debug, Clone, PartialEq)]
pub struct RegistryObjects {
    pub service_account: ServiceAccount,
    pub network_policy: NetworkPolicy,
    pub service: Service,
    /// A pod *template*: it has `generateName`, no name.
    pub pod: Pod,
    pub pod_spec_hash: String,
    pub service_spec_hash: String,
}

/// Builds the desired registry objects for `catalog`. `namespace_labels` decide an unset
/// `securityContextConfig`; `sa_pull_secrets` are the `imagePullSecrets` of the live
/// ServiceAccount (OLM copies them from there, so secrets the cluster adds are kept; `None`
/// before the account exists → `spec.secrets`).
pub fn registry_objects(
    catalog: &CatalogSource,
    namespace_labels: &BTreeMap<String, String>,
    sa_pull_secrets: Option<&[LocalObjectReference]>,
    options: &RegistryPodOptions,
) -> Result<RegistryObjects, RegistryObjectsError> {
    let name = catalog
        .metadata
        .name
        .clone()
        .ok_or(RegistryObjectsError::MissingMetadata {
            field: "metadata.name",
        })?;
    let namespace =
        catalog
            .metadata
            .namespace
            .clone()
            .ok_or(RegistryObjectsError::MissingMetadata {
                field: "metadata.namespace",
            })?;
    let image = match catalog.spec.image.as_deref() {
        Some(image) if !image.is_empty() => image.to_owned(),
        _ => return Err(RegistryObjectsError::NoImage { namespace, name }),
    };
    let controller_ref = owner_reference(catalog, true, true)?;

    let spec_secrets: Vec<LocalObjectReference> = catalog
        .spec
        .secrets
        .iter()
        .flatten()
        .filter(|s| !s.is_empty())
        .map(|s| LocalObjectReference { name: s.clone() })
        .collect();
    let service_account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            labels: Some(labels([(MANAGED_LABEL, MANAGED_LABEL_VALUE)])),
            owner_references: Some(vec![controller_ref.clone()]),
            ..ObjectMeta::default()
        },
        image_pull_secrets: non_empty(spec_secrets.clone()),
        ..ServiceAccount::default()
    };

    let selector = labels([
        (CATALOG_SOURCE_LABEL, name.as_str()),
        (MANAGED_LABEL, MANAGED_LABEL_VALUE),
    ]);
    let network_policy = grpc_server_network_policy(&name, &namespace, &selector, &controller_ref);

    let service_spec = ServiceSpec {
        ports: Some(vec![ServicePort {
            name: Some("grpc".to_owned()),
            port: REGISTRY_PORT,
            target_port: Some(IntOrString::Int(REGISTRY_PORT)),
            ..ServicePort::default()
        }]),
        selector: Some(selector.clone()),
        ..ServiceSpec::default()
    };
    let service_spec_hash = hash_of(&service_spec);
    let service = Service {
        metadata: ObjectMeta {
            name: Some(service_name(&name)),
            namespace: Some(namespace.clone()),
            labels: Some(labels([
                (SERVICE_SPEC_HASH_LABEL, service_spec_hash.as_str()),
                (MANAGED_LABEL, MANAGED_LABEL_VALUE),
            ])),
            owner_references: Some(vec![owner_reference(catalog, false, false)?]),
            ..ObjectMeta::default()
        },
        spec: Some(service_spec),
        status: None,
    };

    let restricted = match catalog
        .spec
        .grpc_pod_config
        .as_ref()
        .and_then(|c| c.security_context_config.as_ref())
    {
        Some(SecurityConfig::Restricted) => true,
        Some(_) => false,
        None => namespace_labels
            .get(POD_SECURITY_ENFORCE_LABEL)
            .is_some_and(|v| v == "restricted"),
    };
    let pull_secrets = sa_pull_secrets.map_or(spec_secrets, <[_]>::to_vec);
    let pod_spec =
        pod_spec(catalog, &name, &image, restricted, pull_secrets, options).map_err(|source| {
            RegistryObjectsError::MemoryTarget {
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            }
        })?;
    let pod_spec_hash = hash_of(&pod_spec);

    let mut annotations = catalog.annotations().clone();
    annotations.insert(SAFE_TO_EVICT_ANNOTATION.to_owned(), "true".to_owned());
    let mut pod_labels = selector;
    pod_labels.insert(POD_SPEC_HASH_LABEL.to_owned(), pod_spec_hash.clone());
    let pod = Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: Some(namespace.clone()),
            labels: Some(pod_labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner_reference(catalog, true, false)?]),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec),
        status: None,
    };

    Ok(RegistryObjects {
        service_account,
        network_policy,
        service,
        pod,
        pod_spec_hash,
        service_spec_hash,
    })
}

/// The Service name OLM uses: the CatalogSource name with every `.` replaced by `-` (a
/// CatalogSource may have dots, a Service may not).
pub fn service_name(catalog_name: &str) -> String {
    catalog_name.replace('.', "-")
}

/// The address OLM dials for an image catalog: `<service>.<namespace>.svc:50051`.
pub fn service_address(catalog_name: &str, namespace: &str) -> String {
    format!(
        "{}.{namespace}.svc:{REGISTRY_PORT}",
        service_name(catalog_name)
    )
}

fn pod_spec(
    catalog: &CatalogSource,
    name: &str,
    image: &str,
    restricted: bool,
    pull_secrets: Vec<LocalObjectReference>,
    options: &RegistryPodOptions,
) -> Result<PodSpec, MemoryTargetError> {
    let config = catalog.spec.grpc_pod_config.clone().unwrap_or_default();
    let grpc_probe = |initial_delay: Option<i32>| Probe {
        grpc: Some(GRPCAction {
            port: REGISTRY_PORT,
            service: None,
        }),
        initial_delay_seconds: initial_delay,
        timeout_seconds: Some(5),
        ..Probe::default()
    };
    let mut requests = BTreeMap::from([
        ("cpu".to_owned(), Quantity("10m".to_owned())),
        ("memory".to_owned(), Quantity("50Mi".to_owned())),
    ]);
    let mut env = Vec::new();
    if let Some(target) = &config.memory_target {
        env.push(EnvVar {
            name: "GOMEMLIMIT".to_owned(),
            value: Some(go_mem_limit(&target.0)?),
            value_from: None,
        });
        requests.insert("memory".to_owned(), target.clone());
    }
    let mut container = Container {
        name: REGISTRY_CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        // A digest never changes, so the node's copy is good; a tag must be pulled afresh.
        image_pull_policy: Some(
            if image.contains('@') {
                "IfNotPresent"
            } else {
                "Always"
            }
            .to_owned(),
        ),
        ports: Some(vec![ContainerPort {
            name: Some("grpc".to_owned()),
            container_port: REGISTRY_PORT,
            ..ContainerPort::default()
        }]),
        readiness_probe: Some(grpc_probe(Some(5))),
        liveness_probe: Some(grpc_probe(Some(10))),
        startup_probe: Some(Probe {
            failure_threshold: Some(15),
            period_seconds: Some(10),
            ..grpc_probe(None)
        }),
        resources: Some(ResourceRequirements {
            requests: Some(requests),
            ..ResourceRequirements::default()
        }),
        security_context: Some(SecurityContext {
            read_only_root_filesystem: Some(false),
            ..SecurityContext::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        env: non_empty(env),
        ..Container::default()
    };

    let mut init_containers = Vec::new();
    let mut volumes = Vec::new();
    if let Some(extract) = &config.extract_content {
        extract_content_mode(
            &mut container,
            &mut init_containers,
            &mut volumes,
            image,
            &extract.catalog_dir,
            extract.cache_dir.as_deref(),
            options,
        );
    }

    let mut containers = vec![container];
    let mut security_context = None;
    if restricted {
        let mut pod_security = PodSecurityContext {
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                localhost_profile: None,
            }),
            ..PodSecurityContext::default()
        };
        if let Some(uid) = options.workload_user_id {
            pod_security.run_as_user = Some(uid);
            pod_security.run_as_non_root = Some(true);
        }
        security_context = Some(pod_security);
        for c in containers.iter_mut().chain(init_containers.iter_mut()) {
            let sc = c
                .security_context
                .get_or_insert_with(SecurityContext::default);
            sc.allow_privilege_escalation = Some(false);
            sc.capabilities = Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                add: None,
            });
        }
    }

    let mut priority_class_name = config.priority_class_name.clone();
    if let Some(from_annotation) = catalog
        .annotations()
        .get(CATALOG_PRIORITY_CLASS_ANNOTATION)
        .filter(|v| !v.is_empty())
    {
        priority_class_name = Some(from_annotation.clone());
    }

    Ok(PodSpec {
        containers: std::mem::take(&mut containers),
        init_containers: non_empty(init_containers),
        volumes: non_empty(volumes),
        node_selector: Some(
            config
                .node_selector
                .clone()
                .unwrap_or_else(|| labels([("kubernetes.io/os", "linux")])),
        ),
        tolerations: config.tolerations.clone(),
        affinity: config.affinity.clone(),
        priority_class_name,
        service_account_name: Some(name.to_owned()),
        image_pull_secrets: non_empty(pull_secrets),
        security_context,
        ..PodSpec::default()
    })
}

/// `grpcPodConfig.extractContent`: copy the catalog out of the image with a well-known binary,
/// then serve it with a well-known `opm` (docs/catalog.md §3.2).
fn extract_content_mode(
    container: &mut Container,
    init_containers: &mut Vec<Container>,
    volumes: &mut Vec<Volume>,
    catalog_image: &str,
    catalog_dir: &str,
    cache_dir: Option<&str>,
    options: &RegistryPodOptions,
) {
    let empty_dir = |name: &str| Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    let mount = |name: &str, path: &str| VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    };
    volumes.push(empty_dir("utilities"));
    volumes.push(empty_dir("catalog-content"));
    let cache_dir = cache_dir.filter(|d| !d.is_empty());
    if cache_dir.is_none() {
        volumes.push(empty_dir("tmpdir"));
    }

    init_containers.push(Container {
        name: "extract-utilities".to_owned(),
        image: Some(options.util_image.clone()),
        command: Some(vec![
            "cp".to_owned(),
            "/bin/copy-content".to_owned(),
            "/utilities/copy-content".to_owned(),
        ]),
        volume_mounts: Some(vec![mount("utilities", "/utilities")]),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Container::default()
    });
    let mut copy_args = vec![
        format!("--catalog.from={catalog_dir}"),
        "--catalog.to=/extracted-catalog/catalog".to_owned(),
    ];
    if let Some(cache) = cache_dir {
        copy_args.push(format!("--cache.from={cache}"));
        copy_args.push("--cache.to=/extracted-catalog/cache".to_owned());
    }
    init_containers.push(Container {
        name: "extract-content".to_owned(),
        image: Some(catalog_image.to_owned()),
        image_pull_policy: container.image_pull_policy.clone(),
        command: Some(vec!["/utilities/copy-content".to_owned()]),
        args: Some(copy_args),
        volume_mounts: Some(vec![
            mount("utilities", "/utilities"),
            mount("catalog-content", "/extracted-catalog"),
        ]),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Container::default()
    });

    let mut serve_args = vec!["serve".to_owned(), "/extracted-catalog/catalog".to_owned()];
    let mut mounts = vec![mount("catalog-content", "/extracted-catalog")];
    match cache_dir {
        Some(_) => serve_args.push("--cache-dir=/extracted-catalog/cache".to_owned()),
        None => mounts.push(mount("tmpdir", "/tmp/")),
    }
    container.image = Some(options.opm_image.clone());
    container.image_pull_policy = Some("IfNotPresent".to_owned());
    container.command = Some(vec!["/bin/opm".to_owned()]);
    container.args = Some(serve_args);
    container.volume_mounts = Some(mounts);
    if let Some(sc) = container.security_context.as_mut() {
        sc.read_only_root_filesystem = Some(true);
    }
}

fn grpc_server_network_policy(
    name: &str,
    namespace: &str,
    pod_selector: &BTreeMap<String, String>,
    owner: &OwnerReference,
) -> NetworkPolicy {
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(format!("{name}-grpc-server")),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels([
                (MANAGED_LABEL, MANAGED_LABEL_VALUE),
                (CATALOG_SOURCE_LABEL, name),
            ])),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(pod_selector.clone()),
                match_expressions: None,
            }),
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
            // gRPC in from anywhere; no egress rule at all: an image registry needs nothing
            // outside its pod (docs/catalog.md §3.1).
            ingress: Some(vec![NetworkPolicyIngressRule {
                ports: Some(vec![NetworkPolicyPort {
                    protocol: Some("TCP".to_owned()),
                    port: Some(IntOrString::Int(REGISTRY_PORT)),
                    end_port: None,
                }]),
                from: None,
            }]),
            egress: None,
        }),
    }
}

fn owner_reference(
    catalog: &CatalogSource,
    controller: bool,
    block_owner_deletion: bool,
) -> Result<OwnerReference, RegistryObjectsError> {
    Ok(OwnerReference {
        api_version: CatalogSource::api_version(&()).into_owned(),
        kind: CatalogSource::kind(&()).into_owned(),
        name: catalog
            .metadata
            .name
            .clone()
            .ok_or(RegistryObjectsError::MissingMetadata {
                field: "metadata.name",
            })?,
        uid: catalog
            .metadata
            .uid
            .clone()
            .ok_or(RegistryObjectsError::MissingMetadata {
                field: "metadata.uid",
            })?,
        controller: Some(controller),
        block_owner_deletion: Some(block_owner_deletion),
    })
}

/// A content hash usable as a label value. OLM's value (an FNV hash of Go's in-memory
/// representation) cannot be reproduced; pods OLM made are therefore replaced once on takeover.
fn hash_of(value: &impl serde::Serialize) -> String {
    // Serialising k8s-openapi types cannot fail: they hold only strings, numbers and maps with
    // string keys.
    let json = serde_json::to_vec(value).unwrap_or_default();
    let digest = Sha256::digest(&json);
    digest[..10].iter().map(|b| format!("{b:02x}")).collect()
}

fn labels<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

#[cfg(test)]
#[path = "registry_objects_tests.rs"]
mod tests;
