use proptest::prelude::*;
use serde_json::Value;

use super::to_json_documents;
use crate::catalog::fbc::documents::split_yaml_slow;

fn slow(text: &str) -> Option<Vec<Value>> {
    split_yaml_slow(text).ok().map(|docs| {
        docs.iter()
            .map(|d| serde_json::from_str(&d.json).unwrap())
            .collect()
    })
}

fn fast(text: &str) -> Option<Vec<Value>> {
    to_json_documents(text).map(|docs| {
        docs.iter()
            .map(|(j, _)| serde_json::from_str(j).unwrap_or_else(|e| panic!("bad JSON {j}: {e}")))
            .collect()
    })
}

/// The fast path either declines or agrees with libyaml.
fn agrees(text: &str) {
    if let Some(f) = fast(text) {
        assert_eq!(Some(f), slow(text), "fast path disagrees on:\n{text}");
    }
}

/// The fast path handles `text` and agrees with libyaml.
fn handles(text: &str) {
    let f = fast(text).unwrap_or_else(|| panic!("fast path declined:\n{text}"));
    assert_eq!(Some(f), slow(text), "fast path disagrees on:\n{text}");
}

#[test]
fn handles_go_yaml_style() {
    handles("---\nschema: olm.package\nname: etcd\ndefaultChannel: stable\n");
    handles("a:\n- x\n- y: 1\n  z: [] \n- {}\nb: ~\n");
    handles(
        "entries:\n  - name: a\n    skips:\n      - b\n      - c\n    skipRange: '>=1.0.0 <1.2.0'\n",
    );
    handles("k: |\n  line 1\n\n   indented\n  last\n");
    handles("k: |-\n  a\n  b\n\n\nnext: 1\n");
    handles("k: |+\n  a\n\n\nnext: 1\n");
    handles("k: >-\n  folded\n  text\n\n  para\n    more\n  end\n");
    handles("k: >\n  a\n  b\n");
    handles("d: 'it''s a\n  long one'\ne: \"tab\\there \\u00e9 \\\"q\\\" \\\n  joined\"\n");
    handles("d: \"line one\n  \n  line three\"\n");
    handles(
        "p: a long plain\n  scalar that goes\n\n  on\nq: 1.5\nr: 007\ns: 0x1f\nt: true\nu: null\nv:\n",
    );
    handles("x: a#b # comment\n# full comment\ny: http://example.com:8080/x\n");
    handles("\"quoted key\": 1\n'single': 2\nplain key with spaces  : 3\n");
    handles("---\na: 1\n---\n---\nb: 2\n...\n".trim_end_matches("...\n"));
    handles("top:\n  nested:\n    deeper: [] # c\n  back: x\nout: y\n");
    handles("- a\n- b:\n    c: d\n-\n  e: f\n");
    handles("k: é ü 中文 ok\n");
    handles(
        "keywords: ['aqua-security', 'key value', \"x\\ty\"]\nprovider: {name: Infinispan, n: 5}\nc: [ ] # e\nd: [a, 1, true, null, ~, 1.5]\n",
    );
}

#[test]
fn declines_what_it_does_not_handle() {
    for text in [
        "a: &x 1\nb: *x\n",
        "a: !tag 1\n",
        "a: [1, [2]]\n",
        "a: [1,\n  2]\n",
        "a: [1, ]\n",
        "a: {b: http://x}\n",
        "? complex\n: value\n",
        "a:\r\n  b: 1\r\n",
        "a:\n\tb: 1\n",
        "k: |2\n   x\n",
        "%YAML 1.2\n---\na: 1\n",
        "a: 1\na: 2\n",
        "a: b: c\n",
        "a: \"unterminated\n",
        "- - a\n",
        "k: 340282366920938463463374607431768211455\n",
    ] {
        assert!(fast(text).is_none(), "should decline:\n{text}");
    }
}

#[test]
fn fuzz_regressions() {
    // A byte-order mark after the start; whitespace-only last line without newline.
    for text in ["\n\u{feff}", "0\n ", "a: b\n  ", "k: |\n  x\n "] {
        agrees(text);
    }
}

#[test]
fn reports_document_lines() {
    let docs = to_json_documents("# c\n---\na: 1\n---\n\nb: 2\n").unwrap();
    let lines: Vec<u32> = docs.iter().map(|(_, l)| *l).collect();
    assert_eq!(lines, [3, 6]);
}

fn json_value() -> impl Strategy<Value = Value> {
    let text = prop_oneof![
        "[a-z]{1,8}",
        "[ -~]{0,20}",
        "[a-z ]{1,30}\n[a-z ]{0,30}",
        Just("yes".to_string()),
        Just("0755".to_string()),
        Just("1.0".to_string()),
        Just("null".to_string()),
        Just("- x".to_string()),
        Just("a: b".to_string()),
        Just("  lead".to_string()),
        Just("trail  ".to_string()),
        Just("é\u{1F600}".to_string()),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1.0e6f64..1.0e6).prop_map(Value::from),
        text.prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z][a-zA-Z0-9./-]{0,10}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn agrees_with_libyaml_on_emitted_yaml(v in json_value()) {
        let text = serde_yaml_ng::to_string(&v).unwrap();
        agrees(&text);
    }

    #[test]
    fn agrees_with_libyaml_on_mangled_yaml(v in json_value(), cut in 0usize..200, insert in "[ :#'\"|>\\-\n]{1,3}") {
        let mut text = serde_yaml_ng::to_string(&v).unwrap();
        let at = text.char_indices().map(|(i, _)| i).nth(cut % text.chars().count().max(1)).unwrap_or(0);
        text.insert_str(at, &insert);
        agrees(&text);
    }
}

/// Every document `for_each_document_emptying_csv_metadata` hands over, with whether strings
/// were emptied; `want_full` says which emptied documents to ask for again in full.
fn emptying(text: &str, want_full: impl Fn(&str) -> bool) -> Vec<(String, u32, bool)> {
    let mut seen = Vec::new();
    super::for_each_document_emptying_csv_metadata(
        text,
        &mut String::new(),
        |json, line, emptied| {
            seen.push((json.to_owned(), line, emptied));
            !want_full(json)
        },
    )
    .expect("fast path declined");
    seen
}

#[test]
fn emptying_csv_metadata_empties_only_its_strings() {
    let text = "schema: olm.bundle\nname: b\nproperties:\n- type: olm.gvk\n  value:\n    kind: K\n- type: olm.csv.metadata\n  value:\n    annotations:\n      alm-examples: |-\n        [{\"a\": 1}]\n      n: 5\n    description: \"long \\\"text\\\"\"\n    keywords:\n    - a\n    - true\n    provider:\n      name: p\n    labels: {x: y}\n    t: ''\n---\nschema: olm.package\nname: p\ndescription: kept\n";
    let seen = emptying(text, |_| false);
    let docs: Vec<Value> = seen
        .iter()
        .map(|(j, _, _)| serde_json::from_str(j).unwrap())
        .collect();
    assert_eq!(
        docs[0],
        serde_json::json!({
            "schema": "olm.bundle",
            "name": "b",
            "properties": [
                {"type": "olm.gvk", "value": {"kind": "K"}},
                {"type": "olm.csv.metadata", "value": {
                    "annotations": {"alm-examples": "", "n": 5},
                    "description": "",
                    "keywords": ["", true],
                    "provider": {"name": ""},
                    // Flow collections are written in full.
                    "labels": {"x": "y"},
                    "t": "",
                }},
            ],
        })
    );
    assert_eq!(
        docs[1],
        serde_json::json!({"schema": "olm.package", "name": "p", "description": "kept"})
    );
    assert_eq!(
        seen.iter()
            .map(|(_, line, emptied)| (*line, *emptied))
            .collect::<Vec<_>>(),
        [(1, true), (22, false)]
    );
}

#[test]
fn nothing_is_emptied_outside_a_csv_metadata_value_or_without_strings() {
    for text in [
        "properties:\n- value:\n    description: d\n  type: olm.csv.metadata\n",
        "properties:\n- type: olm.gvk\n  value:\n    description: d\n",
        "spec:\n  properties:\n  - type: olm.csv.metadata\n    value:\n      description: d\n",
        // The right place, but no string to empty (a number, a flow sequence).
        "properties:\n- type: olm.csv.metadata\n  value:\n    description: 5\n    replicas: [1]\n",
    ] {
        let seen = emptying(text, |_| false);
        assert_eq!(seen.len(), 1);
        assert!(!seen[0].2, "emptied:\n{text}");
        assert_eq!(
            Some(vec![serde_json::from_str::<Value>(&seen[0].0).unwrap()]),
            slow(text)
        );
    }
}

#[test]
fn a_document_asked_for_in_full_is_handed_over_again() {
    let text = "a: 1\n---\nproperties:\n- type: olm.csv.metadata\n  value:\n    description: |\n      text\n---\nb: 2\n";
    let seen = emptying(text, |json| json.contains("olm.csv.metadata"));
    let full = slow(text).unwrap();
    let handed: Vec<(Value, u32, bool)> = seen
        .iter()
        .map(|(j, line, emptied)| (serde_json::from_str(j).unwrap(), *line, *emptied))
        .collect();
    assert_eq!(
        handed,
        [
            (full[0].clone(), 1, false),
            (
                serde_json::json!({"properties": [{"type": "olm.csv.metadata", "value": {"description": ""}}]}),
                3,
                true
            ),
            (full[1].clone(), 3, false),
            (full[2].clone(), 9, false),
        ]
    );
}

proptest! {
    /// Emptied strings are only checked (`check_text`): it must accept exactly what escaping
    /// them (`push_escaped`) accepts, or emptying would change which files take the fast path.
    #[test]
    fn check_text_accepts_what_escaping_accepts(s in "(?s).{0,40}") {
        prop_assert_eq!(
            super::scalar::check_text(&s).is_some(),
            super::scalar::push_escaped(&mut String::new(), &s).is_some()
        );
    }
}

#[test]
fn check_text_rejects_what_libyaml_rejects() {
    for bad in [
        "a\u{7f}", "\u{1}", "x\u{85}", "\u{2028}", "\u{feff}", "\u{fffe}",
    ] {
        assert_eq!(super::scalar::check_text(bad), None, "{bad:?}");
        assert_eq!(super::scalar::push_escaped(&mut String::new(), bad), None);
    }
    for good in ["plain \"json\" {}", "tab\there", "é ü 中文"] {
        assert_eq!(super::scalar::check_text(good), Some(()), "{good:?}");
    }
}

#[test]
fn a_one_line_block_scalar_counts_as_emptied() {
    let text =
        "properties:\n- type: olm.csv.metadata\n  value:\n    description: |-\n      one line\n";
    let seen = emptying(text, |_| false);
    assert_eq!(seen.len(), 1);
    assert!(seen[0].2, "{}", seen[0].0);
    assert!(seen[0].0.contains(r#""description":"""#), "{}", seen[0].0);
}
