//! Member orders of core/v1 PodSpec and what hangs off it except volumes (docs/api-types.md §6.3
//! tables; k8s.io/api v0.32.0 declaration order for the types the tables leave out).

use super::schema::{BOOL, Field, INT, INT_OR_STR, QTY_MAP, STR, STR_MAP, STRS, Ty};
use super::schema::{nullable, opt, ptr, req};
use super::types_meta::LABEL_SELECTOR;
use super::types_volume::{
    CONFIG_MAP_KEY_SELECTOR, LOCAL_OBJECT_REFERENCE, OBJECT_FIELD_SELECTOR,
    RESOURCE_FIELD_SELECTOR, VOLUME,
};

pub(crate) const POD_SPEC: &[Field] = &[
    opt("volumes", Ty::List(&Ty::Struct(VOLUME))),
    opt("initContainers", Ty::List(&Ty::Struct(CONTAINER))),
    req("containers", Ty::List(&Ty::Struct(CONTAINER))),
    opt(
        "ephemeralContainers",
        Ty::List(&Ty::Struct(EPHEMERAL_CONTAINER)),
    ),
    opt("restartPolicy", STR),
    ptr("terminationGracePeriodSeconds", INT),
    ptr("activeDeadlineSeconds", INT),
    opt("dnsPolicy", STR),
    opt("nodeSelector", STR_MAP),
    opt("serviceAccountName", STR),
    opt("serviceAccount", STR),
    ptr("automountServiceAccountToken", BOOL),
    opt("nodeName", STR),
    opt("hostNetwork", BOOL),
    opt("hostPID", BOOL),
    opt("hostIPC", BOOL),
    ptr("shareProcessNamespace", BOOL),
    opt("securityContext", Ty::Struct(POD_SECURITY_CONTEXT)),
    opt(
        "imagePullSecrets",
        Ty::List(&Ty::Struct(LOCAL_OBJECT_REFERENCE)),
    ),
    opt("hostname", STR),
    opt("subdomain", STR),
    opt("affinity", Ty::Struct(AFFINITY)),
    opt("schedulerName", STR),
    opt("tolerations", Ty::List(&Ty::Struct(TOLERATION))),
    opt("hostAliases", Ty::List(&Ty::Struct(HOST_ALIAS))),
    opt("priorityClassName", STR),
    ptr("priority", INT),
    opt("dnsConfig", Ty::Struct(POD_DNS_CONFIG)),
    opt("readinessGates", Ty::List(&Ty::Struct(POD_READINESS_GATE))),
    ptr("runtimeClassName", STR),
    ptr("enableServiceLinks", BOOL),
    ptr("preemptionPolicy", STR),
    opt("overhead", QTY_MAP),
    opt(
        "topologySpreadConstraints",
        Ty::List(&Ty::Struct(TOPOLOGY_SPREAD_CONSTRAINT)),
    ),
    ptr("setHostnameAsFQDN", BOOL),
    opt("os", Ty::Struct(NAME_ONLY)),
    ptr("hostUsers", BOOL),
    opt("schedulingGates", Ty::List(&Ty::Struct(NAME_ONLY))),
    opt("resourceClaims", Ty::List(&Ty::Struct(POD_RESOURCE_CLAIM))),
    opt("resources", Ty::Struct(RESOURCE_REQUIREMENTS)),
];

/// The members Container and EphemeralContainerCommon share, in order, up to `tty`.
macro_rules! container_members {
    ($($extra:expr),* $(,)?) => {
        &[
            req("name", STR),
            opt("image", STR),
            opt("command", STRS),
            opt("args", STRS),
            opt("workingDir", STR),
            opt("ports", Ty::List(&Ty::Struct(CONTAINER_PORT))),
            opt("envFrom", Ty::List(&Ty::Struct(ENV_FROM_SOURCE))),
            opt("env", Ty::List(&Ty::Struct(ENV_VAR))),
            req("resources", Ty::Struct(RESOURCE_REQUIREMENTS)),
            opt("resizePolicy", Ty::List(&Ty::Struct(CONTAINER_RESIZE_POLICY))),
            ptr("restartPolicy", STR),
            opt("volumeMounts", Ty::List(&Ty::Struct(VOLUME_MOUNT))),
            opt("volumeDevices", Ty::List(&Ty::Struct(VOLUME_DEVICE))),
            opt("livenessProbe", Ty::Struct(PROBE)),
            opt("readinessProbe", Ty::Struct(PROBE)),
            opt("startupProbe", Ty::Struct(PROBE)),
            opt("lifecycle", Ty::Struct(LIFECYCLE)),
            opt("terminationMessagePath", STR),
            opt("terminationMessagePolicy", STR),
            opt("imagePullPolicy", STR),
            opt("securityContext", Ty::Struct(SECURITY_CONTEXT)),
            opt("stdin", BOOL),
            opt("stdinOnce", BOOL),
            opt("tty", BOOL),
            $($extra,)*
        ]
    };
}

pub(crate) const CONTAINER: &[Field] = container_members!();

const EPHEMERAL_CONTAINER: &[Field] = container_members!(opt("targetContainerName", STR));

const CONTAINER_PORT: &[Field] = &[
    opt("name", STR),
    opt("hostPort", INT),
    req("containerPort", INT),
    opt("protocol", STR),
    opt("hostIP", STR),
];

const ENV_FROM_SOURCE: &[Field] = &[
    opt("prefix", STR),
    opt("configMapRef", Ty::Struct(OPTIONAL_NAME_REF)),
    opt("secretRef", Ty::Struct(OPTIONAL_NAME_REF)),
];

/// ConfigMapEnvSource / SecretEnvSource: an inlined LocalObjectReference plus `optional`.
const OPTIONAL_NAME_REF: &[Field] = &[opt("name", STR), ptr("optional", BOOL)];

const ENV_VAR: &[Field] = &[
    req("name", STR),
    opt("value", STR),
    opt("valueFrom", Ty::Struct(ENV_VAR_SOURCE)),
];

const ENV_VAR_SOURCE: &[Field] = &[
    opt("fieldRef", Ty::Struct(OBJECT_FIELD_SELECTOR)),
    opt("resourceFieldRef", Ty::Struct(RESOURCE_FIELD_SELECTOR)),
    opt("configMapKeyRef", Ty::Struct(CONFIG_MAP_KEY_SELECTOR)),
    opt("secretKeyRef", Ty::Struct(CONFIG_MAP_KEY_SELECTOR)),
];

pub(crate) const RESOURCE_REQUIREMENTS: &[Field] = &[
    opt("limits", QTY_MAP),
    opt("requests", QTY_MAP),
    opt("claims", Ty::List(&Ty::Struct(RESOURCE_CLAIM))),
];

const RESOURCE_CLAIM: &[Field] = &[req("name", STR), opt("request", STR)];

const CONTAINER_RESIZE_POLICY: &[Field] = &[req("resourceName", STR), req("restartPolicy", STR)];

const VOLUME_MOUNT: &[Field] = &[
    req("name", STR),
    opt("readOnly", BOOL),
    ptr("recursiveReadOnly", STR),
    req("mountPath", STR),
    opt("subPath", STR),
    ptr("mountPropagation", STR),
    opt("subPathExpr", STR),
];

const VOLUME_DEVICE: &[Field] = &[req("name", STR), req("devicePath", STR)];

/// Probe with its inlined ProbeHandler.
const PROBE: &[Field] = &[
    opt("exec", Ty::Struct(EXEC_ACTION)),
    opt("httpGet", Ty::Struct(HTTP_GET_ACTION)),
    opt("tcpSocket", Ty::Struct(TCP_SOCKET_ACTION)),
    opt("grpc", Ty::Struct(GRPC_ACTION)),
    opt("initialDelaySeconds", INT),
    opt("timeoutSeconds", INT),
    opt("periodSeconds", INT),
    opt("successThreshold", INT),
    opt("failureThreshold", INT),
    ptr("terminationGracePeriodSeconds", INT),
];

const EXEC_ACTION: &[Field] = &[opt("command", STRS)];

const HTTP_GET_ACTION: &[Field] = &[
    opt("path", STR),
    req("port", INT_OR_STR),
    opt("host", STR),
    opt("scheme", STR),
    opt("httpHeaders", Ty::List(&Ty::Struct(HTTP_HEADER))),
];

const HTTP_HEADER: &[Field] = &[req("name", STR), req("value", STR)];

const TCP_SOCKET_ACTION: &[Field] = &[req("port", INT_OR_STR), opt("host", STR)];

/// `service` is a pointer without omitempty; the CSV CRD defaults it to `""` (docs/api-types.md §6.3).
const GRPC_ACTION: &[Field] = &[req("port", INT), nullable("service", STR)];

const LIFECYCLE: &[Field] = &[
    opt("postStart", Ty::Struct(LIFECYCLE_HANDLER)),
    opt("preStop", Ty::Struct(LIFECYCLE_HANDLER)),
];

const LIFECYCLE_HANDLER: &[Field] = &[
    opt("exec", Ty::Struct(EXEC_ACTION)),
    opt("httpGet", Ty::Struct(HTTP_GET_ACTION)),
    opt("tcpSocket", Ty::Struct(TCP_SOCKET_ACTION)),
    opt("sleep", Ty::Struct(SLEEP_ACTION)),
];

const SLEEP_ACTION: &[Field] = &[req("seconds", INT)];

const SECURITY_CONTEXT: &[Field] = &[
    opt("capabilities", Ty::Struct(CAPABILITIES)),
    ptr("privileged", BOOL),
    opt("seLinuxOptions", Ty::Struct(SE_LINUX_OPTIONS)),
    opt(
        "windowsOptions",
        Ty::Struct(WINDOWS_SECURITY_CONTEXT_OPTIONS),
    ),
    ptr("runAsUser", INT),
    ptr("runAsGroup", INT),
    ptr("runAsNonRoot", BOOL),
    ptr("readOnlyRootFilesystem", BOOL),
    ptr("allowPrivilegeEscalation", BOOL),
    ptr("procMount", STR),
    opt("seccompProfile", Ty::Struct(PROFILE)),
    opt("appArmorProfile", Ty::Struct(PROFILE)),
];

const CAPABILITIES: &[Field] = &[opt("add", STRS), opt("drop", STRS)];

const SE_LINUX_OPTIONS: &[Field] = &[
    opt("user", STR),
    opt("role", STR),
    opt("type", STR),
    opt("level", STR),
];

const WINDOWS_SECURITY_CONTEXT_OPTIONS: &[Field] = &[
    ptr("gmsaCredentialSpecName", STR),
    ptr("gmsaCredentialSpec", STR),
    ptr("runAsUserName", STR),
    ptr("hostProcess", BOOL),
];

/// SeccompProfile and AppArmorProfile share this shape.
const PROFILE: &[Field] = &[req("type", STR), ptr("localhostProfile", STR)];

const POD_SECURITY_CONTEXT: &[Field] = &[
    opt("seLinuxOptions", Ty::Struct(SE_LINUX_OPTIONS)),
    opt(
        "windowsOptions",
        Ty::Struct(WINDOWS_SECURITY_CONTEXT_OPTIONS),
    ),
    ptr("runAsUser", INT),
    ptr("runAsGroup", INT),
    ptr("runAsNonRoot", BOOL),
    opt("supplementalGroups", Ty::List(&Ty::Int)),
    ptr("supplementalGroupsPolicy", STR),
    ptr("fsGroup", INT),
    opt("sysctls", Ty::List(&Ty::Struct(SYSCTL))),
    ptr("fsGroupChangePolicy", STR),
    opt("seccompProfile", Ty::Struct(PROFILE)),
    opt("appArmorProfile", Ty::Struct(PROFILE)),
    ptr("seLinuxChangePolicy", STR),
];

const SYSCTL: &[Field] = &[req("name", STR), req("value", STR)];

const AFFINITY: &[Field] = &[
    opt("nodeAffinity", Ty::Struct(NODE_AFFINITY)),
    opt("podAffinity", Ty::Struct(POD_AFFINITY)),
    opt("podAntiAffinity", Ty::Struct(POD_AFFINITY)),
];

const NODE_AFFINITY: &[Field] = &[
    opt(
        "requiredDuringSchedulingIgnoredDuringExecution",
        Ty::Struct(NODE_SELECTOR),
    ),
    opt(
        "preferredDuringSchedulingIgnoredDuringExecution",
        Ty::List(&Ty::Struct(PREFERRED_SCHEDULING_TERM)),
    ),
];

const NODE_SELECTOR: &[Field] = &[req(
    "nodeSelectorTerms",
    Ty::List(&Ty::Struct(NODE_SELECTOR_TERM)),
)];

const NODE_SELECTOR_TERM: &[Field] = &[
    opt(
        "matchExpressions",
        Ty::List(&Ty::Struct(NODE_SELECTOR_REQUIREMENT)),
    ),
    opt(
        "matchFields",
        Ty::List(&Ty::Struct(NODE_SELECTOR_REQUIREMENT)),
    ),
];

const NODE_SELECTOR_REQUIREMENT: &[Field] =
    &[req("key", STR), req("operator", STR), opt("values", STRS)];

const PREFERRED_SCHEDULING_TERM: &[Field] = &[
    req("weight", INT),
    req("preference", Ty::Struct(NODE_SELECTOR_TERM)),
];

/// PodAffinity and PodAntiAffinity share this shape.
const POD_AFFINITY: &[Field] = &[
    opt(
        "requiredDuringSchedulingIgnoredDuringExecution",
        Ty::List(&Ty::Struct(POD_AFFINITY_TERM)),
    ),
    opt(
        "preferredDuringSchedulingIgnoredDuringExecution",
        Ty::List(&Ty::Struct(WEIGHTED_POD_AFFINITY_TERM)),
    ),
];

const POD_AFFINITY_TERM: &[Field] = &[
    opt("labelSelector", Ty::Struct(LABEL_SELECTOR)),
    opt("namespaces", STRS),
    req("topologyKey", STR),
    opt("namespaceSelector", Ty::Struct(LABEL_SELECTOR)),
    opt("matchLabelKeys", STRS),
    opt("mismatchLabelKeys", STRS),
];

const WEIGHTED_POD_AFFINITY_TERM: &[Field] = &[
    req("weight", INT),
    req("podAffinityTerm", Ty::Struct(POD_AFFINITY_TERM)),
];

const TOLERATION: &[Field] = &[
    opt("key", STR),
    opt("operator", STR),
    opt("value", STR),
    opt("effect", STR),
    ptr("tolerationSeconds", INT),
];

/// HostAlias: `ip` has no omitempty in v0.32 (docs/api-types.md §6.3: written as `""` either way).
const HOST_ALIAS: &[Field] = &[req("ip", STR), opt("hostnames", STRS)];

const POD_DNS_CONFIG: &[Field] = &[
    opt("nameservers", STRS),
    opt("searches", STRS),
    opt("options", Ty::List(&Ty::Struct(POD_DNS_CONFIG_OPTION))),
];

const POD_DNS_CONFIG_OPTION: &[Field] = &[opt("name", STR), ptr("value", STR)];

const POD_READINESS_GATE: &[Field] = &[req("conditionType", STR)];

const TOPOLOGY_SPREAD_CONSTRAINT: &[Field] = &[
    req("maxSkew", INT),
    req("topologyKey", STR),
    req("whenUnsatisfiable", STR),
    opt("labelSelector", Ty::Struct(LABEL_SELECTOR)),
    ptr("minDomains", INT),
    ptr("nodeAffinityPolicy", STR),
    ptr("nodeTaintsPolicy", STR),
    opt("matchLabelKeys", STRS),
];

/// PodOS and PodSchedulingGate: a required name only.
const NAME_ONLY: &[Field] = &[req("name", STR)];

const POD_RESOURCE_CLAIM: &[Field] = &[
    req("name", STR),
    ptr("resourceClaimName", STR),
    ptr("resourceClaimTemplateName", STR),
];
