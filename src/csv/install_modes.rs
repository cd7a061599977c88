//! Install mode compatibility of a CSV with its OperatorGroup's targets (operatorgroup.md §5).

use std::collections::BTreeMap;

use crate::api::{InstallMode, InstallModeType};

/// The CSV's `installModes` as a set; an unlisted type is unsupported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstallModeSet(BTreeMap<InstallModeType, bool>);

impl InstallModeSet {
    /// Builds the set. Duplicate types are an error whose text is OLM's (Go's `%v` of the list).
    pub fn new(modes: &[InstallMode]) -> Result<Self, String> {
        let mut set = BTreeMap::new();
        for mode in modes {
            if set.insert(mode.type_.clone(), mode.supported).is_some() {
                let listed: Vec<String> = modes
                    .iter()
                    .map(|m| format!("{{{} {}}}", m.type_, m.supported))
                    .collect();
                return Err(format!(
                    "InstallMode list contains duplicates, cannot make set: [{}]",
                    listed.join(" ")
                ));
            }
        }
        Ok(Self(set))
    }

    fn supports_mode(&self, mode: InstallModeType) -> bool {
        self.0.get(&mode).copied().unwrap_or(false)
    }

    /// Whether an operator in `operator_namespace` may watch `targets` (the split
    /// `olm.targetNamespaces`; `[""]` is all namespaces). The error is OLM's message.
    pub fn supports(&self, operator_namespace: &str, targets: &[String]) -> Result<(), String> {
        match targets {
            [] => Err("operatorgroup has invalid selected namespaces, cannot configure to watch zero namespaces".to_owned()),
            [only] if only == operator_namespace => self.require(
                InstallModeType::OwnNamespace,
                "cannot configure to watch own namespace",
            ),
            [only] if only.is_empty() => self.require(
                InstallModeType::AllNamespaces,
                "cannot configure to watch all namespaces",
            ),
            [_] => self.require(
                InstallModeType::SingleNamespace,
                "cannot configure to watch one namespace",
            ),
            many => {
                if !self.supports_mode(InstallModeType::MultiNamespace) {
                    return Err(format!(
                        "{} InstallModeType not supported, cannot configure to watch {} namespaces",
                        InstallModeType::MultiNamespace,
                        many.len()
                    ));
                }
                for ns in many {
                    if ns == operator_namespace {
                        self.require(
                            InstallModeType::OwnNamespace,
                            "cannot configure to watch own namespace",
                        )?;
                    }
                    if ns.is_empty() {
                        return Err("operatorgroup has invalid selected namespaces, NamespaceAll found when |selected namespaces| > 1".to_owned());
                    }
                }
                Ok(())
            }
        }
    }

    fn require(&self, mode: InstallModeType, what: &str) -> Result<(), String> {
        if self.supports_mode(mode.clone()) {
            Ok(())
        } else {
            Err(format!("{mode} InstallModeType not supported, {what}"))
        }
    }
}

/// Splits `olm.targetNamespaces` the way OLM does: on `,`, so `""` becomes `[""]`.
pub fn split_targets(annotation: &str) -> Vec<String> {
    annotation.split(',').map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modes(list: &[(InstallModeType, bool)]) -> Vec<InstallMode> {
        list.iter()
            .map(|(t, s)| InstallMode {
                type_: t.clone(),
                supported: *s,
            })
            .collect()
    }

    fn targets(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn duplicates_are_rejected_with_olms_text() {
        let err = InstallModeSet::new(&modes(&[
            (InstallModeType::OwnNamespace, true),
            (InstallModeType::OwnNamespace, false),
        ]))
        .unwrap_err();
        assert_eq!(
            err,
            "InstallMode list contains duplicates, cannot make set: [{OwnNamespace true} {OwnNamespace false}]"
        );
    }

    #[test]
    fn targets_versus_modes_follow_the_table() {
        use InstallModeType::*;
        let own_only =
            InstallModeSet::new(&modes(&[(OwnNamespace, true), (AllNamespaces, false)])).unwrap();
        let all = InstallModeSet::new(&modes(&[(AllNamespaces, true)])).unwrap();
        let multi = InstallModeSet::new(&modes(&[(MultiNamespace, true)])).unwrap();
        let multi_own =
            InstallModeSet::new(&modes(&[(MultiNamespace, true), (OwnNamespace, true)])).unwrap();
        let single = InstallModeSet::new(&modes(&[(SingleNamespace, true)])).unwrap();
        let none = InstallModeSet::default();

        let cases: Vec<(&InstallModeSet, Vec<String>, Result<(), &str>)> = vec![
            (&own_only, targets(&["op"]), Ok(())),
            (
                &own_only,
                targets(&[""]),
                Err(
                    "AllNamespaces InstallModeType not supported, cannot configure to watch all namespaces",
                ),
            ),
            (&all, targets(&[""]), Ok(())),
            (
                &all,
                targets(&["op"]),
                Err(
                    "OwnNamespace InstallModeType not supported, cannot configure to watch own namespace",
                ),
            ),
            (&single, targets(&["x"]), Ok(())),
            (
                &own_only,
                targets(&["x"]),
                Err(
                    "SingleNamespace InstallModeType not supported, cannot configure to watch one namespace",
                ),
            ),
            (&multi, targets(&["x", "y"]), Ok(())),
            (
                &single,
                targets(&["x", "y", "z"]),
                Err(
                    "MultiNamespace InstallModeType not supported, cannot configure to watch 3 namespaces",
                ),
            ),
            (
                &multi,
                targets(&["x", "op"]),
                Err(
                    "OwnNamespace InstallModeType not supported, cannot configure to watch own namespace",
                ),
            ),
            (&multi_own, targets(&["x", "op"]), Ok(())),
            (
                &multi,
                targets(&["x", ""]),
                Err(
                    "operatorgroup has invalid selected namespaces, NamespaceAll found when |selected namespaces| > 1",
                ),
            ),
            (
                &none,
                targets(&[]),
                Err(
                    "operatorgroup has invalid selected namespaces, cannot configure to watch zero namespaces",
                ),
            ),
            (
                &none,
                targets(&["op"]),
                Err(
                    "OwnNamespace InstallModeType not supported, cannot configure to watch own namespace",
                ),
            ),
        ];
        for (set, t, want) in cases {
            assert_eq!(set.supports("op", &t), want.map_err(str::to_owned), "{t:?}");
        }
    }

    #[test]
    fn empty_annotation_means_all_namespaces() {
        assert_eq!(split_targets(""), vec![String::new()]);
        assert_eq!(split_targets("a,b"), targets(&["a", "b"]));
    }
}
