//! Annotation and label keys (and their fixed values) that OLM reads or writes.
//!
//! Spelled exactly as OLM spells them: docs/api-types.md §5,
//! §5. Keys that carry a computed suffix are given as prefixes.

// ---- On ClusterServiceVersions (and their copies / pod templates) --------------------------

/// Annotation: name of the OperatorGroup the CSV is a member of.
pub const OPERATOR_GROUP_ANNOTATION: &str = "olm.operatorGroup";
/// Annotation: namespace of that OperatorGroup (= the operator's namespace). A CSV whose
/// namespace differs from this value is a copy. (Older docs wrongly say
/// `olm.operatorGroupNamespace`.)
pub const OPERATOR_GROUP_NAMESPACE_ANNOTATION: &str = "olm.operatorNamespace";
/// Annotation: sorted, comma-joined target namespaces; `""` means all namespaces.
pub const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";
/// Label on copied CSVs and copied Roles/RoleBindings: namespace of the original CSV.
pub const COPIED_FROM_LABEL: &str = "olm.copiedFrom";
/// Annotation: semver range of versions this CSV may replace.
pub const SKIP_RANGE_ANNOTATION: &str = "olm.skipRange";
/// olm-rs, on a CSV a downgrade installed: the newer CSV it replaced, which still names this
/// one in its own `spec.replaces` (csv/replacement.rs decides between the two with it;
/// docs/upgrades.md).
pub const DOWNGRADED_FROM_ANNOTATION: &str = "olm-rs.io/downgraded-from";
/// olm-rs, on a Subscription: the version whose failed upgrade was rolled back; no upgrade to it
/// or older is planned while it stands (docs/upgrades.md §3).
pub const FAILED_UPGRADE_ANNOTATION: &str = "olm-rs.io/failed-upgrade";
/// Annotation: the CSV this one substitutes for.
pub const SUBSTITUTES_FOR_ANNOTATION: &str = "olm.substitutesFor";
/// Annotation (JSON `{"properties":[…]}`): bundle properties projected onto CSVs created by
/// InstallPlans.
pub const PROPERTIES_ANNOTATION: &str = "operatorframework.io/properties";
/// Label prefix of the API index labels `olm.api.<fnv64a hex of Kind.version.group>`.
pub const API_LABEL_PREFIX: &str = "olm.api.";
/// Value of an `olm.api.<hash>` label for an API the CSV provides.
pub const API_LABEL_PROVIDED: &str = "provided";
/// Value of an `olm.api.<hash>` label for an API the CSV requires.
pub const API_LABEL_REQUIRED: &str = "required";
/// Label prefix of the component label `operators.coreos.com/<package>.<namespace>`.
pub const COMPONENT_LABEL_PREFIX: &str = "operators.coreos.com/";

/// Author annotations with an OLM-defined meaning for UIs and catalogs (never read by the
/// olm-operator; copied into pod templates like every CSV annotation).
pub mod author {
    pub const ALM_EXAMPLES: &str = "alm-examples";
    pub const CAPABILITIES: &str = "capabilities";
    pub const CATEGORIES: &str = "categories";
    pub const CONTAINER_IMAGE: &str = "containerImage";
    pub const CREATED_AT: &str = "createdAt";
    pub const DESCRIPTION: &str = "description";
    pub const REPOSITORY: &str = "repository";
    pub const SUPPORT: &str = "support";
    pub const INTERNAL_OBJECTS: &str = "operators.operatorframework.io/internal-objects";
    pub const SUGGESTED_NAMESPACE: &str = "operatorframework.io/suggested-namespace";
    pub const INITIALIZATION_RESOURCE: &str = "operatorframework.io/initialization-resource";
    /// Label prefix `operatorframework.io/arch.<arch>`.
    pub const ARCH_LABEL_PREFIX: &str = "operatorframework.io/arch.";
    /// Label prefix `operatorframework.io/os.<os>`.
    pub const OS_LABEL_PREFIX: &str = "operatorframework.io/os.";
}

// ---- On OperatorGroups and Namespaces -------------------------------------------------------

/// Annotation on OperatorGroups: provided APIs as sorted, comma-separated `Kind.version.group`.
pub const PROVIDED_APIS_ANNOTATION: &str = "olm.providedAPIs";
/// Namespace label prefix `olm.operatorgroup.uid/<og-uid>` (value `""`).
pub const OPERATOR_GROUP_UID_LABEL_PREFIX: &str = "olm.operatorgroup.uid/";
/// OperatorGroup annotation: `"true"` excludes the global catalog namespace from resolution.
pub const EXCLUDE_GLOBAL_NAMESPACE_RESOLUTION_ANNOTATION: &str =
    "olm.operatorframework.io/exclude-global-namespace-resolution";
/// OperatorGroup annotation: Go duration, per-namespace bundle unpack Job deadline (`0` = none).
pub const BUNDLE_UNPACK_TIMEOUT_ANNOTATION: &str = "operatorframework.io/bundle-unpack-timeout";
/// OperatorGroup annotation: Go duration enabling re-creation of failed unpack Jobs.
pub const BUNDLE_UNPACK_MIN_RETRY_INTERVAL_ANNOTATION: &str =
    "operatorframework.io/bundle-unpack-min-retry-interval";
/// Label prefix of the aggregation labels `olm.opgroup.permissions/aggregate-to-<hash>-<suffix>`.
pub const OPGROUP_AGGREGATE_LABEL_PREFIX: &str = "olm.opgroup.permissions/aggregate-to-";

// ---- On objects OLM creates ------------------------------------------------------------------

/// Label on every object OLM creates; OLM's informers watch only objects carrying it.
pub const MANAGED_LABEL: &str = "olm.managed";
/// Value of [`MANAGED_LABEL`] on OLM-created objects.
pub const MANAGED_LABEL_VALUE: &str = "true";
/// Label: name of the logical owner (CSV or OperatorGroup) across scope boundaries.
pub const OWNER_LABEL: &str = "olm.owner";
/// Label: namespace of the logical owner.
pub const OWNER_NAMESPACE_LABEL: &str = "olm.owner.namespace";
/// Label: kind of the logical owner (`ClusterServiceVersion` or `OperatorGroup`).
pub const OWNER_KIND_LABEL: &str = "olm.owner.kind";
/// Label on Deployments: hash of the desired DeploymentSpec.
pub const DEPLOYMENT_SPEC_HASH_LABEL: &str = "olm.deployment-spec-hash";
/// Label on RBAC made from CSV permissions: content hash.
pub const PERMISSIONS_HASH_LABEL: &str = "olm.permissions.hash";
/// Label on webhook configurations: the `generateName` from the CSV.
pub const WEBHOOK_GENERATE_NAME_LABEL: &str = "olm.webhook-description-generate-name";
/// Label on webhook configurations: hash of the WebhookDescription.
pub const WEBHOOK_DESCRIPTION_HASH_LABEL: &str = "olm.webhook-description-hash";
/// Annotation on the cert Secret and pod template: SHA-256 hex of the CA PEM.
pub const CA_HASH_ANNOTATION: &str = "olmcahash";
/// Annotation prefix `operatorframework.io/installed-alongside-<fnv64a hex>`, value
/// `<namespace>/<csv>`.
pub const INSTALLED_ALONGSIDE_ANNOTATION_PREFIX: &str = "operatorframework.io/installed-alongside-";
/// kubectl's copy of the whole object as last applied: never copied into a copied CSV (docs/operator-groups.md
/// §10), never read by a decision, so dropped from cached objects.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

// ---- Catalog side ----------------------------------------------------------------------------

/// CatalogSource annotation: template for `spec.image` with `{kube_major_version}`,
/// `{kube_minor_version}`, `{kube_patch_version}` placeholders.
pub const CATALOG_IMAGE_TEMPLATE_ANNOTATION: &str = "olm.catalogImageTemplate";
/// CatalogSource annotation: priority class of the registry pod (wins over grpcPodConfig).
pub const CATALOG_PRIORITY_CLASS_ANNOTATION: &str = "operatorframework.io/priorityclass";
/// Label on registry pods: CatalogSource name (empty on poll "update" pods).
pub const CATALOG_SOURCE_LABEL: &str = "olm.catalogSource";
/// Label on poll "update" pods: CatalogSource name (empty on serving pods).
pub const CATALOG_UPDATE_LABEL: &str = "catalogsource.operators.coreos.com/update";
/// Label on registry pods: hash of the desired pod spec.
pub const POD_SPEC_HASH_LABEL: &str = "olm.pod-spec-hash";
/// Label on registry services: hash of the desired service spec.
pub const SERVICE_SPEC_HASH_LABEL: &str = "olm.service-spec-hash";
/// Label on configmap registry pods: resourceVersion of the source ConfigMap.
pub const CONFIGMAP_RESOURCE_VERSION_LABEL: &str = "olm.configMapResourceVersion";
/// Annotation on registry pods, value `"true"`.
pub const SAFE_TO_EVICT_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// Label on bundle unpack Jobs and their pods: the unpack ConfigMap name.
pub const BUNDLE_UNPACK_REF_LABEL: &str = "operatorframework.io/bundle-unpack-ref";
/// Label set by the Kubernetes Job controller on a Job's pods.
pub const JOB_NAME_LABEL: &str = "job-name";
/// Subscription annotation: the InstallPlan that created this (dependency) Subscription.
pub const GENERATED_BY_ANNOTATION: &str = "olm.generated-by";
