use std::sync::Arc;

use super::*;
use crate::catalog::fbc::load_text;

fn check(text: &str) -> Vec<Problem> {
    let (config, mut problems) = load_text(Arc::from("index.yaml"), text);
    problems.extend(validate(&config));
    problems
}

fn rules(text: &str) -> Vec<Rule> {
    check(text).into_iter().map(|p| p.rule).collect()
}

const GOOD: &str = r#"
schema: olm.package
name: etcd
defaultChannel: stable
---
schema: olm.channel
package: etcd
name: stable
entries:
  - name: etcd.v0.9.2
  - name: etcd.v0.9.4
    replaces: etcd.v0.9.2
    skipRange: ">=0.9.0 <0.9.4"
---
schema: olm.bundle
package: etcd
name: etcd.v0.9.2
image: quay.io/etcd/bundle:v0.9.2
properties:
  - type: olm.package
    value: {packageName: etcd, version: 0.9.2}
---
schema: olm.bundle
package: etcd
name: etcd.v0.9.4
image: quay.io/etcd/bundle:v0.9.4
properties:
  - type: olm.package
    value: {packageName: etcd, version: 0.9.4}
  - type: olm.gvk
    value: {group: etcd.database.coreos.com, kind: EtcdCluster, version: v1beta2}
"#;

#[test]
fn valid_catalog_has_no_problems() {
    assert_eq!(check(GOOD), vec![]);
}

#[test]
fn every_problem_is_reported_with_its_location() {
    let text = GOOD
        .replace("defaultChannel: stable\n", "")
        .replace("version: 0.9.2}", "version: v0.9.2}")
        .replace(
            "  - name: etcd.v0.9.2\n",
            "  - name: etcd.v0.9.2\n  - name: etcd.v0.9.3\n",
        );
    let problems = check(&text);
    let found: Vec<Rule> = problems.iter().map(|p| p.rule).collect();
    assert!(found.contains(&Rule::M1), "{problems:#?}");
    assert!(found.contains(&Rule::C14), "{problems:#?}");
    assert!(found.contains(&Rule::C16), "{problems:#?}");
    let c14 = problems.iter().find(|p| p.rule == Rule::C14).unwrap();
    assert_eq!(
        c14.to_string(),
        "index.yaml:15: package \"etcd\", bundle \"etcd.v0.9.2\": error parsing bundle \"etcd.v0.9.2\" version \"v0.9.2\": Invalid character(s) found in major number \"v0\""
    );
    let c16 = problems.iter().find(|p| p.rule == Rule::C16).unwrap();
    assert!(
        c16.message
            .ends_with("for olm.channel entries [etcd.v0.9.3]"),
        "{c16}"
    );
}

#[test]
fn package_rules() {
    assert!(rules("schema: olm.package\nname: Etcd\ndefaultChannel: a\n").contains(&Rule::C3));
    assert!(rules("schema: olm.package\n").contains(&Rule::C1));
    let dup = format!("{GOOD}\n---\nschema: olm.package\nname: etcd\n");
    assert!(rules(&dup).contains(&Rule::C2));
    assert_eq!(
        rules("schema: olm.package\nname: lonely\n"),
        vec![Rule::M1, Rule::M2]
    );
    let missing_default = "schema: olm.package\nname: p\ndefaultChannel: nope\n";
    assert_eq!(rules(missing_default), vec![Rule::M5]);
}

#[test]
fn channel_rules() {
    let heads = GOOD.replace("    replaces: etcd.v0.9.2\n", "");
    let problems = check(&heads);
    let m6 = problems.iter().find(|p| p.rule == Rule::M6).expect("M6");
    assert_eq!(
        m6.message,
        "multiple channel heads found in graph: etcd.v0.9.2, etcd.v0.9.4"
    );
    assert_eq!(m6.location.channel.as_deref(), Some("stable"));
    let unknown = "schema: olm.channel\npackage: ghost\nname: a\nentries: [{name: x}]\n";
    assert_eq!(rules(unknown), vec![Rule::C4]);
    let dup_entry = GOOD.replace(
        "    skipRange: \">=0.9.0 <0.9.4\"\n",
        "    skipRange: \">=0.9.0 <0.9.4\"\n  - name: etcd.v0.9.4\n",
    );
    assert!(rules(&dup_entry).contains(&Rule::C7));
    let empty_skip = GOOD.replace("    skipRange", "    skips: [\"\"]\n    skipRange");
    assert!(rules(&empty_skip).contains(&Rule::M10));
}

#[test]
fn bundle_rules() {
    let no_pkg_prop = GOOD.replace(
        "  - type: olm.package\n    value: {packageName: etcd, version: 0.9.2}\n",
        "  - type: olm.gvk\n    value: {group: g, kind: K, version: v1}\n",
    );
    let problems = check(&no_pkg_prop);
    let c12 = problems.iter().find(|p| p.rule == Rule::C12).expect("C12");
    assert_eq!(
        c12.message,
        "package \"etcd\" bundle \"etcd.v0.9.2\" must have exactly 1 \"olm.package\" property, found 0"
    );
    let mismatch = GOOD.replace(
        "{packageName: etcd, version: 0.9.2}",
        "{packageName: other, version: 0.9.2}",
    );
    assert!(rules(&mismatch).contains(&Rule::C13));
    let no_image = GOOD.replace("image: quay.io/etcd/bundle:v0.9.2\n", "");
    assert!(rules(&no_image).contains(&Rule::M12));
    let dup_version = GOOD.replace("version: 0.9.4}", "version: 0.9.2}");
    let problems = check(&dup_version);
    let m3 = problems.iter().find(|p| p.rule == Rule::M3).expect("M3");
    assert_eq!(
        m3.message,
        "duplicate versions found in bundles: [{0.9.2: [etcd.v0.9.2, etcd.v0.9.4]}]"
    );
    let orphan = format!(
        "{GOOD}\n---\nschema: olm.bundle\npackage: etcd\nname: etcd.v1\nimage: x\nproperties: [{{type: olm.package, value: {{packageName: etcd, version: 1.0.0}}}}]\n"
    );
    assert!(rules(&orphan).contains(&Rule::C15));
    let bad_prop = GOOD.replace(
        "{group: etcd.database.coreos.com, kind: EtcdCluster, version: v1beta2}",
        "{group: 5}",
    );
    let problems = check(&bad_prop);
    let c11 = problems.iter().find(|p| p.rule == Rule::C11).expect("C11");
    assert_eq!(
        c11.message,
        "parse properties for bundle \"etcd.v0.9.4\": parse property[1] of type \"olm.gvk\": json: cannot unmarshal number into Go struct field GVK.group of type string"
    );
    let no_value = GOOD.replace("  - type: olm.gvk\n    value: {group: etcd.database.coreos.com, kind: EtcdCluster, version: v1beta2}\n", "  - type: custom\n");
    assert!(rules(&no_value).contains(&Rule::C11));
}

#[test]
fn deprecation_rules() {
    let with = |entries: &str| {
        format!("{GOOD}\n---\nschema: olm.deprecations\npackage: etcd\nentries:\n{entries}")
    };
    assert_eq!(
        check(&with(
            "  - reference: {schema: olm.bundle, name: etcd.v0.9.2}\n    message: old\n"
        )),
        vec![]
    );
    assert!(
        rules(&with(
            "  - reference: {schema: olm.bundle, name: nope}\n    message: old\n"
        ))
        .contains(&Rule::C23)
    );
    assert!(
        rules(&with(
            "  - reference: {schema: olm.channel, name: nope}\n    message: old\n"
        ))
        .contains(&Rule::C24)
    );
    assert!(
        rules(&with(
            "  - reference: {schema: olm.package, name: x}\n    message: old\n"
        ))
        .contains(&Rule::C25)
    );
    assert!(
        rules(&with(
            "  - reference: {schema: olm.thing, name: x}\n    message: old\n"
        ))
        .contains(&Rule::C26)
    );
    assert!(
        rules(&with(
            "  - reference: {schema: olm.package}\n    message: \"\"\n"
        ))
        .contains(&Rule::M4)
    );
    let c21 = check(&with("  - reference: {name: x}\n    message: m\n"));
    assert_eq!(
        c21[0].message,
        "schema must be set for deprecation entry [etcd] for package '\\x00'"
    );
    let twice = with(
        "  - reference: {schema: olm.package}\n    message: a\n  - reference: {schema: olm.package}\n    message: b\n",
    );
    assert!(rules(&twice).contains(&Rule::C22));
    let unknown = "schema: olm.deprecations\npackage: ghost\nentries: []\n";
    assert_eq!(rules(unknown), vec![Rule::C19]);
}

#[test]
fn load_rules() {
    let problems = check("schema: olm.package\nname: a\nName: b\n");
    assert_eq!(problems[0].rule, Rule::L2);
    assert_eq!(
        problems[0].message,
        "duplicate keys for key \"name\": [Name name]"
    );
    let problems = check("schema: olm.package\nname: 5\n");
    assert_eq!(
        problems[0].message,
        "expected value for key \"name\" to be a string, got %!t(float64=5): 5"
    );
    let problems = check("name: x\n");
    assert_eq!(
        problems[0].message,
        "object '{\"name\":\"x\"}\n' is missing root schema field"
    );
    let problems = check("schema: olm.channel\npackage: p\nname: c\nentries: foo\n");
    assert_eq!(problems[0].rule, Rule::L5);
    assert_eq!(
        problems[0].message,
        "parse channel: json: cannot unmarshal string into Go struct field Channel.entries of type []declcfg.ChannelEntry"
    );
    let problems = check("schema: olm.package\nname: [unclosed\n");
    assert_eq!(problems[0].rule, Rule::L1);
    assert!(problems[0].location.line.is_some(), "{problems:?}");
    let problems = check("- a\n- b\n");
    assert_eq!(problems[0].rule, Rule::L1);
    let problems = check(
        "schema: olm.bundle\npackage: p\nname: b\nproperties:\n- type: olm.bundle.object\n  value: {data: '!!!'}\n",
    );
    assert_eq!(problems[0].rule, Rule::L6);
    assert!(
        problems[0]
            .message
            .contains("illegal base64 data at input byte 0"),
        "{}",
        problems[0]
    );
}

#[test]
fn unparsable_skip_range_is_a_warning_naming_the_entry() {
    let text = GOOD.replace("\">=0.9.0 <0.9.4\"", "\"~0.9.0\"");
    let problems = check(&text);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let w = &problems[0];
    assert!(w.rule.is_warning());
    assert_eq!(w.location.bundle.as_deref(), Some("etcd.v0.9.4"));
    assert_eq!(
        w.to_string(),
        "index.yaml:6: package \"etcd\", channel \"stable\", bundle \"etcd.v0.9.4\": skipRange \"~0.9.0\" is not a valid semver range, so OLM ignores it: Could not parse Range \"~0.9.0\": Could not parse comparator \"~\" in \"~0.9.0\""
    );
}

/// C11 for `olm.csv.metadata` is made at load; however the values are then held (text, packed,
/// not at all), validation reports the same problems, and a packed value reads back exactly.
#[test]
fn csv_metadata_hold_does_not_change_problems() {
    use crate::catalog::fbc::{CsvMetadataHold, LoadOptions, load_text_with};
    use crate::catalog::model::Property;
    use crate::catalog::properties::{CSV_METADATA, TypedProperty};
    let bundle = |props: &str| {
        format!(
            "{}---\nschema: olm.bundle\npackage: etcd\nname: etcd.v0.9.5\nimage: x\nproperties:\n  - type: olm.package\n    value: {{packageName: etcd, version: 0.9.5}}\n{props}",
            GOOD.replace(
                "    skipRange:",
                "  - name: etcd.v0.9.5\n    replaces: etcd.v0.9.4\n    skipRange:"
            )
        )
    };
    let cases = [
        bundle(
            "  - type: olm.csv.metadata\n    value: {displayName: E, keywords: [a, b], annotations: {alm-examples: '[{\"a\": 1}]'}}\n",
        ),
        bundle("  - type: olm.csv.metadata\n    value: {keywords: a}\n"),
        bundle(
            "  - type: olm.gvk\n    value: 5\n  - type: olm.csv.metadata\n    value: {displayName: E}\n",
        ),
        bundle(
            "  - type: olm.csv.metadata\n    value: {displayName: E}\n  - type: olm.gvk\n    value: 5\n",
        ),
        bundle(
            "  - type: olm.csv.metadata\n    value: [1]\n  - type: olm.csv.metadata\n    value: {provider: p}\n",
        ),
        bundle("  - type: olm.csv.metadata\n"),
        // Block style, as opm writes it: `CheckOnly` empties these strings at load (only when
        // the bundle loads cleanly and its metadata passes, else it reads the full text).
        bundle(
            "  - type: olm.csv.metadata\n    value:\n      annotations:\n        alm-examples: |-\n          [{\"a\": 1}]\n        n: 'x'\n      description: some\n        text\n      keywords:\n      - a\n      - 'b'\n      maturity: alpha\n",
        ),
        bundle("  - type: olm.csv.metadata\n    value:\n      description: d\n      keywords: a\n"),
        bundle(
            "  - type: olm.csv.metadata\n    value:\n      annotations:\n        replicas: 5\n        ok: \"yes\"\n",
        ),
        bundle(
            "  - type: olm.csv.metadata\n    value:\n      description: d\n      maturity: [x]\n",
        ),
        bundle(
            "  - type: olm.csv.metadata\n    value:\n      displayName: d\n  - type: olm.bundle.object\n    value:\n      data: not base64!\n",
        ),
        bundle("  - value:\n      description: 5\n    type: olm.csv.metadata\n"),
        // No schema: the message quotes the whole document, so it must be read in full.
        format!(
            "{GOOD}---\nname: x\nproperties:\n  - type: olm.csv.metadata\n    value:\n      description: |-\n        one line\n      keywords:\n      - >-\n        folded\n"
        ),
        format!(
            "{GOOD}---\nschema: olm.package\nname: other\nproperties:\n  - type: olm.csv.metadata\n    value:\n      description: 5\n---\nschema: olm.channel\npackage: etcd\nname: beta\nentries:\n  - name: etcd.v0.9.2\nproperties:\n  - type: olm.csv.metadata\n    value:\n      description: text\n"
        ),
    ];
    for text in &cases {
        let expected = check(text);
        for hold in [
            CsvMetadataHold::Text,
            CsvMetadataHold::Packed,
            CsvMetadataHold::CheckOnly,
        ] {
            let options = LoadOptions { csv_metadata: hold };
            let (config, mut problems) = load_text_with(Arc::from("index.yaml"), text, options);
            problems.extend(validate(&config));
            assert_eq!(problems, expected, "{hold:?}\n{text}");
            if hold == CsvMetadataHold::Packed {
                let (plain, _) = load_text(Arc::from("index.yaml"), text);
                for (b, p) in config.bundles.iter().zip(&plain.bundles) {
                    let typed = |props: &[Property]| -> Vec<String> {
                        props
                            .iter()
                            .filter(|p| p.type_ == CSV_METADATA)
                            .filter_map(|p| match p.typed() {
                                Ok(TypedProperty::CsvMetadata(raw)) => Some(raw.get().to_string()),
                                _ => None,
                            })
                            .collect()
                    };
                    assert_eq!(typed(&b.properties), typed(&p.properties));
                    assert_eq!(b.properties, p.properties);
                }
            }
        }
    }
    assert!(!check(&cases[0]).iter().any(|p| p.rule == Rule::C11));
    assert!(check(&cases[1]).iter().any(|p| p.rule == Rule::C11));
}
