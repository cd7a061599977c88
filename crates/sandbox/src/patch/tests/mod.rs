//! Table and property tests of the patch operations.

mod merge_json;
mod props;
mod smp;
mod ssa;

use super::GroupVersionKindRef;

pub(super) const DEPLOYMENT: GroupVersionKindRef<'static> = GroupVersionKindRef {
    group: "apps",
    version: "v1",
    kind: "Deployment",
};

pub(super) const CONFIG_MAP: GroupVersionKindRef<'static> = GroupVersionKindRef {
    group: "",
    version: "v1",
    kind: "ConfigMap",
};

pub(super) const SUBSCRIPTION: GroupVersionKindRef<'static> = GroupVersionKindRef {
    group: "operators.coreos.com",
    version: "v1alpha1",
    kind: "Subscription",
};

pub(super) const SERVICE: GroupVersionKindRef<'static> = GroupVersionKindRef {
    group: "",
    version: "v1",
    kind: "Service",
};
