//! Member orders of core/v1 Volume (with its inlined VolumeSource) and the small reference
//! types shared with env vars (docs/api-types.md §6.3 "volume" row; k8s.io/api v0.32.0 declaration
//! order for the sources the table leaves out).

use super::schema::{BOOL, Field, INT, QTY, QTY_MAP, STR, STR_MAP, STRS, Ty};
use super::schema::{nullable, opt, ptr, req};
use super::types_meta::{LABEL_SELECTOR, OBJECT_META};

/// Volume: `name`, then the VolumeSource members (exactly one is set in a valid volume).
pub(crate) const VOLUME: &[Field] = &[
    req("name", STR),
    opt("hostPath", Ty::Struct(HOST_PATH)),
    opt("emptyDir", Ty::Struct(EMPTY_DIR)),
    opt("gcePersistentDisk", Ty::Struct(GCE_PERSISTENT_DISK)),
    opt("awsElasticBlockStore", Ty::Struct(AWS_ELASTIC_BLOCK_STORE)),
    opt("gitRepo", Ty::Struct(GIT_REPO)),
    opt("secret", Ty::Struct(SECRET_VOLUME)),
    opt("nfs", Ty::Struct(NFS)),
    opt("iscsi", Ty::Struct(ISCSI)),
    opt("glusterfs", Ty::Struct(GLUSTERFS)),
    opt("persistentVolumeClaim", Ty::Struct(PVC_VOLUME)),
    opt("rbd", Ty::Struct(RBD)),
    opt("flexVolume", Ty::Struct(FLEX)),
    opt("cinder", Ty::Struct(CINDER)),
    opt("cephfs", Ty::Struct(CEPHFS)),
    opt("flocker", Ty::Struct(FLOCKER)),
    opt("downwardAPI", Ty::Struct(DOWNWARD_API_VOLUME)),
    opt("fc", Ty::Struct(FC)),
    opt("azureFile", Ty::Struct(AZURE_FILE)),
    opt("configMap", Ty::Struct(CONFIG_MAP_VOLUME)),
    opt("vsphereVolume", Ty::Struct(VSPHERE)),
    opt("quobyte", Ty::Struct(QUOBYTE)),
    opt("azureDisk", Ty::Struct(AZURE_DISK)),
    opt("photonPersistentDisk", Ty::Struct(PHOTON)),
    opt("projected", Ty::Struct(PROJECTED)),
    opt("portworxVolume", Ty::Struct(PORTWORX)),
    opt("scaleIO", Ty::Struct(SCALE_IO)),
    opt("storageos", Ty::Struct(STORAGE_OS)),
    opt("csi", Ty::Struct(CSI)),
    opt("ephemeral", Ty::Struct(EPHEMERAL)),
    opt("image", Ty::Struct(IMAGE)),
];

/// LocalObjectReference: `name` has omitempty in v0.32.
pub(crate) const LOCAL_OBJECT_REFERENCE: &[Field] = &[opt("name", STR)];

const SECRET_REF: Ty = Ty::Struct(LOCAL_OBJECT_REFERENCE);

pub(crate) const OBJECT_FIELD_SELECTOR: &[Field] = &[opt("apiVersion", STR), req("fieldPath", STR)];

/// `divisor` is a Quantity value, so Go always writes it (`"0"` when unset).
pub(crate) const RESOURCE_FIELD_SELECTOR: &[Field] = &[
    opt("containerName", STR),
    req("resource", STR),
    req("divisor", QTY),
];

/// ConfigMapKeySelector and SecretKeySelector share this shape.
pub(crate) const CONFIG_MAP_KEY_SELECTOR: &[Field] =
    &[opt("name", STR), req("key", STR), ptr("optional", BOOL)];

const KEY_TO_PATH: &[Field] = &[req("key", STR), req("path", STR), ptr("mode", INT)];

const KEYS: Ty = Ty::List(&Ty::Struct(KEY_TO_PATH));

const HOST_PATH: &[Field] = &[req("path", STR), ptr("type", STR)];

const EMPTY_DIR: &[Field] = &[opt("medium", STR), ptr("sizeLimit", QTY)];

const GCE_PERSISTENT_DISK: &[Field] = &[
    req("pdName", STR),
    opt("fsType", STR),
    opt("partition", INT),
    opt("readOnly", BOOL),
];

const AWS_ELASTIC_BLOCK_STORE: &[Field] = &[
    req("volumeID", STR),
    opt("fsType", STR),
    opt("partition", INT),
    opt("readOnly", BOOL),
];

const GIT_REPO: &[Field] = &[
    req("repository", STR),
    opt("revision", STR),
    opt("directory", STR),
];

const SECRET_VOLUME: &[Field] = &[
    opt("secretName", STR),
    opt("items", KEYS),
    ptr("defaultMode", INT),
    ptr("optional", BOOL),
];

const NFS: &[Field] = &[req("server", STR), req("path", STR), opt("readOnly", BOOL)];

const ISCSI: &[Field] = &[
    req("targetPortal", STR),
    req("iqn", STR),
    req("lun", INT),
    opt("iscsiInterface", STR),
    opt("fsType", STR),
    opt("readOnly", BOOL),
    opt("portals", STRS),
    opt("chapAuthDiscovery", BOOL),
    opt("chapAuthSession", BOOL),
    opt("secretRef", SECRET_REF),
    ptr("initiatorName", STR),
];

const GLUSTERFS: &[Field] = &[
    req("endpoints", STR),
    req("path", STR),
    opt("readOnly", BOOL),
];

const PVC_VOLUME: &[Field] = &[req("claimName", STR), opt("readOnly", BOOL)];

const RBD: &[Field] = &[
    req("monitors", STRS),
    req("image", STR),
    opt("fsType", STR),
    opt("pool", STR),
    opt("user", STR),
    opt("keyring", STR),
    opt("secretRef", SECRET_REF),
    opt("readOnly", BOOL),
];

const FLEX: &[Field] = &[
    req("driver", STR),
    opt("fsType", STR),
    opt("secretRef", SECRET_REF),
    opt("readOnly", BOOL),
    opt("options", STR_MAP),
];

const CINDER: &[Field] = &[
    req("volumeID", STR),
    opt("fsType", STR),
    opt("readOnly", BOOL),
    opt("secretRef", SECRET_REF),
];

const CEPHFS: &[Field] = &[
    req("monitors", STRS),
    opt("path", STR),
    opt("user", STR),
    opt("secretFile", STR),
    opt("secretRef", SECRET_REF),
    opt("readOnly", BOOL),
];

const FLOCKER: &[Field] = &[opt("datasetName", STR), opt("datasetUUID", STR)];

const DOWNWARD_API_VOLUME: &[Field] = &[opt("items", DOWNWARD_API_FILES), ptr("defaultMode", INT)];

const DOWNWARD_API_FILES: Ty = Ty::List(&Ty::Struct(DOWNWARD_API_FILE));

const DOWNWARD_API_FILE: &[Field] = &[
    req("path", STR),
    opt("fieldRef", Ty::Struct(OBJECT_FIELD_SELECTOR)),
    opt("resourceFieldRef", Ty::Struct(RESOURCE_FIELD_SELECTOR)),
    ptr("mode", INT),
];

const FC: &[Field] = &[
    opt("targetWWNs", STRS),
    ptr("lun", INT),
    opt("fsType", STR),
    opt("readOnly", BOOL),
    opt("wwids", STRS),
];

const AZURE_FILE: &[Field] = &[
    req("secretName", STR),
    req("shareName", STR),
    opt("readOnly", BOOL),
];

const CONFIG_MAP_VOLUME: &[Field] = &[
    opt("name", STR),
    opt("items", KEYS),
    ptr("defaultMode", INT),
    ptr("optional", BOOL),
];

const VSPHERE: &[Field] = &[
    req("volumePath", STR),
    opt("fsType", STR),
    opt("storagePolicyName", STR),
    opt("storagePolicyID", STR),
];

const QUOBYTE: &[Field] = &[
    req("registry", STR),
    req("volume", STR),
    opt("readOnly", BOOL),
    opt("user", STR),
    opt("group", STR),
    opt("tenant", STR),
];

const AZURE_DISK: &[Field] = &[
    req("diskName", STR),
    req("diskURI", STR),
    ptr("cachingMode", STR),
    ptr("fsType", STR),
    ptr("readOnly", BOOL),
    ptr("kind", STR),
];

const PHOTON: &[Field] = &[req("pdID", STR), opt("fsType", STR)];

/// `sources` has no omitempty.
const PROJECTED: &[Field] = &[
    req("sources", Ty::List(&Ty::Struct(VOLUME_PROJECTION))),
    ptr("defaultMode", INT),
];

const VOLUME_PROJECTION: &[Field] = &[
    opt("secret", Ty::Struct(KEYS_PROJECTION)),
    opt("downwardAPI", Ty::Struct(DOWNWARD_API_PROJECTION)),
    opt("configMap", Ty::Struct(KEYS_PROJECTION)),
    opt(
        "serviceAccountToken",
        Ty::Struct(SERVICE_ACCOUNT_TOKEN_PROJECTION),
    ),
    opt(
        "clusterTrustBundle",
        Ty::Struct(CLUSTER_TRUST_BUNDLE_PROJECTION),
    ),
];

/// SecretProjection and ConfigMapProjection share this shape.
const KEYS_PROJECTION: &[Field] = &[opt("name", STR), opt("items", KEYS), ptr("optional", BOOL)];

const DOWNWARD_API_PROJECTION: &[Field] = &[opt("items", DOWNWARD_API_FILES)];

const SERVICE_ACCOUNT_TOKEN_PROJECTION: &[Field] = &[
    opt("audience", STR),
    ptr("expirationSeconds", INT),
    req("path", STR),
];

const CLUSTER_TRUST_BUNDLE_PROJECTION: &[Field] = &[
    ptr("name", STR),
    ptr("signerName", STR),
    opt("labelSelector", Ty::Struct(LABEL_SELECTOR)),
    ptr("optional", BOOL),
    req("path", STR),
];

const PORTWORX: &[Field] = &[
    req("volumeID", STR),
    opt("fsType", STR),
    opt("readOnly", BOOL),
];

/// `secretRef` is a pointer without omitempty.
const SCALE_IO: &[Field] = &[
    req("gateway", STR),
    req("system", STR),
    nullable("secretRef", SECRET_REF),
    opt("sslEnabled", BOOL),
    opt("protectionDomain", STR),
    opt("storagePool", STR),
    opt("storageMode", STR),
    opt("volumeName", STR),
    opt("fsType", STR),
    opt("readOnly", BOOL),
];

const STORAGE_OS: &[Field] = &[
    opt("volumeName", STR),
    opt("volumeNamespace", STR),
    opt("fsType", STR),
    opt("readOnly", BOOL),
    opt("secretRef", SECRET_REF),
];

const CSI: &[Field] = &[
    req("driver", STR),
    ptr("readOnly", BOOL),
    ptr("fsType", STR),
    opt("volumeAttributes", STR_MAP),
    opt("nodePublishSecretRef", SECRET_REF),
];

const EPHEMERAL: &[Field] = &[opt("volumeClaimTemplate", Ty::Struct(PVC_TEMPLATE))];

const PVC_TEMPLATE: &[Field] = &[
    req("metadata", Ty::Struct(OBJECT_META)),
    req("spec", Ty::Struct(PVC_SPEC)),
];

const PVC_SPEC: &[Field] = &[
    opt("accessModes", STRS),
    opt("selector", Ty::Struct(LABEL_SELECTOR)),
    req("resources", Ty::Struct(VOLUME_RESOURCE_REQUIREMENTS)),
    opt("volumeName", STR),
    ptr("storageClassName", STR),
    ptr("volumeMode", STR),
    opt("dataSource", Ty::Struct(TYPED_LOCAL_OBJECT_REFERENCE)),
    opt("dataSourceRef", Ty::Struct(TYPED_OBJECT_REFERENCE)),
    ptr("volumeAttributesClassName", STR),
];

const VOLUME_RESOURCE_REQUIREMENTS: &[Field] = &[opt("limits", QTY_MAP), opt("requests", QTY_MAP)];

const TYPED_LOCAL_OBJECT_REFERENCE: &[Field] = &[
    nullable("apiGroup", STR),
    req("kind", STR),
    req("name", STR),
];

const TYPED_OBJECT_REFERENCE: &[Field] = &[
    nullable("apiGroup", STR),
    req("kind", STR),
    req("name", STR),
    ptr("namespace", STR),
];

const IMAGE: &[Field] = &[opt("reference", STR), opt("pullPolicy", STR)];
