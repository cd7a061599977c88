//! Which API groups are built in, and how the list and map fields of the kinds we patch merge.
//!
//! Kubernetes records this in struct tags of the Go API types: `patchStrategy`/`patchMergeKey`
//! (used by strategic merge patch) and `+listType`/`+listMapKey`/`+mapType`/`+structType`
//! (used by server-side apply, falling back to the patch tags). The table below carries the
//! markers of the fields in the kinds the sandbox serves; every field not listed merges
//! granularly when it is an object and is replaced wholesale when it is a list.

use super::GroupVersionKindRef;

/// API groups served by kube-apiserver itself (not by CRDs), for which strategic merge
/// patch is supported.
const BUILTIN_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "rbac.authorization.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "admissionregistration.k8s.io",
    "coordination.k8s.io",
    "events.k8s.io",
    "networking.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "certificates.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "resource.k8s.io",
];

/// Whether `group` is served natively by kube-apiserver.
pub fn is_builtin_group(group: &str) -> bool {
    BUILTIN_GROUPS.contains(&group)
}

/// The API types whose fields carry merge markers. `Any` is every type without markers below
/// it; `Custom`/`CustomAny` are custom resources, whose lists are atomic except `conditions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Any,
    /// A built-in kind without list markers outside metadata and `status.conditions`.
    Object,
    Custom,
    CustomAny,
    ObjectMeta,
    /// Deployment, ReplicaSet, StatefulSet, DaemonSet, Job.
    Workload,
    WorkloadSpec,
    PodTemplateSpec,
    Pod,
    PodSpec,
    PodStatus,
    Container,
    Service,
    ServiceSpec,
    ServiceAccount,
    Crd,
    CrdStatus,
    WebhookConfiguration,
    /// A built-in status whose `conditions` merge by `type`.
    ConditionsStatus,
}

/// One key field of an associative list, with the value the API server defaults it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyField {
    pub name: &'static str,
    pub default: Option<&'static str>,
}

const fn key(name: &'static str) -> KeyField {
    KeyField {
        name,
        default: None,
    }
}

const NAME: &[KeyField] = &[key("name")];
const UID: &[KeyField] = &[key("uid")];
const IP: &[KeyField] = &[key("ip")];
const TYPE: &[KeyField] = &[key("type")];
const MOUNT_PATH: &[KeyField] = &[key("mountPath")];
const DEVICE_PATH: &[KeyField] = &[key("devicePath")];
/// `protocol` defaults to TCP before the apply merge, so it is part of the key even when
/// omitted: managedFields show `k:{"containerPort":80,"protocol":"TCP"}`.
const PROTOCOL_TCP: KeyField = KeyField {
    name: "protocol",
    default: Some("TCP"),
};
const CONTAINER_PORT: &[KeyField] = &[key("containerPort"), PROTOCOL_TCP];
const SERVICE_PORT: &[KeyField] = &[key("port"), PROTOCOL_TCP];
const TOPOLOGY_SPREAD: &[KeyField] = &[key("topologyKey"), key("whenUnsatisfiable")];

/// How a list-valued field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// Replaced wholesale (`+listType=atomic`, no patch strategy).
    Atomic,
    /// A set of scalars (`+listType=set`, `patchStrategy:"merge"` on a scalar list).
    Set,
    /// An associative list. `smp_key` is the strategic-merge-patch merge key (`None` when
    /// strategic merge replaces the list although apply treats it as a map).
    Map {
        smp_key: Option<&'static str>,
        keys: &'static [KeyField],
    },
    /// Custom resources: associative by `type` when every element has a string `type`
    /// (the `+listType=map +listMapKey=type` convention of metav1.Condition), else atomic.
    ConditionsByType,
}

/// What the schema says about one value position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldSchema {
    /// The type of the value (of each element, for lists).
    pub ty: Ty,
    /// How the value merges when it is a list.
    pub list: ListKind,
    /// An object replaced wholesale (`+mapType=atomic`, `+structType=atomic`).
    pub atomic: bool,
}

impl FieldSchema {
    pub(crate) const fn of(ty: Ty) -> Self {
        FieldSchema {
            ty,
            list: ListKind::Atomic,
            atomic: false,
        }
    }
    const ANY: FieldSchema = FieldSchema::of(Ty::Any);
    const ATOMIC_MAP: FieldSchema = FieldSchema {
        ty: Ty::Any,
        list: ListKind::Atomic,
        atomic: true,
    };
    const SET: FieldSchema = FieldSchema {
        ty: Ty::Any,
        list: ListKind::Set,
        atomic: false,
    };
    const fn keyed(ty: Ty, smp_key: &'static str, keys: &'static [KeyField]) -> Self {
        FieldSchema {
            ty,
            list: ListKind::Map {
                smp_key: Some(smp_key),
                keys,
            },
            atomic: false,
        }
    }
    const fn apply_keyed(keys: &'static [KeyField]) -> Self {
        FieldSchema {
            ty: Ty::Any,
            list: ListKind::Map {
                smp_key: None,
                keys,
            },
            atomic: false,
        }
    }
}

/// The schema of the top level of an object of `kind`.
pub(crate) fn root(kind: &GroupVersionKindRef) -> FieldSchema {
    let ty = match (kind.group, kind.kind) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") | ("batch", "Job") => {
            Ty::Workload
        }
        ("", "Pod") => Ty::Pod,
        ("", "Service") => Ty::Service,
        ("", "ServiceAccount") => Ty::ServiceAccount,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Ty::Crd,
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
        ) => Ty::WebhookConfiguration,
        (group, _) if is_builtin_group(group) => Ty::Object,
        _ => Ty::Custom,
    };
    FieldSchema::of(ty)
}

/// The schema of field `name` of a value of type `parent`.
pub(crate) fn field(parent: Ty, name: &str) -> FieldSchema {
    use Ty::*;
    match (parent, name) {
        (
            Object | Custom | Workload | Pod | Service | ServiceAccount | Crd
            | WebhookConfiguration | PodTemplateSpec,
            "metadata",
        ) => FieldSchema::of(ObjectMeta),
        (ObjectMeta, "finalizers") => FieldSchema::SET,
        (ObjectMeta, "ownerReferences") => FieldSchema::keyed(Any, "uid", UID),

        (Workload, "spec") => FieldSchema::of(WorkloadSpec),
        (Object | Workload | Service, "status") => FieldSchema::of(ConditionsStatus),
        (ConditionsStatus, "conditions") => FieldSchema::keyed(Any, "type", TYPE),
        // metav1.LabelSelector is `+structType=atomic`.
        (WorkloadSpec, "selector") => FieldSchema::ATOMIC_MAP,
        (WorkloadSpec, "template") => FieldSchema::of(PodTemplateSpec),

        (PodTemplateSpec | Pod, "spec") => FieldSchema::of(PodSpec),
        (Pod, "status") => FieldSchema::of(PodStatus),
        (PodStatus, "conditions") => FieldSchema::keyed(Any, "type", TYPE),
        (PodStatus, "podIPs" | "hostIPs") => FieldSchema::keyed(Any, "ip", IP),
        (PodSpec, "containers" | "initContainers" | "ephemeralContainers") => {
            FieldSchema::keyed(Container, "name", NAME)
        }
        // volumes and resourceClaims are `merge,retainKeys`; `$retainKeys` is honoured
        // wherever a patch carries it.
        (PodSpec, "volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims") => {
            FieldSchema::keyed(Any, "name", NAME)
        }
        (PodSpec, "hostAliases") => FieldSchema::keyed(Any, "ip", IP),
        (PodSpec, "topologySpreadConstraints") => {
            FieldSchema::keyed(Any, "topologyKey", TOPOLOGY_SPREAD)
        }
        (PodSpec, "nodeSelector") => FieldSchema::ATOMIC_MAP,
        (Container, "ports") => FieldSchema::keyed(Any, "containerPort", CONTAINER_PORT),
        (Container, "env") => FieldSchema::keyed(Any, "name", NAME),
        (Container, "volumeMounts") => FieldSchema::keyed(Any, "mountPath", MOUNT_PATH),
        (Container, "volumeDevices") => FieldSchema::keyed(Any, "devicePath", DEVICE_PATH),

        (Service, "spec") => FieldSchema::of(ServiceSpec),
        (ServiceSpec, "ports") => FieldSchema::keyed(Any, "port", SERVICE_PORT),
        (ServiceSpec, "selector") => FieldSchema::ATOMIC_MAP,
        // ServiceAccount.imagePullSecrets has no patch strategy: atomic.
        (ServiceAccount, "secrets") => FieldSchema::keyed(Any, "name", NAME),

        (Crd, "status") => FieldSchema::of(CrdStatus),
        // `+listType=map +listMapKey=type` but no patch strategy: strategic merge replaces.
        (CrdStatus, "conditions") => FieldSchema::apply_keyed(TYPE),
        (WebhookConfiguration, "webhooks") => FieldSchema::keyed(Any, "name", NAME),

        (Custom | CustomAny, "conditions") => FieldSchema {
            ty: CustomAny,
            list: ListKind::ConditionsByType,
            atomic: false,
        },
        (Custom | CustomAny, _) => FieldSchema::of(CustomAny),
        _ => FieldSchema::ANY,
    }
}

/// The key fields of an associative list under the `ConditionsByType` rule.
pub(crate) const CONDITION_KEYS: &[KeyField] = TYPE;

#[cfg(test)]
mod tests {
    use super::*;

    fn gvk<'a>(group: &'a str, kind: &'a str) -> GroupVersionKindRef<'a> {
        GroupVersionKindRef {
            group,
            version: "v1",
            kind,
        }
    }

    #[test]
    fn deployment_containers_merge_by_name_and_ports_by_port_and_protocol() {
        let spec = field(root(&gvk("apps", "Deployment")).ty, "spec");
        let template = field(spec.ty, "template");
        let pod_spec = field(template.ty, "spec");
        let containers = field(pod_spec.ty, "containers");
        assert_eq!(
            containers.list,
            ListKind::Map {
                smp_key: Some("name"),
                keys: NAME
            }
        );
        let ports = field(containers.ty, "ports");
        assert_eq!(
            ports.list,
            ListKind::Map {
                smp_key: Some("containerPort"),
                keys: CONTAINER_PORT
            }
        );
        assert_eq!(field(pod_spec.ty, "tolerations").list, ListKind::Atomic);
        assert!(field(spec.ty, "selector").atomic);
    }

    #[test]
    fn custom_resources_are_not_builtin() {
        assert!(!is_builtin_group("operators.coreos.com"));
        assert!(!is_builtin_group("gateway.networking.k8s.io"));
        assert!(is_builtin_group("rbac.authorization.k8s.io"));
        assert_eq!(
            root(&gvk("operators.coreos.com", "Subscription")).ty,
            Ty::Custom
        );
    }

    #[test]
    fn metadata_lists_follow_object_meta_in_every_kind() {
        for kind in [
            gvk("", "ConfigMap"),
            gvk("operators.coreos.com", "InstallPlan"),
        ] {
            let meta = field(root(&kind).ty, "metadata");
            assert_eq!(field(meta.ty, "finalizers").list, ListKind::Set);
            assert!(matches!(
                field(meta.ty, "ownerReferences").list,
                ListKind::Map {
                    smp_key: Some("uid"),
                    ..
                }
            ));
        }
    }
}
