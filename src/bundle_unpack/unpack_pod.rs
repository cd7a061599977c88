//! The unpack pod: how a bundle image the controller cannot pull itself is unpacked by the node
//! (docs/bundle-images.md, "When only the node can pull"). As OLM's unpack Job does, a pod in
//! the CatalogSource's namespace runs the bundle image, pulled by the kubelet with the node's mirrors, resolver, trust store and
//! credentials plus the catalog's `spec.secrets`; an init container first copies olm-rs's own
//! binary (OLM copies its `cpb` util) into a shared volume, and the bundle container runs it to
//! write the bundle directories to its log ([`super::handback`]). Unlike OLM's Job, the pod
//! needs no ServiceAccount, Role or ConfigMap: it has no API access at all, and the controller
//! reads its log (so no 1 MiB ConfigMap limit either).
//!
//! Pure: the pod's spec, its name, and what its status says.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, LocalObjectReference, Pod, PodSecurityContext,
    PodSpec, ResourceRequirements, SeccompProfile, SecurityContext, Toleration, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use sha2::{Digest as _, Sha256};

use crate::api::keys::{BUNDLE_UNPACK_REF_LABEL, MANAGED_LABEL, MANAGED_LABEL_VALUE};

/// The container that runs the bundle image.
pub const BUNDLE_CONTAINER: &str = "bundle";
/// The init container that copies the extractor.
pub const UTIL_CONTAINER: &str = "util";
/// Where the extractor is copied to, in both containers.
pub const UTIL_DIR: &str = "/util";
/// The olm-rs binary in its image (the repository's Dockerfile).
pub const OLM_RS_BINARY: &str = "/usr/local/bin/olm-rs";
/// Annotation: the bundle image the pod unpacks (its name is a hash of it).
pub const IMAGE_ANNOTATION: &str = "olm-rs/bundle-image";
/// Annotation: why the controller could not pull the image itself.
pub const CAUSE_ANNOTATION: &str = "olm-rs/unpack-cause";
const MAX_CAUSE: usize = 1024;

/// What the controller's own build needs to run in another image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpackPodOptions {
    /// An image holding olm-rs at [`OLM_RS_BINARY`] (`--bundle-unpack-image`; the chart gives
    /// the controller's own).
    pub util_image: String,
    /// The file name of the dynamic loader when olm-rs is dynamically linked (a development
    /// build): the extractor then runs through the loader with the libraries copied beside
    /// it. `None` for the static release build.
    pub loader: Option<String>,
    /// `--set-workload-user-id`: the user the pod runs as (OLM: 1001).
    pub workload_user_id: Option<i64>,
}

/// OLM's name for everything of one bundle image's unpacking: the first 63 hex digits of the
/// sha256 of the image reference, as OLM names its unpack objects (docs/bundle-images.md).
pub fn unpack_pod_name(image: &str) -> String {
    let hex = format!("{:x}", Sha256::digest(image.as_bytes()));
    hex[..63].to_owned()
}

/// The pod that unpacks `image` for catalog `catalog_name` (uid `catalog_uid`) in `namespace`.
/// `pull_secrets` are the catalog's `spec.secrets`; `deadline` the lookup's remaining unpack
/// time (the pod's `activeDeadlineSeconds`); `cause` why the controller could not pull it.
pub struct UnpackPodRequest<'a> {
    pub namespace: &'a str,
    pub image: &'a str,
    pub catalog_name: &'a str,
    pub catalog_uid: &'a str,
    pub pull_secrets: &'a [String],
    pub deadline: Option<Duration>,
    pub cause: &'a str,
}

/// The unpack pod (OLM's Job pod, without the API access: §9.1's tolerations, node selector,
/// requests and restricted security settings).
pub fn unpack_pod(request: &UnpackPodRequest<'_>, options: &UnpackPodOptions) -> Pod {
    let name = unpack_pod_name(request.image);
    let labels = BTreeMap::from([
        (MANAGED_LABEL.to_owned(), MANAGED_LABEL_VALUE.to_owned()),
        (BUNDLE_UNPACK_REF_LABEL.to_owned(), name.clone()),
    ]);
    let mut cause: String = request.cause.chars().take(MAX_CAUSE).collect();
    if cause.len() < request.cause.len() {
        cause.push('…');
    }
    let annotations = BTreeMap::from([
        (IMAGE_ANNOTATION.to_owned(), request.image.to_owned()),
        (CAUSE_ANNOTATION.to_owned(), cause),
    ]);
    let util_mount = VolumeMount {
        name: "util".to_owned(),
        mount_path: UTIL_DIR.to_owned(),
        ..VolumeMount::default()
    };
    let requests = BTreeMap::from([
        ("cpu".to_owned(), Quantity("10m".to_owned())),
        ("memory".to_owned(), Quantity("50Mi".to_owned())),
    ]);
    let container = |name: &str, image: &str, command: Vec<String>, pull: Option<&str>| Container {
        name: name.to_owned(),
        image: Some(image.to_owned()),
        image_pull_policy: pull.map(str::to_owned),
        command: Some(command),
        volume_mounts: Some(vec![util_mount.clone()]),
        resources: Some(ResourceRequirements {
            requests: Some(requests.clone()),
            ..ResourceRequirements::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                add: None,
            }),
            read_only_root_filesystem: Some(true),
            ..SecurityContext::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Container::default()
    };
    let install = vec![
        OLM_RS_BINARY.to_owned(),
        "bundle-unpack".to_owned(),
        "install".to_owned(),
        UTIL_DIR.to_owned(),
    ];
    // A digest never changes, so the node's copy is good; a tag is pulled afresh (OLM's rule).
    let pull = if request.image.contains('@') {
        "IfNotPresent"
    } else {
        "Always"
    };
    let toleration =
        |key: &str, operator: &str, effect: Option<&str>, value: Option<&str>| Toleration {
            key: Some(key.to_owned()),
            operator: Some(operator.to_owned()),
            effect: effect.map(str::to_owned),
            value: value.map(str::to_owned),
            toleration_seconds: (effect == Some("NoExecute")).then_some(120),
        };
    let mut tolerations: Vec<Toleration> = ["amd64", "arm64", "ppc64le", "s390x"]
        .into_iter()
        .map(|arch| toleration("kubernetes.io/arch", "Equal", None, Some(arch)))
        .collect();
    tolerations.push(toleration(
        "node-role.kubernetes.io/master",
        "Exists",
        Some("NoSchedule"),
        None,
    ));
    for key in [
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/not-ready",
    ] {
        tolerations.push(toleration(key, "Exists", Some("NoExecute"), None));
    }
    let deadline = request
        .deadline
        .map(|d| i64::try_from(d.as_secs().max(1)).unwrap_or(i64::MAX));
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(request.namespace.to_owned()),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "operators.coreos.com/v1alpha1".to_owned(),
                kind: "CatalogSource".to_owned(),
                name: request.catalog_name.to_owned(),
                uid: request.catalog_uid.to_owned(),
                controller: Some(false),
                block_owner_deletion: Some(false),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".to_owned()),
            active_deadline_seconds: deadline,
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            image_pull_secrets: Some(
                request
                    .pull_secrets
                    .iter()
                    .filter(|s| !s.is_empty())
                    .map(|s| LocalObjectReference { name: s.clone() })
                    .collect::<Vec<_>>(),
            )
            .filter(|s| !s.is_empty()),
            node_selector: Some(BTreeMap::from([(
                "kubernetes.io/os".to_owned(),
                "linux".to_owned(),
            )])),
            tolerations: Some(tolerations),
            security_context: Some(PodSecurityContext {
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_owned(),
                    localhost_profile: None,
                }),
                run_as_user: options.workload_user_id,
                run_as_non_root: options.workload_user_id.map(|_| true),
                ..PodSecurityContext::default()
            }),
            volumes: Some(vec![Volume {
                name: "util".to_owned(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Volume::default()
            }]),
            init_containers: Some(vec![container(
                UTIL_CONTAINER,
                &options.util_image,
                install,
                None,
            )]),
            containers: vec![container(
                BUNDLE_CONTAINER,
                request.image,
                emit_command(options),
                Some(pull),
            )],
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The bundle container's command: the copied extractor, through the copied loader when
/// olm-rs is dynamically linked (a bundle image has no C library of its own).
pub fn emit_command(options: &UnpackPodOptions) -> Vec<String> {
    let binary = format!("{UTIL_DIR}/olm-rs");
    let mut command = match &options.loader {
        Some(loader) => vec![
            format!("{UTIL_DIR}/lib/{loader}"),
            "--library-path".to_owned(),
            format!("{UTIL_DIR}/lib"),
            binary,
        ],
        None => vec![binary],
    };
    command.extend(["bundle-unpack".to_owned(), "emit".to_owned()]);
    command
}

/// Where an unpack pod stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodState {
    /// Not finished; `detail` names each container still waiting and why, in OLM's words
    /// (`Unpack pod(ns/name) container(c) is pending. Reason: …, Message: …`).
    Running { detail: String },
    /// The bundle container exited 0: its log holds the archive. `digest` is the manifest
    /// digest the kubelet pulled (from the container's `imageID`), when the runtime says.
    Succeeded { digest: Option<String> },
    /// It failed: the pod's (or container's) reason and message.
    Failed { reason: String, message: String },
}

/// What the pod's status says.
pub fn pod_state(pod: &Pod) -> PodState {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let containers = || {
        status
            .into_iter()
            .flat_map(|s| {
                s.init_container_statuses
                    .iter()
                    .flatten()
                    .chain(s.container_statuses.iter().flatten())
            })
            .collect::<Vec<_>>()
    };
    match phase {
        "Succeeded" => {
            let digest = containers()
                .into_iter()
                .find(|c| c.name == BUNDLE_CONTAINER)
                .and_then(|c| {
                    let id = c.image_id.as_str();
                    id.rsplit_once('@').map(|(_, d)| d.to_owned())
                })
                .filter(|d| d.starts_with("sha256:"));
            PodState::Succeeded { digest }
        }
        "Failed" => {
            let terminated = containers().into_iter().find_map(|c| {
                let t = c.state.as_ref()?.terminated.as_ref()?;
                (t.exit_code != 0).then(|| {
                    (
                        t.reason.clone().unwrap_or_else(|| "Error".to_owned()),
                        format!(
                            "container {} exited with code {}{}",
                            c.name,
                            t.exit_code,
                            t.message
                                .as_deref()
                                .map(|m| format!(": {}", m.trim()))
                                .unwrap_or_default()
                        ),
                    )
                })
            });
            let (reason, message) = terminated.unwrap_or_else(|| {
                (
                    status
                        .and_then(|s| s.reason.clone())
                        .unwrap_or_else(|| "Failed".to_owned()),
                    status
                        .and_then(|s| s.message.clone())
                        .unwrap_or_else(|| format!("unpack pod {namespace}/{name} failed")),
                )
            });
            PodState::Failed { reason, message }
        }
        _ => {
            let waiting: Vec<String> = containers()
                .into_iter()
                .filter_map(|c| {
                    let w = c.state.as_ref()?.waiting.as_ref()?;
                    let mut text = format!(
                        "Unpack pod({namespace}/{name}) container({}) is pending",
                        c.name
                    );
                    if let Some(reason) = &w.reason {
                        text.push_str(&format!(". Reason: {reason}"));
                        if let Some(message) = &w.message {
                            text.push_str(&format!(", Message: {message}"));
                        }
                    }
                    Some(text)
                })
                .collect();
            PodState::Running {
                detail: waiting.join(" | "),
            }
        }
    }
}

/// What to do about a lookup's unpack pod, as observed (`None`: there is none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodStep {
    /// None yet: create it.
    Create,
    /// One left failed by an earlier attempt (created before this attempt began): delete it
    /// and create a new one.
    Replace,
    /// Not done: `detail` says what it waits for (empty when nothing in particular).
    Wait { detail: String },
    /// Done: read its log; `digest` as in [`PodState::Succeeded`].
    Read { digest: Option<String> },
    /// It failed: the lookup fails with `reason` (`DeadlineExceeded` or `JobFailed`, OLM's
    /// Job reasons) and the pod's words; the pod is deleted.
    Fail {
        reason: &'static str,
        why: String,
        message: String,
    },
}

/// The step for `pod`, in a lookup attempt that began at `attempt_started` (seconds).
pub fn pod_step(pod: Option<&Pod>, attempt_started: Option<i64>) -> PodStep {
    use crate::api::install_plan::bundle_lookup_reason as reason;
    let Some(pod) = pod else {
        return PodStep::Create;
    };
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second());
    // Creation times have second precision.
    let stale = matches!((created, attempt_started), (Some(c), Some(s)) if c < s);
    match pod_state(pod) {
        PodState::Failed { .. } if stale => PodStep::Replace,
        PodState::Failed {
            reason: why,
            message,
        } => PodStep::Fail {
            reason: if why == "DeadlineExceeded" {
                reason::DEADLINE_EXCEEDED
            } else {
                reason::JOB_FAILED
            },
            why,
            message,
        },
        PodState::Running { detail } => PodStep::Wait { detail },
        PodState::Succeeded { digest } => PodStep::Read { digest },
    }
}

/// Which mode serves a lookup, and why, in its condition's and event's words.
pub fn pod_mode(image: &str, cause: &str, pod: &str) -> String {
    format!(
        "olm-rs could not pull {image} itself ({cause}); unpack pod {pod} unpacks it, its image \
         pulled by the kubelet with the node's mirrors and credentials"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, PodStatus,
    };

    fn options(loader: Option<&str>) -> UnpackPodOptions {
        UnpackPodOptions {
            util_image: "ghcr.io/example/olm-rs:v1".into(),
            loader: loader.map(str::to_owned),
            workload_user_id: Some(1001),
        }
    }

    fn request(image: &str) -> UnpackPodRequest<'_> {
        UnpackPodRequest {
            namespace: "olm",
            image,
            catalog_name: "cat",
            catalog_uid: "uid-1",
            pull_secrets: &[],
            deadline: Some(Duration::from_secs(600)),
            cause: "registry localhost:5001 cannot be reached",
        }
    }

    #[test]
    fn the_pod_is_named_and_shaped_as_olms_unpack_job_pod() {
        let image = "localhost:5001/op-bundle:v1";
        let pod = unpack_pod(&request(image), &options(None));
        let name = pod.metadata.name.clone().unwrap();
        assert_eq!(name.len(), 63);
        assert_eq!(
            name,
            format!("{:x}", Sha256::digest(image.as_bytes()))[..63]
        );
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[BUNDLE_UNPACK_REF_LABEL], name);
        assert_eq!(labels[MANAGED_LABEL], "true");
        let spec = pod.spec.unwrap();
        assert_eq!(spec.active_deadline_seconds, Some(600));
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(spec.automount_service_account_token, Some(false));
        let bundle = &spec.containers[0];
        assert_eq!(bundle.image.as_deref(), Some(image));
        assert_eq!(bundle.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(
            bundle.command.as_ref().unwrap(),
            &["/util/olm-rs", "bundle-unpack", "emit"]
        );
        let util = &spec.init_containers.as_ref().unwrap()[0];
        assert_eq!(util.image.as_deref(), Some("ghcr.io/example/olm-rs:v1"));
        assert_eq!(
            util.command.as_ref().unwrap(),
            &["/usr/local/bin/olm-rs", "bundle-unpack", "install", "/util"]
        );
        assert_eq!(spec.security_context.unwrap().run_as_user, Some(1001));
        let by_digest = unpack_pod(&request("localhost:5001/b@sha256:ab"), &options(None));
        assert_eq!(
            by_digest.spec.unwrap().containers[0]
                .image_pull_policy
                .as_deref(),
            Some("IfNotPresent")
        );
        assert_eq!(
            emit_command(&options(Some("ld-linux-x86-64.so.2"))),
            [
                "/util/lib/ld-linux-x86-64.so.2",
                "--library-path",
                "/util/lib",
                "/util/olm-rs",
                "bundle-unpack",
                "emit"
            ]
        );
    }

    fn with_status(phase: &str, statuses: Vec<ContainerStatus>) -> Pod {
        let mut pod = unpack_pod(&request("localhost:5001/b:v1"), &options(None));
        pod.status = Some(PodStatus {
            phase: Some(phase.into()),
            container_statuses: Some(statuses),
            ..PodStatus::default()
        });
        pod
    }

    fn status(state: ContainerState, image_id: &str) -> ContainerStatus {
        ContainerStatus {
            name: BUNDLE_CONTAINER.into(),
            image_id: image_id.into(),
            state: Some(state),
            ..ContainerStatus::default()
        }
    }

    #[test]
    fn the_pod_status_says_where_the_unpack_stands() {
        let name = unpack_pod_name("localhost:5001/b:v1");
        let waiting = ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ErrImagePull".into()),
                message: Some("not found".into()),
            }),
            ..ContainerState::default()
        };
        assert_eq!(
            pod_state(&with_status("Pending", vec![status(waiting, "")])),
            PodState::Running {
                detail: format!(
                    "Unpack pod(olm/{name}) container(bundle) is pending. Reason: ErrImagePull, Message: not found"
                )
            }
        );
        let done = ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 0,
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        };
        assert_eq!(
            pod_state(&with_status(
                "Succeeded",
                vec![status(done.clone(), "localhost:5001/b@sha256:12ab")]
            )),
            PodState::Succeeded {
                digest: Some("sha256:12ab".into())
            }
        );
        assert_eq!(
            pod_state(&with_status(
                "Succeeded",
                vec![status(done, "sha256:config-id")]
            )),
            PodState::Succeeded { digest: None },
            "an image id that is not a repository digest is not the manifest's"
        );
        let crashed = ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 1,
                reason: Some("Error".into()),
                message: Some("bundle archive too large\n".into()),
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        };
        assert_eq!(
            pod_state(&with_status("Failed", vec![status(crashed, "")])),
            PodState::Failed {
                reason: "Error".into(),
                message: "container bundle exited with code 1: bundle archive too large".into()
            }
        );
        let mut deadline = with_status("Failed", vec![]);
        let s = deadline.status.as_mut().unwrap();
        s.reason = Some("DeadlineExceeded".into());
        s.message = Some("Pod was active on the node longer than the specified deadline".into());
        assert_eq!(
            pod_state(&deadline),
            PodState::Failed {
                reason: "DeadlineExceeded".into(),
                message: "Pod was active on the node longer than the specified deadline".into()
            }
        );
    }

    #[test]
    fn what_to_do_about_the_pod() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        assert_eq!(pod_step(None, Some(100)), PodStep::Create);
        let mut failed = with_status("Failed", vec![]);
        let s = failed.status.as_mut().unwrap();
        s.reason = Some("DeadlineExceeded".into());
        s.message = Some("too long".into());
        failed.metadata.creation_timestamp = Some(Time(jiff::Timestamp::from_second(90).unwrap()));
        assert_eq!(
            pod_step(Some(&failed), Some(100)),
            PodStep::Replace,
            "left failed by an earlier attempt"
        );
        assert_eq!(
            pod_step(Some(&failed), Some(90)),
            PodStep::Fail {
                reason: "DeadlineExceeded",
                why: "DeadlineExceeded".into(),
                message: "too long".into()
            }
        );
        failed.status.as_mut().unwrap().reason = Some("Evicted".into());
        assert!(matches!(
            pod_step(Some(&failed), Some(90)),
            PodStep::Fail {
                reason: "JobFailed",
                ..
            }
        ));
        assert_eq!(
            pod_step(Some(&with_status("Running", vec![])), Some(90)),
            PodStep::Wait {
                detail: String::new()
            }
        );
    }
}
