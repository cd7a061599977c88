//! The ServiceAccounts of the cluster, reduced on arrival to what a group sync asks of the one
//! its `spec.serviceAccountName` names: uid, resourceVersion and whether it carries
//! `olm.managed: "true"`. Every namespace holds at least its `default` account, so a whole
//! metadata object per account would cost the controller about a kilobyte per namespace; a
//! record costs a fifth of that, and the group sync still never reads an account live.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::ResourceExt;
use kube::api::PartialObjectMeta;
use kube_runtime::watcher::Event;
use tokio::sync::watch;

use crate::api::keys::{MANAGED_LABEL, MANAGED_LABEL_VALUE};
use crate::operator_group::group_decision::ServiceAccountSeen;

use super::namespaced_name::NamespacedName;

#[derive(Debug, Clone, PartialEq, Eq)]
struct AccountRecord {
    uid: String,
    resource_version: String,
    managed: bool,
}

#[derive(Default)]
struct Accounts {
    by_key: HashMap<NamespacedName, AccountRecord>,
    /// Records gathered during a re-list, swapped in at its end.
    relist: Option<HashMap<NamespacedName, AccountRecord>>,
}

/// ServiceAccounts by namespace and name; cheap to clone and share.
#[derive(Clone)]
pub struct AccountIndex {
    state: Arc<RwLock<Accounts>>,
    ready: watch::Sender<bool>,
}

impl Default for AccountIndex {
    fn default() -> Self {
        Self {
            state: Arc::default(),
            ready: watch::channel(false).0,
        }
    }
}

fn key_of(account: &PartialObjectMeta<ServiceAccount>) -> NamespacedName {
    NamespacedName::new(
        account.metadata.namespace.as_deref().unwrap_or_default(),
        &account.name_any(),
    )
}

fn record_of(account: &PartialObjectMeta<ServiceAccount>) -> AccountRecord {
    AccountRecord {
        uid: account.metadata.uid.clone().unwrap_or_default(),
        resource_version: account
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default(),
        managed: account.labels().get(MANAGED_LABEL).map(String::as_str)
            == Some(MANAGED_LABEL_VALUE),
    }
}

impl AccountIndex {
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Accounts> {
        // Every update is one insert, remove or swap: a poisoned lock is still consistent.
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The account `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<ServiceAccountSeen> {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        let record = state.by_key.get(&NamespacedName::new(namespace, name))?;
        Some(ServiceAccountSeen {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: record.uid.clone(),
            resource_version: record.resource_version.clone(),
            managed: record.managed,
        })
    }

    pub async fn wait_until_ready(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|r| *r).await;
    }

    /// Applies one watch event; returns the accounts whose record changed (all of them after a
    /// re-list), for routing.
    pub fn apply(&self, event: Event<PartialObjectMeta<ServiceAccount>>) -> Vec<NamespacedName> {
        match event {
            Event::Apply(account) => {
                let (key, record) = (key_of(&account), record_of(&account));
                let mut state = self.write();
                if state.by_key.get(&key) == Some(&record) {
                    return Vec::new();
                }
                state.by_key.insert(key.clone(), record);
                vec![key]
            }
            Event::Delete(account) => {
                let key = key_of(&account);
                match self.write().by_key.remove(&key) {
                    Some(_) => vec![key],
                    None => Vec::new(),
                }
            }
            Event::Init => {
                self.write().relist = Some(HashMap::new());
                Vec::new()
            }
            Event::InitApply(account) => {
                self.write()
                    .relist
                    .get_or_insert_with(HashMap::new)
                    .insert(key_of(&account), record_of(&account));
                Vec::new()
            }
            Event::InitDone => {
                let mut state = self.write();
                let listed = state.relist.take().unwrap_or_default();
                let mut changed: Vec<NamespacedName> = listed
                    .iter()
                    .filter(|(k, r)| state.by_key.get(k) != Some(r))
                    .map(|(k, _)| k.clone())
                    .collect();
                changed.extend(
                    state
                        .by_key
                        .keys()
                        .filter(|k| !listed.contains_key(k))
                        .cloned(),
                );
                state.by_key = listed;
                drop(state);
                self.ready.send_replace(true);
                changed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(ns: &str, name: &str, rv: &str, managed: bool) -> PartialObjectMeta<ServiceAccount> {
        let mut sa = PartialObjectMeta::<ServiceAccount>::default();
        sa.metadata.namespace = Some(ns.into());
        sa.metadata.name = Some(name.into());
        sa.metadata.uid = Some(format!("uid-{name}"));
        sa.metadata.resource_version = Some(rv.into());
        if managed {
            sa.metadata.labels =
                Some([(MANAGED_LABEL.to_owned(), MANAGED_LABEL_VALUE.to_owned())].into());
        }
        sa
    }

    #[test]
    fn records_follow_the_watch_and_report_what_changed() {
        let index = AccountIndex::default();
        index.apply(Event::Init);
        index.apply(Event::InitApply(account("ops", "default", "1", false)));
        assert!(
            index.get("ops", "default").is_none(),
            "a list in progress is not visible"
        );
        assert_eq!(
            index.apply(Event::InitDone),
            [NamespacedName::new("ops", "default")]
        );
        let new = account("ops", "scoped", "2", false);
        assert_eq!(
            index.apply(Event::Apply(new.clone())),
            [NamespacedName::new("ops", "scoped")]
        );
        assert!(
            index.apply(Event::Apply(new)).is_empty(),
            "no change, no route"
        );
        index.apply(Event::Apply(account("ops", "scoped", "3", true)));
        assert_eq!(
            index.get("ops", "scoped"),
            Some(ServiceAccountSeen {
                namespace: "ops".into(),
                name: "scoped".into(),
                uid: "uid-scoped".into(),
                resource_version: "3".into(),
                managed: true,
            })
        );
        assert_eq!(
            index.apply(Event::Delete(account("ops", "scoped", "3", true))),
            [NamespacedName::new("ops", "scoped")]
        );
        assert!(index.get("ops", "scoped").is_none());
        index.apply(Event::Init);
        assert_eq!(
            index.apply(Event::InitDone),
            [NamespacedName::new("ops", "default")],
            "a re-list without it removes it"
        );
        assert!(index.get("ops", "default").is_none());
    }
}
