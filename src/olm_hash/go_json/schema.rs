//! How a Go type is written by `encoding/json`: the vocabulary of the member tables in
//! `types_*.rs` (docs/api-types.md §6.2 rule 4 marks: none, `?`, `?*`, `{}`).

/// The Go shape of a value.
#[derive(Debug)]
pub(crate) enum Ty {
    Str,
    Int,
    Bool,
    /// `resource.Quantity`: canonicalised string; a missing value member is `"0"`.
    Quantity,
    /// `intstr.IntOrString`: keeps its JSON type; a missing value member is `0`.
    IntOrString,
    /// `metav1.Time`: RFC 3339 in UTC, whole seconds; a missing value member is `null`.
    Time,
    /// Free JSON (`FieldsV1`, `RawExtension`): compacted, member order kept.
    Raw,
    /// `map[string]T`: keys written in byte order.
    Map(&'static Ty),
    List(&'static Ty),
    Struct(&'static [Field]),
}

/// When a member is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presence {
    /// No `omitempty` on a value: always written, its zero value when absent (`""`, `0`,
    /// `false`, `null` for lists and maps, the struct with its own rules — the `{}` mark).
    Always,
    /// `?`: `omitempty`. Scalars, lists and maps are left out when absent or empty; nested
    /// objects (Go pointers) only when absent or `null`.
    OmitEmpty,
    /// `?*`: a pointer with `omitempty`: left out only when absent or `null`.
    OmitNull,
    /// A pointer without `omitempty`: `null` when absent.
    NullWhenAbsent,
}

#[derive(Debug)]
pub(crate) struct Field {
    pub name: &'static str,
    pub ty: Ty,
    pub presence: Presence,
}

/// Member without a mark.
pub(crate) const fn req(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        presence: Presence::Always,
    }
}

/// Member marked `?`.
pub(crate) const fn opt(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        presence: Presence::OmitEmpty,
    }
}

/// Member marked `?*`.
pub(crate) const fn ptr(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        presence: Presence::OmitNull,
    }
}

/// Pointer member written as `null` when absent.
pub(crate) const fn nullable(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        presence: Presence::NullWhenAbsent,
    }
}

pub(crate) const STR: Ty = Ty::Str;
pub(crate) const INT: Ty = Ty::Int;
pub(crate) const BOOL: Ty = Ty::Bool;
pub(crate) const QTY: Ty = Ty::Quantity;
pub(crate) const INT_OR_STR: Ty = Ty::IntOrString;
pub(crate) const TIME: Ty = Ty::Time;
pub(crate) const RAW: Ty = Ty::Raw;
pub(crate) const STRS: Ty = Ty::List(&Ty::Str);
pub(crate) const STR_MAP: Ty = Ty::Map(&Ty::Str);
pub(crate) const QTY_MAP: Ty = Ty::Map(&Ty::Quantity);
