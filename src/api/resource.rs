//! Root objects for the kinds whose `spec` is optional on the wire.
//!
//! `#[derive(CustomResource)]` makes `spec` a required field of the root struct, so an
//! OperatorGroup or OLMConfig written without `spec` — the common "global-operators"
//! OperatorGroup, `kubectl apply` of a bare `OLMConfig/cluster` — would fail to deserialise.
//! OLM's CRDs require only `metadata` for these kinds, so they get this hand-written root
//! instead: `spec` defaults when absent and, like OLM's Go types (a non-pointer struct
//! without `omitempty`), is always written.

/// Declares a root object with `metadata`, a defaulted `spec` and an optional `status`, and
/// implements `kube::Resource`, `HasSpec` and `HasStatus` for it.
macro_rules! root_with_optional_spec {
    (
        $(#[$meta:meta])*
        pub struct $root:ident {
            spec: $spec:ty,
            status: $status:ty,
        }
        group = $group:literal, version = $version:literal, kind = $kind:literal,
        plural = $plural:literal, scope = $scope:ty
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, ::serde::Deserialize)]
        pub struct $root {
            pub metadata: ::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            #[serde(default)]
            pub spec: $spec,
            #[serde(default)]
            pub status: Option<$status>,
        }

        impl $root {
            /// An object with the given name and spec, no status.
            pub fn new(name: &str, spec: $spec) -> Self {
                Self {
                    metadata: ::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        name: Some(name.to_owned()),
                        ..Default::default()
                    },
                    spec,
                    status: None,
                }
            }
        }

        impl ::serde::Serialize for $root {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use ::serde::ser::SerializeStruct;
                let fields = 4 + usize::from(self.status.is_some());
                let mut obj = serializer.serialize_struct(stringify!($root), fields)?;
                obj.serialize_field("apiVersion", concat!($group, "/", $version))?;
                obj.serialize_field("kind", $kind)?;
                obj.serialize_field("metadata", &self.metadata)?;
                obj.serialize_field("spec", &self.spec)?;
                if let Some(status) = &self.status {
                    obj.serialize_field("status", status)?;
                }
                obj.end()
            }
        }

        impl ::kube::Resource for $root {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> ::std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> ::std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> ::std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn api_version(_: &()) -> ::std::borrow::Cow<'_, str> {
                concat!($group, "/", $version).into()
            }
            fn plural(_: &()) -> ::std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }

        impl ::kube::core::object::HasSpec for $root {
            type Spec = $spec;
            fn spec(&self) -> &$spec {
                &self.spec
            }
            fn spec_mut(&mut self) -> &mut $spec {
                &mut self.spec
            }
        }

        impl ::kube::core::object::HasStatus for $root {
            type Status = $status;
            fn status(&self) -> Option<&$status> {
                self.status.as_ref()
            }
            fn status_mut(&mut self) -> &mut Option<$status> {
                &mut self.status
            }
        }
    };
}

pub(crate) use root_with_optional_spec;
