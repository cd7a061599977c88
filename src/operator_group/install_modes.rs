//! Install-mode support of a CSV for its group's targets (docs/operator-groups.md §5): the checks the
//! CSV sync runs in docs/csv-phases.md §2 steps 7–8, with OLM's exact messages.

use std::collections::BTreeSet;

use crate::api::{CsvReason, InstallMode, InstallModeType};

use super::targets::TargetNamespaces;

/// Why a CSV cannot run with its group's targets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstallModeError {
    /// `InvalidInstallModes`: the CSV lists a mode type twice.
    #[error("InstallMode list contains duplicates, cannot make set: {0}")]
    Duplicates(String),
    /// `UnsupportedOperatorGroup` with OLM's message.
    #[error("{0}")]
    Unsupported(&'static str),
    /// `UnsupportedOperatorGroup`: MultiNamespace missing for `n` targets.
    #[error(
        "MultiNamespace InstallModeType not supported, cannot configure to watch {0} namespaces"
    )]
    MultiNamespaceUnsupported(usize),
}

impl InstallModeError {
    /// The CSV `status.reason` to record.
    pub fn reason(&self) -> CsvReason {
        match self {
            Self::Duplicates(_) => CsvReason::InvalidInstallModes,
            _ => CsvReason::UnsupportedOperatorGroup,
        }
    }
}

const ZERO_NAMESPACES: &str =
    "operatorgroup has invalid selected namespaces, cannot configure to watch zero namespaces";
const ALL_AMONG_OTHERS: &str = "operatorgroup has invalid selected namespaces, NamespaceAll found when |selected namespaces| > 1";
const ALL_UNSUPPORTED: &str =
    "AllNamespaces InstallModeType not supported, cannot configure to watch all namespaces";
const OWN_UNSUPPORTED: &str =
    "OwnNamespace InstallModeType not supported, cannot configure to watch own namespace";
const SINGLE_UNSUPPORTED: &str =
    "SingleNamespace InstallModeType not supported, cannot configure to watch one namespace";

/// The set of supported mode types; duplicates (by type) are an error, as in OLM.
pub fn supported_modes(
    modes: &[InstallMode],
) -> Result<BTreeSet<InstallModeType>, InstallModeError> {
    let mut seen = BTreeSet::new();
    for mode in modes {
        if !seen.insert(mode.type_.clone()) {
            return Err(InstallModeError::Duplicates(go_print_modes(modes)));
        }
    }
    Ok(modes
        .iter()
        .filter(|m| m.supported)
        .map(|m| m.type_.clone())
        .collect())
}

/// Go's `%v` of `[]InstallMode`: `[{OwnNamespace true} {AllNamespaces false}]`.
fn go_print_modes(modes: &[InstallMode]) -> String {
    let items: Vec<String> = modes
        .iter()
        .map(|m| format!("{{{} {}}}", m.type_, m.supported))
        .collect();
    format!("[{}]", items.join(" "))
}

/// §5 for the raw `olm.targetNamespaces` value (split on `,`, so `""` is all namespaces).
pub fn check_install_modes(
    modes: &[InstallMode],
    operator_namespace: &str,
    targets_annotation: &str,
) -> Result<(), InstallModeError> {
    check_install_modes_for(modes, operator_namespace, targets_annotation.split(','))
}

/// §5: whether a CSV with `modes` in `operator_namespace` may run for the target list `names`
/// (`[""]` = all namespaces; an empty list always fails). No mode implies another.
pub fn check_install_modes_for<S: AsRef<str>>(
    modes: &[InstallMode],
    operator_namespace: &str,
    names: impl IntoIterator<Item = S>,
) -> Result<(), InstallModeError> {
    let supported = supported_modes(modes)?;
    let has = |t: InstallModeType| supported.contains(&t);
    let targets = match TargetNamespaces::from_names(names) {
        Ok(targets) => targets,
        Err(_) => return Err(InstallModeError::Unsupported(ALL_AMONG_OTHERS)),
    };
    match targets {
        TargetNamespaces::All if has(InstallModeType::AllNamespaces) => Ok(()),
        TargetNamespaces::All => Err(InstallModeError::Unsupported(ALL_UNSUPPORTED)),
        TargetNamespaces::Named(set) => match set.len() {
            0 => Err(InstallModeError::Unsupported(ZERO_NAMESPACES)),
            1 if set.contains(operator_namespace) => has(InstallModeType::OwnNamespace)
                .then_some(())
                .ok_or(InstallModeError::Unsupported(OWN_UNSUPPORTED)),
            1 => has(InstallModeType::SingleNamespace)
                .then_some(())
                .ok_or(InstallModeError::Unsupported(SINGLE_UNSUPPORTED)),
            n if !has(InstallModeType::MultiNamespace) => {
                Err(InstallModeError::MultiNamespaceUnsupported(n))
            }
            _ if set.contains(operator_namespace) && !has(InstallModeType::OwnNamespace) => {
                Err(InstallModeError::Unsupported(OWN_UNSUPPORTED))
            }
            _ => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modes(supported: &[InstallModeType]) -> Vec<InstallMode> {
        [
            InstallModeType::OwnNamespace,
            InstallModeType::SingleNamespace,
            InstallModeType::MultiNamespace,
            InstallModeType::AllNamespaces,
        ]
        .into_iter()
        .map(|t| InstallMode {
            supported: supported.contains(&t),
            type_: t,
        })
        .collect()
    }

    use InstallModeType::{
        AllNamespaces as All, MultiNamespace as Multi, OwnNamespace as Own,
        SingleNamespace as Single,
    };

    /// The full matrix of docs/operator-groups.md §5: every mode combination against every target
    /// shape, checked against the rule written out independently.
    #[test]
    fn matrix_of_modes_against_targets() {
        let shapes: [(&str, &str); 6] = [
            ("", "all"),
            ("op", "own"),
            ("other", "single"),
            ("a,b", "multi"),
            ("a,op", "multi+own"),
            (",a", "invalid"),
        ];
        for bits in 0u8..16 {
            let supported: Vec<InstallModeType> = [Own, Single, Multi, All]
                .into_iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .map(|(_, t)| t)
                .collect();
            let has = |t| supported.contains(&t);
            for (annotation, shape) in shapes {
                let expected = match shape {
                    "all" => has(All),
                    "own" => has(Own),
                    "single" => has(Single),
                    "multi" => has(Multi),
                    "multi+own" => has(Multi) && has(Own),
                    _ => false,
                };
                let got = check_install_modes(&modes(&supported), "op", annotation);
                assert_eq!(got.is_ok(), expected, "{supported:?} vs {shape}: {got:?}");
                if let Err(err) = got {
                    assert_eq!(err.reason(), CsvReason::UnsupportedOperatorGroup);
                }
            }
        }
    }

    #[test]
    fn messages_are_olms() {
        let none = modes(&[]);
        let msg = |a: &str| check_install_modes(&none, "op", a).unwrap_err().to_string();
        assert_eq!(msg(""), ALL_UNSUPPORTED);
        assert_eq!(msg("op"), OWN_UNSUPPORTED);
        assert_eq!(msg("x"), SINGLE_UNSUPPORTED);
        assert_eq!(
            msg("x,y,z"),
            "MultiNamespace InstallModeType not supported, cannot configure to watch 3 namespaces"
        );
        assert_eq!(msg(",x"), ALL_AMONG_OTHERS);
        let multi = modes(&[Multi]);
        assert_eq!(
            check_install_modes(&multi, "op", "op,x")
                .unwrap_err()
                .to_string(),
            OWN_UNSUPPORTED
        );
        // No installModes at all fails every group.
        assert!(check_install_modes(&[], "op", "").is_err());
        let all = modes(&[Own, Single, Multi, All]);
        assert_eq!(
            check_install_modes_for(&all, "op", Vec::<String>::new())
                .unwrap_err()
                .to_string(),
            ZERO_NAMESPACES
        );
    }

    #[test]
    fn duplicate_types_are_invalid_install_modes() {
        let dup = vec![
            InstallMode {
                type_: Own,
                supported: true,
            },
            InstallMode {
                type_: Own,
                supported: false,
            },
        ];
        let err = check_install_modes(&dup, "op", "op").unwrap_err();
        assert_eq!(err.reason(), CsvReason::InvalidInstallModes);
        assert_eq!(
            err.to_string(),
            "InstallMode list contains duplicates, cannot make set: [{OwnNamespace true} {OwnNamespace false}]"
        );
    }
}
