//! The namespace as the stores show it, for `decide_effects`'s tables: a tiny in-memory
//! "server" that applies a decision's writes the way the API server would (versions bump,
//! creates get a uid).

use super::*;

/// The namespace as the stores show it, and a counter for resourceVersions.
#[derive(Clone)]
pub(super) struct Cluster {
    pub(super) subs: Vec<Subscription>,
    pub(super) plans: Vec<InstallPlan>,
    pub(super) installed: Vec<InstalledCsv>,
    pub(super) catalog_readable: bool,
    pub(super) gone: Vec<String>,
    pub(super) version: u64,
}

impl Cluster {
    pub(super) fn new(subs: Vec<Subscription>) -> Self {
        let mut c = Cluster {
            subs: Vec::new(),
            plans: Vec::new(),
            installed: Vec::new(),
            catalog_readable: true,
            gone: Vec::new(),
            version: 0,
        };
        for mut s in subs {
            s.metadata.resource_version = Some(c.bump());
            c.subs.push(s);
        }
        c
    }

    pub(super) fn bump(&mut self) -> String {
        self.version += 1;
        self.version.to_string()
    }

    pub(super) fn decide(&self) -> NamespaceDecision {
        let catalogs = vec![CatalogInput {
            key: CatalogRef::new("olm", "cat"),
            priority: 0,
            uid: Some("cat-uid".into()),
            content: if self.catalog_readable {
                CatalogContent::Ready(Arc::new(catalog(true)))
            } else {
                CatalogContent::Unavailable("connection refused".into())
            },
            healthy: self.catalog_readable,
        }];
        let groups = OperatorGroups {
            names: vec!["og".into()],
            exclude_global_catalogs: false,
        };
        decide_effects(&NamespaceView {
            state: NamespaceState {
                input: NamespaceInput {
                    namespace: "ns",
                    subscriptions: &self.subs,
                    installed: &self.installed,
                    catalogs: &catalogs,
                    operator_groups: &groups,
                    global_catalog_namespace: "olm",
                },
                plans: &self.plans,
                crds: &[],
                rollback: &RollbackInput::default(),
                now: Timestamp::from_second(1_000).unwrap(),
            },
            gone_plans: &self.gone,
            namespace_uid: Some(NS_UID),
        })
    }

    /// Applies every write of `decision` as the API server would (guards checked).
    pub(super) fn apply(&mut self, decision: &NamespaceDecision) {
        let parts = decision.subscriptions.iter().map(|s| &s.effects);
        for effects in parts.chain([&decision.garbage]) {
            for write in &effects.writes {
                assert!(self.perform(write), "refused: {write:?}");
            }
        }
    }

    /// A [`Write::StatusAfter`] as the executor sends it: at the version of its object now (the
    /// writes are applied one by one, so that is the last answer), its fills from the objects now.
    pub(super) fn resolve(&self, write: &Write) -> Option<Write> {
        let Write::StatusAfter { key, status, fills } = write else {
            return Some(write.clone());
        };
        let meta = |key: &ObjectKey| {
            let subs = self.subs.iter().map(|s| &s.metadata);
            let plans = self.plans.iter().map(|p| &p.metadata);
            subs.chain(plans)
                .find(|m| m.name.as_ref() == Some(&key.name))
                .cloned()
        };
        let mut json = status.to_json().unwrap();
        for fill in fills {
            let from = meta(&fill.from)?;
            let value = match fill.field {
                Answered::Uid => from.uid?,
                Answered::ResourceVersion => from.resource_version?,
            };
            let (parent, last) = fill.at.rsplit_once('/').unwrap();
            json.pointer_mut(parent).unwrap()[last] = value.into();
        }
        Some(Write::Status {
            key: key.clone(),
            resource_version: meta(key)?.resource_version?,
            status: Body::new(json),
        })
    }

    pub(super) fn perform(&mut self, write: &Write) -> bool {
        let Some(write) = self.resolve(write) else {
            return false;
        };
        let rv = self.bump();
        match &write {
            Write::Status {
                key,
                resource_version,
                status,
            } => {
                let json = status.to_json().unwrap();
                let meta = match key.resource.kind.as_str() {
                    "Subscription" => {
                        let Some(s) = self
                            .subs
                            .iter_mut()
                            .find(|s| s.metadata.name.as_ref() == Some(&key.name))
                        else {
                            return false;
                        };
                        s.status = Some(serde_json::from_value(json).unwrap());
                        &mut s.metadata
                    }
                    _ => {
                        let Some(p) = self
                            .plans
                            .iter_mut()
                            .find(|p| p.metadata.name.as_ref() == Some(&key.name))
                        else {
                            return false;
                        };
                        p.status = Some(serde_json::from_value(json).unwrap());
                        &mut p.metadata
                    }
                };
                if meta.resource_version.as_ref() != Some(resource_version) {
                    return false;
                }
                meta.resource_version = Some(rv);
                true
            }
            Write::Create { key, object } => {
                if self
                    .plans
                    .iter()
                    .any(|p| p.metadata.name.as_ref() == Some(&key.name))
                {
                    return false;
                }
                let mut plan: InstallPlan =
                    serde_json::from_value(object.to_json().unwrap()).unwrap();
                plan.metadata.uid = Some(format!("uid-{}", key.name));
                plan.metadata.resource_version = Some(rv);
                plan.metadata.creation_timestamp =
                    Some(Time(Timestamp::from_second(1_000).unwrap()));
                self.plans.push(plan);
                true
            }
            Write::Delete { key, options } => {
                let found = self
                    .plans
                    .iter()
                    .position(|p| p.metadata.name.as_ref() == Some(&key.name));
                if let (Some(i), Some(want)) = (found, &options.resource_version)
                    && self.plans[i].metadata.resource_version.as_ref() != Some(want)
                {
                    return false;
                }
                if let Some(i) = found {
                    self.plans.remove(i);
                }
                true
            }
            Write::Apply { .. }
            | Write::MergePatch { .. }
            | Write::CreateIfAbsent { .. }
            | Write::StatusAfter { .. } => false,
        }
    }

    pub(super) fn status(&self) -> &SubscriptionStatus {
        self.subs[0].status.as_ref().unwrap()
    }
}
