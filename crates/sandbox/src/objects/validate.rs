//! The name checks the API server makes on create.

use crate::error::ApiError;
use crate::resources::ResourceInfo;

fn dns_label(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(dns_label)
}

/// Namespaces need DNS labels; RBAC objects only need a valid path segment (`system:foo`);
/// everything else a DNS subdomain.
pub fn name(res: &ResourceInfo, name: &str) -> Result<(), ApiError> {
    let (ok, rule) = if res.group.is_empty() && res.kind == "Namespace" {
        (
            dns_label(name),
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
        )
    } else if res.group == "rbac.authorization.k8s.io" {
        (
            !name.is_empty()
                && name != "."
                && name != ".."
                && !name.contains('/')
                && !name.contains('%'),
            "may not be '.' or '..' and may not contain '/' or '%'",
        )
    } else {
        (
            dns_subdomain(name),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        )
    };
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            res,
            name,
            "metadata.name",
            &format!("Invalid value: \"{name}\": {rule}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;

    fn res(kind: &str) -> ResourceInfo {
        (*builtins().into_iter().find(|r| r.kind == kind).unwrap()).clone()
    }

    #[test]
    fn names_follow_the_per_kind_rule() {
        assert!(name(&res("ConfigMap"), "my-app.v1.2.3").is_ok());
        assert!(name(&res("ConfigMap"), "My_App").is_err());
        assert!(name(&res("Namespace"), "a.b").is_err());
        assert!(name(&res("ClusterRole"), "system:controller:foo").is_ok());
        assert!(name(&res("ClusterRole"), "a/b").is_err());
    }
}
