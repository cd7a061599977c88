//! Reading a request: which endpoint the path names, the query parameters, and the response
//! format the `Accept` header asks for.

use std::collections::HashMap;

/// An object or collection URL, e.g. `/apis/apps/v1/namespaces/ns1/deployments/web/status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub plural: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The deprecated `/watch/` path prefix.
    pub watch_prefix: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Version,
    Health,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`
    GroupVersion {
        group: String,
        version: String,
    },
    /// `/openapi/v3`
    OpenApiRoot,
    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`
    OpenApiGroupVersion {
        group: String,
        version: String,
    },
    /// Any other `/openapi/…` path (v2): not served.
    OpenApiUnserved,
    Resource(ResourcePath),
}

/// Maps a URL path to a [`Route`]; `None` for paths the API does not have.
pub fn parse(path: &str) -> Option<Route> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Some(Route::Version),
        ["healthz" | "livez" | "readyz", ..] => Some(Route::Health),
        ["openapi", "v3"] => Some(Route::OpenApiRoot),
        ["openapi", "v3", "api", version] => Some(Route::OpenApiGroupVersion {
            group: String::new(),
            version: version.to_string(),
        }),
        ["openapi", "v3", "apis", group, version] => Some(Route::OpenApiGroupVersion {
            group: group.to_string(),
            version: version.to_string(),
        }),
        ["openapi", ..] => Some(Route::OpenApiUnserved),
        ["api"] => Some(Route::CoreVersions),
        ["apis"] => Some(Route::Groups),
        ["api", version] => Some(Route::GroupVersion {
            group: String::new(),
            version: version.to_string(),
        }),
        ["apis", group] => Some(Route::Group(group.to_string())),
        ["apis", group, version] => Some(Route::GroupVersion {
            group: group.to_string(),
            version: version.to_string(),
        }),
        ["api", version, rest @ ..] => resource("", version, rest),
        ["apis", group, version, rest @ ..] => resource(group, version, rest),
        _ => None,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Option<Route> {
    let (watch_prefix, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let s = |x: &&str| x.to_string();
    let (namespace, plural, name, subresource) = match rest {
        // `/namespaces/{name}/status|finalize` address the Namespace itself, not a resource
        // named "status" inside it (no resource has that name).
        ["namespaces", ns, sub @ ("status" | "finalize")] => {
            (None, "namespaces", Some(s(ns)), Some(s(sub)))
        }
        ["namespaces", ns, plural, tail @ ..] => {
            let name = tail.first().map(s);
            let sub = tail.get(1).map(s);
            if tail.len() > 2 {
                return None;
            }
            (Some(s(ns)), *plural, name, sub)
        }
        [plural] => (None, *plural, None, None),
        [plural, name] => (None, *plural, Some(s(name)), None),
        [plural, name, sub] => (None, *plural, Some(s(name)), Some(s(sub))),
        _ => return None,
    };
    Some(Route::Resource(ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        namespace,
        plural: plural.to_string(),
        name,
        subresource,
        watch_prefix,
    }))
}

/// Query parameters; repeated keys keep the last value.
#[derive(Debug, Clone, Default)]
pub struct Query(HashMap<String, String>);

impl Query {
    pub fn parse(query: Option<&str>) -> Self {
        let map = query
            .map(|q| {
                q.split('&')
                    .filter(|kv| !kv.is_empty())
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                        (decode(k), decode(v))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Query(map)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }
}

/// Percent-decoding for `application/x-www-form-urlencoded` query strings.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What representation the client asked for in `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Object,
    /// `as=Table` (kubectl get).
    Table,
    /// `as=PartialObjectMetadata[List]` (metadata-only watches).
    Metadata,
    /// `as=APIGroupDiscoveryList` (aggregated discovery).
    AggregatedDiscovery,
}

pub fn format(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::Object;
    };
    // The first acceptable media type wins; kubectl lists Table first, then plain JSON.
    for media in accept.split(',') {
        if media.contains("as=Table") {
            return Format::Table;
        }
        if media.contains("as=PartialObjectMetadata") {
            return Format::Metadata;
        }
        if media.contains("as=APIGroupDiscoveryList")
            && media.contains("v=v2")
            && !media.contains("v2beta1")
        {
            return Format::AggregatedDiscovery;
        }
        if media.contains("application/json") || media.contains("*/*") {
            return Format::Object;
        }
    }
    Format::Object
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse(path) {
            Some(Route::Resource(r)) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn resource_paths() {
        let r = res("/apis/apps/v1/namespaces/ns1/deployments/web/status");
        assert_eq!(
            (
                r.group.as_str(),
                r.namespace.as_deref(),
                r.plural.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            (
                "apps",
                Some("ns1"),
                "deployments",
                Some("web"),
                Some("status")
            )
        );
        let r = res("/api/v1/namespaces/ns1");
        assert_eq!(
            (r.namespace, r.plural.as_str(), r.name.as_deref()),
            (None, "namespaces", Some("ns1"))
        );
        let r = res("/api/v1/namespaces/ns1/status");
        assert_eq!(
            (r.plural.as_str(), r.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let r = res("/api/v1/namespaces/ns1/configmaps");
        assert_eq!(
            (r.namespace.as_deref(), r.plural.as_str(), r.name),
            (Some("ns1"), "configmaps", None)
        );
        let r = res("/api/v1/watch/namespaces/ns1/pods");
        assert!(r.watch_prefix);
        let r = res("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/a.b");
        assert_eq!((r.namespace, r.name.as_deref()), (None, Some("a.b")));
        assert_eq!(parse("/apis/apps"), Some(Route::Group("apps".into())));
        assert_eq!(parse("/nonsense"), None);
    }

    #[test]
    fn query_decoding() {
        let q = Query::parse(Some(
            "labelSelector=app%20in%20(a%2Cb)&watch=true&x=a+b&empty=",
        ));
        assert_eq!(q.get("labelSelector"), Some("app in (a,b)"));
        assert!(q.flag("watch"));
        assert_eq!(q.get("x"), Some("a b"));
        assert_eq!(q.get("empty"), None);
    }

    #[test]
    fn accept_header_formats() {
        assert_eq!(
            format(Some(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
            )),
            Format::Table
        );
        assert_eq!(format(Some("application/json")), Format::Object);
        assert_eq!(
            format(Some(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
            )),
            Format::AggregatedDiscovery
        );
        assert_eq!(format(None), Format::Object);
    }
}
