//! Open string enums: OLM's enum-like fields with the exact wire spelling, that still
//! round-trip values we do not know.
//!
//! Why not a closed `enum`: the OLM CRDs declare most of these fields as plain strings (no
//! schema `enum`), so the API server stores whatever a user or an older/newer OLM wrote —
//! `installPlanApproval: manual`, a phase added by a later OLM, a reason we never heard of.
//! A closed enum would make such an object undeserialisable and stall its reconciler; a bare
//! `String` would lose the compiler's help with the spelling. Each enum here therefore has
//! one variant per OLM constant plus `Other(String)`, serialises as the plain string, and
//! `from_wire("X")` never yields `Other` for a known spelling (so `==` works on variants).

/// Declares an open string enum. `schema: open` emits `{type: string}` (OLM's schema has no
/// enum list); `schema: closed` also emits the `enum` list (OLM's schema enforces it, so the
/// API server rejects other values — we still tolerate them when reading files).
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident (schema: $kind:ident) {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value OLM does not define; kept verbatim so it round-trips.
            Other(String),
        }

        impl $name {
            /// Every spelling OLM defines for this field, in declaration order.
            pub const KNOWN: &'static [&'static str] = &[$($value),+];

            /// The exact wire spelling.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $value, )+
                    Self::Other(other) => other.as_str(),
                }
            }

            /// Parses a wire value; unknown spellings become `Other` (never an error).
            pub fn from_wire(value: &str) -> Self {
                match value {
                    $( $value => Self::$variant, )+
                    other => Self::Other(other.to_owned()),
                }
            }

            /// True when the value is one of OLM's spellings.
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Other(_))
            }
        }

        /// The empty string, as Go's zero value (`None` where OLM names it, else `Other("")`).
        impl Default for $name {
            fn default() -> Self {
                Self::from_wire("")
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = ::std::convert::Infallible;
            fn from_str(value: &str) -> Result<Self, Self::Err> {
                Ok(Self::from_wire(value))
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self::from_wire(value)
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                match Self::from_wire(&value) {
                    Self::Other(_) => Self::Other(value),
                    known => known,
                }
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = <String as ::serde::Deserialize>::deserialize(deserializer)?;
                Ok(Self::from(value))
            }
        }

        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                $crate::api::string_enum::string_enum!(@schema $kind, [$($value),+])
            }
        }
    };
    (@schema open, [$($value:literal),+]) => {
        ::schemars::json_schema!({ "type": "string" })
    };
    (@schema closed, [$($value:literal),+]) => {
        ::schemars::json_schema!({ "type": "string", "enum": [$($value),+] })
    };
}

pub(crate) use string_enum;

#[cfg(test)]
mod tests {
    string_enum! {
        /// Test enum.
        #[allow(dead_code)]
        pub enum Fruit (schema: closed) {
            Apple = "Apple",
            Empty = "",
        }
    }

    #[test]
    fn known_values_parse_to_variants_and_back() {
        let apple: Fruit = serde_json::from_str("\"Apple\"").unwrap();
        assert_eq!(apple, Fruit::Apple);
        assert_eq!(serde_json::to_string(&apple).unwrap(), "\"Apple\"");
        assert_eq!(Fruit::from_wire(""), Fruit::Empty);
    }

    #[test]
    fn unknown_values_round_trip_verbatim() {
        let odd: Fruit = serde_json::from_str("\"apple\"").unwrap();
        assert_eq!(odd, Fruit::Other("apple".into()));
        assert!(!odd.is_known());
        assert_eq!(serde_json::to_string(&odd).unwrap(), "\"apple\"");
        // A known spelling given as an owned String is still the variant.
        assert_eq!(Fruit::from(String::from("Apple")), Fruit::Apple);
    }

    #[test]
    fn closed_schema_lists_the_values() {
        let schema = schemars::schema_for!(Fruit);
        let value = schema.as_value();
        assert_eq!(value["type"], "string");
        assert_eq!(value["enum"], serde_json::json!(Fruit::KNOWN));
    }
}
