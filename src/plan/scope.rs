//! Whose credentials a plan is executed with (docs/install-plans.md §10): the namespace
//! must have exactly one OperatorGroup managing it; if that group names a service account,
//! every step but CRDs runs as that account.

use std::borrow::Borrow;

use crate::api::OperatorGroup;

/// The identity steps are applied with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecuteAs {
    /// olm-rs's own credentials.
    Controller,
    /// `system:serviceaccount:<namespace>:<name>` (CRDs still use olm-rs's credentials).
    ServiceAccount { namespace: String, name: String },
}

/// Why a plan cannot run yet; the text is OLM's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("no operator group found that is managing this namespace")]
    NoOperatorGroup,
    #[error("more than one operator group(s) are managing this namespace count={count}")]
    ManyOperatorGroups { count: usize },
    /// The group names a service account its status does not reference (yet).
    #[error(
        "please make sure the service account exists. sa={account} operatorgroup={namespace}/{group}"
    )]
    ServiceAccountMissing {
        account: String,
        namespace: String,
        group: String,
    },
}

/// The identity for a plan in `namespace`, or why it cannot run yet.
pub fn execution_identity<G: Borrow<OperatorGroup>>(
    namespace: &str,
    groups: &[G],
) -> Result<ExecuteAs, IdentityError> {
    let managing: Vec<&OperatorGroup> = groups
        .iter()
        .map(Borrow::borrow)
        .filter(|og| {
            og.status
                .as_ref()
                .is_some_and(|s| !s.namespaces.as_ref().is_none_or(Vec::is_empty))
        })
        .collect();
    let og = match managing.as_slice() {
        [] => return Err(IdentityError::NoOperatorGroup),
        [one] => *one,
        many => return Err(IdentityError::ManyOperatorGroups { count: many.len() }),
    };
    let Some(sa) = og
        .spec
        .service_account_name
        .as_deref()
        .filter(|s| !s.is_empty())
    else {
        return Ok(ExecuteAs::Controller);
    };
    let resolved = og
        .status
        .as_ref()
        .and_then(|s| s.service_account_ref.as_ref())
        .is_some_and(|r| r.name.as_deref() == Some(sa));
    if !resolved {
        return Err(IdentityError::ServiceAccountMissing {
            account: sa.to_owned(),
            namespace: namespace.to_owned(),
            group: og.metadata.name.clone().unwrap_or_default(),
        });
    }
    Ok(ExecuteAs::ServiceAccount {
        namespace: namespace.to_owned(),
        name: sa.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{OperatorGroupSpec, OperatorGroupStatus};
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn og(
        name: &str,
        namespaces: &[&str],
        sa: Option<&str>,
        sa_ref: Option<&str>,
    ) -> OperatorGroup {
        let mut og: OperatorGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": name}
        }))
        .unwrap();
        og.spec = OperatorGroupSpec {
            service_account_name: sa.map(Into::into),
            ..OperatorGroupSpec::default()
        };
        og.status = Some(OperatorGroupStatus {
            namespaces: Some(namespaces.iter().map(|s| s.to_string()).collect()),
            service_account_ref: sa_ref.map(|n| ObjectReference {
                name: Some(n.into()),
                ..Default::default()
            }),
            last_updated: Time(jiff::Timestamp::UNIX_EPOCH),
            conditions: None,
        });
        og
    }

    #[test]
    fn identity_follows_olms_operator_group_rules() {
        assert_eq!(
            execution_identity::<OperatorGroup>("ns", &[]),
            Err(IdentityError::NoOperatorGroup)
        );
        assert_eq!(
            execution_identity(
                "ns",
                &[og("a", &["ns"], None, None), og("b", &[""], None, None)]
            ),
            Err(IdentityError::ManyOperatorGroups { count: 2 })
        );
        assert_eq!(
            execution_identity(
                "ns",
                &[og("a", &["ns"], None, None), og("idle", &[], None, None)]
            ),
            Ok(ExecuteAs::Controller)
        );
        assert_eq!(
            execution_identity("ns", &[og("a", &["ns"], Some("installer"), None)])
                .unwrap_err()
                .to_string(),
            "please make sure the service account exists. sa=installer operatorgroup=ns/a"
        );
        assert_eq!(
            execution_identity(
                "ns",
                &[og("a", &["ns"], Some("installer"), Some("installer"))]
            ),
            Ok(ExecuteAs::ServiceAccount {
                namespace: "ns".into(),
                name: "installer".into()
            })
        );
    }
}
