use super::*;
use crate::api::keys::{MANAGED_LABEL, MANAGED_LABEL_VALUE};

/// The ServiceAccount store is the process's shared one, holding everyone's accounts: a
/// catalog's is only the one olm-rs labelled `olm.managed`.
#[test]
fn only_a_managed_service_account_is_the_registrys() {
    use crate::k8s::store::namespaced_store;
    use kube_runtime::watcher::Event;
    let cs: CatalogSource = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "ops", "namespace": "olm"},
        "spec": {"sourceType": "grpc", "image": "quay.io/org/catalog:latest"},
    }))
    .unwrap();
    let account = |managed: bool| {
        let mut sa = ServiceAccount::default();
        sa.metadata.namespace = Some("olm".into());
        sa.metadata.name = Some("ops".into());
        if managed {
            sa.metadata.labels =
                Some([(MANAGED_LABEL.to_owned(), MANAGED_LABEL_VALUE.to_owned())].into());
        }
        sa
    };
    let (service_accounts, mut writer) = namespaced_store();
    let stores = RegistryStores {
        namespaces: namespaced_store().0,
        service_accounts,
        network_policies: namespaced_store().0,
        services: namespaced_store().0,
        pods: namespaced_store().0,
    };
    writer.apply_owned(Event::Apply(account(false)));
    assert!(
        stores.observe(&cs).service_account.is_none(),
        "someone else's account of the same name"
    );
    writer.apply_owned(Event::Apply(account(true)));
    assert!(stores.observe(&cs).service_account.is_some());
}
