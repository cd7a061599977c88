//! `opm validate` (v1.50.0) rules over a loaded catalog: conversion (C) and model (M) rules of
//! docs/catalog.md §7. Unlike opm, every problem is collected instead of stopping at the
//! first conversion error, and each names its file, package, channel and bundle.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::error::{Location, Problem, Rule};
use super::fbc::parallel_map;
use super::model::{
    Bundle, Channel, DeclarativeConfig, Deprecations, Package, SCHEMA_BUNDLE, SCHEMA_CHANNEL,
    SCHEMA_PACKAGE,
};
use super::properties::{self, TypedProperty};
use super::semver_range::parse_strict;
use super::upgrade_graph::{GraphEntry, GraphError, UpgradeGraph};

const DNS1123_LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Kubernetes `IsDNS1123Label` messages for `name` (empty when valid).
pub fn dns1123_label_errors(name: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    if name.len() > 63 {
        errs.push("must be no more than 63 characters");
    }
    let b = name.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter().all(|&c| alnum(c) || c == b'-');
    if !ok {
        errs.push(DNS1123_LABEL_MESSAGE);
    }
    errs
}

/// Go's `%q` of an int: a quoted character literal.
fn go_quoted_rune(i: usize) -> String {
    match char::from_u32(i as u32) {
        Some(c) if !c.is_control() && c != '\'' && c != '\\' => format!("'{c}'"),
        _ if i < 0x100 => format!("'\\x{i:02x}'"),
        _ => format!("'\\u{i:04x}'"),
    }
}

struct PackageView<'a> {
    package: &'a Package,
    channels: Vec<&'a Channel>,
    bundles: BTreeMap<&'a str, &'a Bundle>,
    deprecations: Option<&'a Deprecations>,
}

/// Every conversion and model problem of `config` (load problems come from the loader).
pub fn validate(config: &DeclarativeConfig) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut views: BTreeMap<&str, PackageView<'_>> = BTreeMap::new();

    for p in &config.packages {
        let at = Location::from_origin(&p.origin).package(&p.name);
        if p.name.is_empty() {
            out.push(Problem::new(
                Rule::C1,
                at,
                "config contains package with no name",
            ));
            continue;
        }
        if views.contains_key(p.name.as_str()) {
            out.push(Problem::new(
                Rule::C2,
                at,
                format!("duplicate package {:?}", p.name),
            ));
            continue;
        }
        let errs = dns1123_label_errors(&p.name);
        if !errs.is_empty() {
            out.push(Problem::new(
                Rule::C3,
                at,
                format!("invalid package name {:?}: [{}]", p.name, errs.join(" ")),
            ));
        }
        views.insert(
            &p.name,
            PackageView {
                package: p,
                channels: Vec::new(),
                bundles: BTreeMap::new(),
                deprecations: None,
            },
        );
    }

    for c in &config.channels {
        let at = Location::from_origin(&c.origin)
            .package(&c.package)
            .channel(&c.name);
        let Some(view) = views.get_mut(c.package.as_str()) else {
            out.push(Problem::new(
                Rule::C4,
                at,
                format!("unknown package {:?} for channel {:?}", c.package, c.name),
            ));
            continue;
        };
        if c.name.is_empty() {
            out.push(Problem::new(
                Rule::C5,
                at,
                format!("package {:?} contains channel with no name", c.package),
            ));
            continue;
        }
        if view.channels.iter().any(|o| o.name == c.name) {
            out.push(Problem::new(
                Rule::C6,
                at,
                format!("package {:?} has duplicate channel {:?}", c.package, c.name),
            ));
            continue;
        }
        let mut seen = HashSet::new();
        for e in &c.entries {
            if !seen.insert(e.name.as_str()) {
                out.push(Problem::new(
                    Rule::C7,
                    at.clone().bundle(&e.name),
                    format!(
                        "invalid package {:?}, channel {:?}: duplicate entry {:?}",
                        c.package, c.name, e.name
                    ),
                ));
            }
        }
        view.channels.push(c);
    }

    // C11–C14 read property values, so they run on all cores up front; their problems are
    // merged below in catalog order. (C11 for CSV metadata, most of a catalog's bytes, was
    // made at load where it passed: `Property::is_checked`.)
    let mut property_problems = parallel_map(&config.bundles, |b| {
        let mut found = Vec::new();
        if !b.package.is_empty() {
            check_bundle_properties(b, bundle_location(b), &mut found);
        }
        found
    })
    .into_iter();
    for b in &config.bundles {
        let checked = property_problems.next().unwrap_or_default();
        let at = bundle_location(b);
        if b.package.is_empty() {
            out.push(Problem::new(
                Rule::C8,
                at,
                format!("package name must be set for bundle {:?}", b.name),
            ));
            continue;
        }
        let Some(view) = views.get_mut(b.package.as_str()) else {
            out.push(Problem::new(
                Rule::C9,
                at,
                format!("unknown package {:?} for bundle {:?}", b.package, b.name),
            ));
            continue;
        };
        if view.bundles.contains_key(b.name.as_str()) {
            out.push(Problem::new(
                Rule::C10,
                at,
                format!("package {:?} has duplicate bundle {:?}", b.package, b.name),
            ));
            continue;
        }
        out.extend(checked);
        if !view
            .channels
            .iter()
            .any(|c| c.entries.iter().any(|e| e.name == b.name))
        {
            out.push(Problem::new(
                Rule::C15,
                at,
                format!(
                    "package {:?}, bundle {:?} not found in any channel entries",
                    b.package, b.name
                ),
            ));
        }
        view.bundles.insert(&b.name, b);
    }

    check_deprecations(config, &mut views, &mut out);

    let views: Vec<&PackageView<'_>> = views.values().collect();
    for found in parallel_map(&views, |view| {
        let mut found = Vec::new();
        validate_package(view, &mut found);
        found
    }) {
        out.extend(found);
    }
    out
}

fn bundle_location(b: &Bundle) -> Location {
    Location::from_origin(&b.origin)
        .package(&b.package)
        .bundle(&b.name)
}

/// C11–C14 for one bundle.
fn check_bundle_properties(b: &Bundle, at: Location, out: &mut Vec<Problem>) {
    if let Err(e) = properties::check_properties(&b.properties) {
        out.push(Problem::new(
            Rule::C11,
            at,
            format!("parse properties for bundle {:?}: {e}", b.name),
        ));
        return;
    }
    let packages: Vec<_> = b
        .properties
        .iter()
        .filter(|p| p.type_ == properties::PACKAGE)
        .filter_map(|p| match p.typed() {
            Ok(TypedProperty::Package(v)) => Some(v),
            _ => None,
        })
        .collect();
    if packages.len() != 1 {
        out.push(Problem::new(
            Rule::C12,
            at,
            format!(
                "package {:?} bundle {:?} must have exactly 1 {:?} property, found {}",
                b.package,
                b.name,
                properties::PACKAGE,
                packages.len()
            ),
        ));
        return;
    }
    let p = &packages[0];
    if p.package_name != b.package {
        out.push(Problem::new(
            Rule::C13,
            at.clone(),
            format!(
                "package {:?} does not match {:?} property {:?}",
                b.package,
                properties::PACKAGE,
                p.package_name
            ),
        ));
    }
    if let Err(e) = parse_strict(&p.version) {
        out.push(Problem::new(
            Rule::C14,
            at,
            format!(
                "error parsing bundle {:?} version {:?}: {e}",
                b.name, p.version
            ),
        ));
    }
}

/// C18–C26.
fn check_deprecations<'a>(
    config: &'a DeclarativeConfig,
    views: &mut BTreeMap<&'a str, PackageView<'a>>,
    out: &mut Vec<Problem>,
) {
    for (i, d) in config.deprecations.iter().enumerate() {
        let at = Location::from_origin(&d.origin).package(&d.package);
        if d.package.is_empty() {
            out.push(Problem::new(
                Rule::C18,
                at,
                format!("package name must be set for deprecation item {i}"),
            ));
            continue;
        }
        let Some(view) = views.get_mut(d.package.as_str()) else {
            out.push(Problem::new(
                Rule::C19,
                at,
                format!(
                    "cannot apply deprecations to an unknown package {:?}",
                    d.package
                ),
            ));
            continue;
        };
        if view.deprecations.is_some() {
            out.push(Problem::new(
                Rule::C20,
                at,
                format!(
                    "expected a maximum of one deprecation per package: {:?}",
                    d.package
                ),
            ));
            continue;
        }
        let mut seen = HashSet::new();
        for (j, e) in d.entries.iter().enumerate() {
            let r = &e.reference;
            let reference = format!(
                "declcfg.PackageScopedReference{{Schema:{:?}, Name:{:?}}}",
                r.schema, r.name
            );
            if r.schema.is_empty() {
                out.push(Problem::new(
                    Rule::C21,
                    at.clone(),
                    format!(
                        "schema must be set for deprecation entry [{}] for package {}",
                        d.package,
                        go_quoted_rune(j)
                    ),
                ));
                continue;
            }
            if !seen.insert(r) {
                out.push(Problem::new(
                    Rule::C22,
                    at.clone(),
                    format!(
                        "duplicate deprecation entry {reference} for package {:?}",
                        d.package
                    ),
                ));
                continue;
            }
            match r.schema.as_str() {
                SCHEMA_BUNDLE if !view.bundles.contains_key(r.name.as_str()) => out.push(Problem::new(
                    Rule::C23,
                    at.clone().bundle(&r.name),
                    format!(
                        "cannot deprecate bundle {:?} for package {:?}: bundle not found",
                        r.name, d.package
                    ),
                )),
                SCHEMA_CHANNEL if !view.channels.iter().any(|c| c.name == r.name) => out.push(Problem::new(
                    Rule::C24,
                    at.clone().channel(&r.name),
                    format!(
                        "cannot deprecate channel {:?} for package {:?}: channel not found",
                        r.name, d.package
                    ),
                )),
                SCHEMA_PACKAGE if !r.name.is_empty() => out.push(Problem::new(
                    Rule::C25,
                    at.clone(),
                    format!(
                        "package name must be empty for deprecated package {:?} (specified {:?})",
                        d.package, r.name
                    ),
                )),
                SCHEMA_BUNDLE | SCHEMA_CHANNEL | SCHEMA_PACKAGE => {}
                _ => out.push(Problem::new(
                    Rule::C26,
                    at.clone(),
                    format!(
                        "cannot deprecate object {reference} referenced by entry {j} for package {:?}: object schema unknown",
                        d.package
                    ),
                )),
            }
        }
        view.deprecations = Some(d);
    }
}

fn deprecation_message<'a>(view: &PackageView<'a>, schema: &str, name: &str) -> Option<&'a str> {
    view.deprecations?
        .entries
        .iter()
        .find(|e| e.reference.schema == schema && e.reference.name == name)
        .map(|e| e.message.as_str())
}

/// C16 and the model rules M1–M13 for one package.
fn validate_package(view: &PackageView<'_>, out: &mut Vec<Problem>) {
    let p = view.package;
    let at = Location::from_origin(&p.origin).package(&p.name);
    let default = p.default_channel.as_deref().filter(|d| !d.is_empty());
    match default {
        None => out.push(Problem::new(Rule::M1, at.clone(), "default channel must be set")),
        // C17: opm synthesises an empty channel of that name, which then fails M5.
        Some(d) if !view.channels.iter().any(|c| c.name == d) => out.push(Problem::new(
            Rule::M5,
            at.clone().channel(d),
            "channel must contain at least one bundle (it is the package's defaultChannel but no olm.channel blob defines it)",
        )),
        Some(_) => {}
    }
    if view.channels.is_empty() && default.is_none() {
        out.push(Problem::new(
            Rule::M2,
            at.clone(),
            "package must contain at least one channel",
        ));
    }
    let mut versions: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for c in &view.channels {
        let cat = Location::from_origin(&c.origin)
            .package(&p.name)
            .channel(&c.name);
        let missing: BTreeSet<&str> = c
            .entries
            .iter()
            .map(|e| e.name.as_str())
            .filter(|n| !view.bundles.contains_key(n))
            .collect();
        if !missing.is_empty() {
            out.push(Problem::new(
                Rule::C16,
                cat.clone(),
                format!(
                    "no olm.bundle blobs found in package {:?} for olm.channel entries [{}]",
                    p.name,
                    missing.iter().copied().collect::<Vec<_>>().join(" ")
                ),
            ));
        }
        if c.entries.is_empty() {
            out.push(Problem::new(
                Rule::M5,
                cat.clone(),
                "channel must contain at least one bundle",
            ));
        } else {
            let graph = UpgradeGraph::new(
                &p.name,
                &c.name,
                c.entries.iter().map(|e| GraphEntry::new(e, None)),
            );
            if let Err(e) = graph.check_replaces_chain() {
                let rule = match e {
                    GraphError::Stranded { .. } => Rule::M8,
                    _ => Rule::M6,
                };
                out.push(Problem::new(rule, cat.clone(), e.to_string()));
            }
        }
        for e in &c.entries {
            if let Some(range) = e.skip_range.as_deref().filter(|r| !r.is_empty())
                && let Err(err) = super::semver_range::VersionRange::parse(range)
            {
                out.push(Problem::new(
                    Rule::W1,
                    cat.clone().bundle(&e.name),
                    format!(
                        "skipRange {range:?} is not a valid semver range, so OLM ignores it: {err}"
                    ),
                ));
            }
            let Some(b) = view.bundles.get(e.name.as_str()) else {
                continue;
            };
            let bat = Location::from_origin(&b.origin)
                .package(&p.name)
                .channel(&c.name)
                .bundle(&b.name);
            for (i, s) in e.skips.iter().enumerate() {
                if s.is_empty() {
                    out.push(Problem::new(
                        Rule::M10,
                        bat.clone(),
                        format!("skip[{i}] is empty"),
                    ));
                }
            }
            if b.image.is_empty() && b.objects.is_empty() {
                out.push(Problem::new(
                    Rule::M12,
                    bat.clone(),
                    "bundle image must be set",
                ));
            }
            if deprecation_message(view, SCHEMA_BUNDLE, &b.name) == Some("") {
                out.push(Problem::new(
                    Rule::M13,
                    bat.clone(),
                    "invalid deprecation: message must be set",
                ));
            }
            if let Some(v) = properties::packages(&b.properties)
                .next()
                .and_then(|pv| parse_strict(&pv.version).ok())
            {
                versions.entry(v.to_string()).or_default().insert(&b.name);
            }
        }
        if deprecation_message(view, SCHEMA_CHANNEL, &c.name) == Some("") {
            out.push(Problem::new(
                Rule::M9,
                cat,
                "invalid deprecation: message must be set",
            ));
        }
    }
    let duplicates: Vec<String> = versions
        .iter()
        .filter(|(_, names)| names.len() > 1)
        .map(|(v, names)| {
            format!(
                "{{{v}: [{}]}}",
                names.iter().copied().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    if !duplicates.is_empty() {
        out.push(Problem::new(
            Rule::M3,
            at.clone(),
            format!(
                "duplicate versions found in bundles: [{}]",
                duplicates.join(" ")
            ),
        ));
    }
    if deprecation_message(view, SCHEMA_PACKAGE, "") == Some("") {
        out.push(Problem::new(
            Rule::M4,
            at,
            "invalid deprecation: message must be set",
        ));
    }
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
