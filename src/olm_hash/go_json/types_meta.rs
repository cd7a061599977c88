//! Member orders of the apps/v1 and meta/v1 types around a pod template, and of the OLM types
//! whose JSON is hashed (docs/api-types.md §6.3; docs/install-plans.md §8; k8s.io/api and
//! k8s.io/apimachinery v0.32.0 declaration order for anything the spec tables leave out).

use super::schema::{BOOL, Field, INT, INT_OR_STR, RAW, STR, STR_MAP, STRS, TIME, Ty};
use super::schema::{nullable, opt, ptr, req};
use super::types_pod::POD_SPEC;

pub(crate) const DEPLOYMENT_SPEC: &[Field] = &[
    ptr("replicas", INT),
    nullable("selector", Ty::Struct(LABEL_SELECTOR)),
    req("template", Ty::Struct(POD_TEMPLATE_SPEC)),
    req("strategy", Ty::Struct(DEPLOYMENT_STRATEGY)),
    opt("minReadySeconds", INT),
    ptr("revisionHistoryLimit", INT),
    opt("paused", BOOL),
    ptr("progressDeadlineSeconds", INT),
];

const DEPLOYMENT_STRATEGY: &[Field] = &[
    opt("type", STR),
    opt("rollingUpdate", Ty::Struct(ROLLING_UPDATE_DEPLOYMENT)),
];

const ROLLING_UPDATE_DEPLOYMENT: &[Field] = &[
    ptr("maxUnavailable", INT_OR_STR),
    ptr("maxSurge", INT_OR_STR),
];

pub(crate) const POD_TEMPLATE_SPEC: &[Field] = &[
    req("metadata", Ty::Struct(OBJECT_META)),
    req("spec", Ty::Struct(POD_SPEC)),
];

pub(crate) const LABEL_SELECTOR: &[Field] = &[
    opt("matchLabels", STR_MAP),
    opt(
        "matchExpressions",
        Ty::List(&Ty::Struct(LABEL_SELECTOR_REQUIREMENT)),
    ),
];

const LABEL_SELECTOR_REQUIREMENT: &[Field] =
    &[req("key", STR), req("operator", STR), opt("values", STRS)];

/// metav1.ObjectMeta; `creationTimestamp` is a struct, so Go always writes it (§6.2 rule 8).
pub(crate) const OBJECT_META: &[Field] = &[
    opt("name", STR),
    opt("generateName", STR),
    opt("namespace", STR),
    opt("selfLink", STR),
    opt("uid", STR),
    opt("resourceVersion", STR),
    opt("generation", INT),
    req("creationTimestamp", TIME),
    opt("deletionTimestamp", TIME),
    ptr("deletionGracePeriodSeconds", INT),
    opt("labels", STR_MAP),
    opt("annotations", STR_MAP),
    opt("ownerReferences", Ty::List(&Ty::Struct(OWNER_REFERENCE))),
    opt("finalizers", STRS),
    opt("managedFields", Ty::List(&Ty::Struct(MANAGED_FIELDS_ENTRY))),
];

const OWNER_REFERENCE: &[Field] = &[
    req("apiVersion", STR),
    req("kind", STR),
    req("name", STR),
    req("uid", STR),
    ptr("controller", BOOL),
    ptr("blockOwnerDeletion", BOOL),
];

const MANAGED_FIELDS_ENTRY: &[Field] = &[
    opt("manager", STR),
    opt("operation", STR),
    opt("apiVersion", STR),
    opt("time", TIME),
    opt("fieldsType", STR),
    opt("fieldsV1", RAW),
    opt("subresource", STR),
];

/// OLM's WebhookDescription (docs/api-types.md §6, `olm.webhook-description-hash` row).
pub(crate) const WEBHOOK_DESCRIPTION: &[Field] = &[
    req("generateName", STR),
    req("type", STR),
    opt("deploymentName", STR),
    opt("containerPort", INT),
    ptr("targetPort", INT_OR_STR),
    opt("rules", Ty::List(&Ty::Struct(RULE_WITH_OPERATIONS))),
    ptr("failurePolicy", STR),
    ptr("matchPolicy", STR),
    opt("objectSelector", Ty::Struct(LABEL_SELECTOR)),
    nullable("sideEffects", STR),
    ptr("timeoutSeconds", INT),
    req("admissionReviewVersions", STRS),
    ptr("reinvocationPolicy", STR),
    ptr("webhookPath", STR),
    opt("conversionCRDs", STRS),
];

const RULE_WITH_OPERATIONS: &[Field] = &[
    opt("operations", STRS),
    opt("apiGroups", STRS),
    opt("apiVersions", STRS),
    opt("resources", STRS),
    ptr("scope", STR),
];

/// rbac/v1 PolicyRule (docs/install-plans.md §8 "Rule").
pub(crate) const POLICY_RULE: &[Field] = &[
    req("verbs", STRS),
    opt("apiGroups", STRS),
    opt("resources", STRS),
    opt("resourceNames", STRS),
    opt("nonResourceURLs", STRS),
];

pub(crate) const POLICY_RULES: Ty = Ty::List(&Ty::Struct(POLICY_RULE));

/// StrategyDeploymentPermissions (§8 "Permission").
const PERMISSION: &[Field] = &[
    req("serviceAccountName", STR),
    req("rules", Ty::List(&Ty::Struct(POLICY_RULE))),
];

/// §8 W_role: no namespace member at all.
pub(crate) const ROLE_NAME_INPUT: &[Field] =
    &[opt("name", STR), req("permission", Ty::Struct(PERMISSION))];

/// §8 W_cluster.
pub(crate) const CLUSTER_ROLE_NAME_INPUT: &[Field] = &[
    opt("name", STR),
    opt("namespace", STR),
    req("permission", Ty::Struct(PERMISSION)),
];
