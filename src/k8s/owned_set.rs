//! The owned-set applier: a decision names the objects of one owner it wants, and every object
//! found carrying that owner's labels that it does not want is an orphan, deleted as it was
//! observed (docs/architecture.md §2, "Owned sets"). The group ClusterRoles, the registry pods,
//! the InstallPlan sweep and the CSV finalizer all decide their deletions through it, so "what
//! is mine and no longer wanted" is answered one way.
//!
//! It is data, like [`Effects`]: building it performs nothing.

use kube::{Resource, ResourceExt};

use super::effects::{Effects, Write};
use super::write::{DeleteOptions, ObjectKey};

/// The writes that make the objects of one owner what a decision wants.
#[derive(Debug, Default)]
pub struct OwnedSet {
    /// The writes of the wanted objects, in the order given.
    writes: Vec<Write>,
    /// Every wanted object, written or kept as it is.
    wanted: Vec<ObjectKey>,
    /// The orphans' deletes, after the wanted writes.
    deletes: Vec<Write>,
}

impl OwnedSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// `write` makes a wanted object what it should be (an apply or a create).
    pub fn want(&mut self, write: Write) -> &mut Self {
        self.wanted.push(write.key().clone());
        self.writes.push(write);
        self
    }

    /// The object `key` is wanted and already as it should be: no write, and not an orphan.
    pub fn keep(&mut self, key: ObjectKey) -> &mut Self {
        self.wanted.push(key);
        self
    }

    /// The objects found with the owner's labels: each one not wanted is deleted, only as it was
    /// observed (a changed object is decided again rather than deleted blind).
    pub fn found<'a, K>(&mut self, objects: impl IntoIterator<Item = &'a K>) -> &mut Self
    where
        K: Resource<DynamicType = ()> + 'a,
    {
        self.found_with(objects, |_| DeleteOptions::default())
    }

    /// [`Self::found`], each orphan deleted with the options `options` gives for it (a pod's
    /// grace period); the delete is still only of the object as observed.
    pub fn found_with<'a, K>(
        &mut self,
        objects: impl IntoIterator<Item = &'a K>,
        options: impl Fn(&K) -> DeleteOptions,
    ) -> &mut Self
    where
        K: Resource<DynamicType = ()> + 'a,
    {
        for object in objects {
            let key = ObjectKey::of(object);
            let taken = self.deletes.iter().any(|d| d.key() == &key);
            if !self.wanted.contains(&key) && !taken {
                self.deletes.push(Write::Delete {
                    key,
                    options: DeleteOptions {
                        resource_version: object.resource_version(),
                        ..options(object)
                    },
                });
            }
        }
        self
    }

    /// The orphans' names (what a decision reports or waits on).
    pub fn orphans(&self) -> impl Iterator<Item = &str> {
        self.deletes.iter().map(|d| d.key().name.as_str())
    }

    /// The wanted writes in their order, then the orphans' deletes.
    pub fn into_writes(self) -> Vec<Write> {
        let mut writes = self.writes;
        writes.extend(self.deletes);
        writes
    }

    /// Appends [`Self::into_writes`] to `effects`.
    pub fn into_effects(self, effects: &mut Effects) {
        for write in self.into_writes() {
            effects.write(write);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::write::Ownership;
    use k8s_openapi::api::rbac::v1::ClusterRole;
    use kube::api::ObjectMeta;

    fn role(name: &str, version: &str) -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                resource_version: Some(version.to_owned()),
                ..ObjectMeta::default()
            },
            ..ClusterRole::default()
        }
    }

    fn names(writes: &[Write]) -> Vec<(&'static str, &str)> {
        writes
            .iter()
            .map(|w| {
                let verb = w.verb();
                (verb, w.key().name.as_str())
            })
            .collect()
    }

    #[test]
    fn wanted_objects_are_written_first_and_unwanted_found_ones_deleted_as_observed() {
        let found = [
            role("a", "1"),
            role("b", "2"),
            role("c", "3"),
            role("c", "3"),
        ];
        let mut set = OwnedSet::new();
        set.want(Write::apply(role("a", "1"), Ownership::Force))
            .want(Write::create(role("new", "0")))
            .keep(ObjectKey::of(&role("b", "2")))
            .found(&found);
        assert_eq!(set.orphans().collect::<Vec<_>>(), ["c"]);
        let writes = set.into_writes();
        assert_eq!(
            names(&writes),
            [("apply", "a"), ("create", "new"), ("delete", "c")]
        );
        let Write::Delete { options, .. } = &writes[2] else {
            unreachable!("the third write is the orphan's delete");
        };
        assert_eq!(options.resource_version.as_deref(), Some("3"));
    }

    #[test]
    fn orphans_can_carry_delete_options_and_stay_guarded_by_their_version() {
        let found = [role("x", "7")];
        let mut set = OwnedSet::new();
        set.found_with(&found, |_| DeleteOptions {
            grace_period_seconds: Some(1),
            ..DeleteOptions::default()
        });
        let writes = set.into_writes();
        let [Write::Delete { options, .. }] = writes.as_slice() else {
            unreachable!("one delete");
        };
        assert_eq!(options.grace_period_seconds, Some(1));
        assert_eq!(options.resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn nothing_wanted_deletes_everything_found_and_nothing_found_deletes_nothing() {
        let found = [role("x", "7"), role("y", "8")];
        let mut all_gone = OwnedSet::new();
        all_gone.found(&found);
        assert_eq!(
            names(&all_gone.into_writes()),
            [("delete", "x"), ("delete", "y")]
        );
        let mut none_found = OwnedSet::new();
        none_found.want(Write::apply(role("x", "7"), Ownership::Force));
        none_found.found(std::iter::empty::<&ClusterRole>());
        assert_eq!(names(&none_found.into_writes()), [("apply", "x")]);
    }
}
