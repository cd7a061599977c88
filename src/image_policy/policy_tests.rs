//! Policy files: containers-policy.json(5)'s "reasonably locked-down system" example (made
//! valid JSON: no comments), scope precedence, every requirement type, and malformed files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;

use super::keys::test_keys::TestKey;
use super::*;

const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

struct Files(HashMap<PathBuf, Vec<u8>>);

impl Files {
    fn with_key(path: &str, key: &TestKey) -> Files {
        Files(HashMap::from([(
            PathBuf::from(path),
            key.public_pem().into_bytes(),
        )]))
    }
    fn read(&self, p: &Path) -> std::io::Result<Vec<u8>> {
        self.0
            .get(p)
            .cloned()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

fn parse(text: &str, files: &Files) -> Result<Policy, PolicyError> {
    Policy::parse(Path::new("/etc/containers/policy.json"), text, &|p| {
        files.read(p)
    })
}

const LOCKED_DOWN: &str = r#"{
  "default": [{"type": "reject"}],
  "transports": {
    "docker": {
      "docker.io/openshift": [{"type": "insecureAcceptAnything"}],
      "docker.io/library/busybox": [{"type": "insecureAcceptAnything"}],
      "*.temporary-project.example.com": [{"type": "insecureAcceptAnything"}],
      "hostname:5000/myns/sigstore-signed-with-full-references": [
        {"type": "sigstoreSigned", "keyPath": "/path/to/sigstore-pubkey.pub"}
      ],
      "hostname:5000/myns/sigstore-signed-fulcio-rekor": [
        {"type": "sigstoreSigned",
         "fulcio": {"caPath": "/path/to/fulcio_v1.crt.pem", "oidcIssuer": "https://github.com/login/oauth", "subjectEmail": "test-user@example.com"},
         "rekorPublicKeyPath": "/path/to/rekor.pub"}
      ],
      "hostname:5000/myns/sigstore-signed-allows-malicious-tag-substitution": [
        {"type": "sigstoreSigned", "keyPath": "/path/to/sigstore-pubkey.pub", "signedIdentity": {"type": "matchRepository"}}
      ]
    },
    "dir": {"": [{"type": "insecureAcceptAnything"}]},
    "atomic": {
      "hostname:5000/myns/official": [
        {"type": "signedBy", "keyType": "GPGKeys", "keyPath": "/path/to/official-pubkey.gpg"}
      ]
    }
  }
}"#;

fn scope_of(p: &Policy, image: &str) -> (String, Vec<Requirement>) {
    let (scope, reqs) = p.requirements_for(&DockerRef::parse(image).unwrap());
    (scope.to_string(), reqs.to_vec())
}

#[test]
fn the_documented_locked_down_policy_picks_the_documented_scopes() {
    let key = TestKey::generate();
    let p = parse(
        LOCKED_DOWN,
        &Files::with_key("/path/to/sigstore-pubkey.pub", &key),
    )
    .unwrap();
    let accept = vec![Requirement::InsecureAcceptAnything];
    let cases: [(&str, &str, Option<&Vec<Requirement>>); 6] = [
        (
            "docker.io/openshift/origin:v3",
            r#"transports.docker."docker.io/openshift""#,
            Some(&accept),
        ),
        // The short name expands to docker.io/library/busybox.
        (
            "busybox:1.36",
            r#"transports.docker."docker.io/library/busybox""#,
            Some(&accept),
        ),
        (
            "docker.io/library/alpine:3",
            "default",
            Some(&vec![Requirement::Reject]),
        ),
        (
            "a.temporary-project.example.com/x/y:1",
            r#"transports.docker."*.temporary-project.example.com""#,
            Some(&accept),
        ),
        // The wildcard is for subdomains only.
        (
            "temporary-project.example.com/x:1",
            "default",
            Some(&vec![Requirement::Reject]),
        ),
        (
            "hostname:5000/myns/sigstore-signed-with-full-references:v1",
            r#"transports.docker."hostname:5000/myns/sigstore-signed-with-full-references""#,
            None,
        ),
    ];
    for (image, scope, reqs) in cases {
        let (got_scope, got) = scope_of(&p, image);
        assert_eq!(got_scope, scope, "{image}");
        if let Some(reqs) = reqs {
            assert_eq!(&got, reqs, "{image}");
        }
    }
    let (_, signed) = scope_of(
        &p,
        "hostname:5000/myns/sigstore-signed-allows-malicious-tag-substitution:v1",
    );
    assert!(matches!(
        &signed[..],
        [Requirement::SigstoreSigned { keys, identity: SignedIdentity::MatchRepository }] if keys.len() == 1
    ));
    let (_, keyless) = scope_of(&p, "hostname:5000/myns/sigstore-signed-fulcio-rekor:v1");
    assert!(matches!(&keyless[..], [Requirement::Unsupported { what }] if what.contains("fulcio")));
}

#[test]
fn the_most_specific_scope_wins_then_the_transport_default_then_default() {
    let p = parse(
        r#"{"default": [{"type": "insecureAcceptAnything"}],
            "transports": {"docker": {
              "": [{"type": "reject"}],
              "reg.example.com": [{"type": "insecureAcceptAnything"}],
              "reg.example.com/ns": [{"type": "reject"}],
              "reg.example.com/ns/app": [{"type": "insecureAcceptAnything"}],
              "reg.example.com/ns/app:bad": [{"type": "reject"}],
              "*.example.com": [{"type": "reject"}],
              "*.sub.example.com": [{"type": "insecureAcceptAnything"}]
            }}}"#,
        &Files(HashMap::new()),
    )
    .unwrap();
    let pinned = format!("reg.example.com/ns/app@{D}");
    let cases = [
        (
            "reg.example.com/ns/app:bad",
            r#"transports.docker."reg.example.com/ns/app:bad""#,
        ),
        (
            "reg.example.com/ns/app:good",
            r#"transports.docker."reg.example.com/ns/app""#,
        ),
        (
            pinned.as_str(),
            r#"transports.docker."reg.example.com/ns/app""#,
        ),
        (
            "reg.example.com/ns/other:1",
            r#"transports.docker."reg.example.com/ns""#,
        ),
        (
            "reg.example.com/top:1",
            r#"transports.docker."reg.example.com""#,
        ),
        (
            "x.sub.example.com/a:1",
            r#"transports.docker."*.sub.example.com""#,
        ),
        (
            "other.example.com:5000/a:1",
            r#"transports.docker."*.example.com""#,
        ),
        ("quay.io/a:1", r#"transports.docker."""#),
    ];
    for (image, scope) in cases {
        assert_eq!(scope_of(&p, image).0, scope, "{image}");
    }
    let no_docker = parse(
        r#"{"default": [{"type": "reject"}]}"#,
        &Files(HashMap::new()),
    )
    .unwrap();
    assert_eq!(scope_of(&no_docker, "quay.io/a:1").0, "default");
}

#[test]
fn every_requirement_type_and_identity_rule_is_read() {
    let key = TestKey::generate();
    let pem_b64 = base64::engine::general_purpose::STANDARD.encode(key.public_pem());
    let files = Files::with_key("/k.pub", &key);
    let req = |json: &str| {
        let text = format!(r#"{{"default": [{json}]}}"#);
        let p = parse(&text, &files).unwrap_or_else(|e| panic!("{json}: {e}"));
        scope_of(&p, "quay.io/x:1").1.remove(0)
    };
    let signed = |json: &str| match req(json) {
        Requirement::SigstoreSigned { keys, identity } => (keys.len(), identity),
        other => panic!("{json}: {other:?}"),
    };
    assert_eq!(
        req(r#"{"type":"insecureAcceptAnything"}"#),
        Requirement::InsecureAcceptAnything
    );
    assert_eq!(req(r#"{"type":"reject"}"#), Requirement::Reject);
    assert_eq!(
        signed(r#"{"type":"sigstoreSigned","keyPath":"/k.pub"}"#),
        (1, SignedIdentity::MatchRepoDigestOrExact)
    );
    assert_eq!(
        signed(r#"{"type":"sigstoreSigned","keyPaths":["/k.pub","/k.pub"]}"#).0,
        2
    );
    assert_eq!(
        signed(&format!(
            r#"{{"type":"sigstoreSigned","keyData":"{pem_b64}"}}"#
        ))
        .0,
        1
    );
    assert_eq!(
        signed(&format!(
            r#"{{"type":"sigstoreSigned","keyDatas":["{pem_b64}"]}}"#
        ))
        .0,
        1
    );
    let with_identity = |id: &str| {
        signed(&format!(
            r#"{{"type":"sigstoreSigned","keyPath":"/k.pub","signedIdentity":{id}}}"#
        ))
        .1
    };
    assert_eq!(
        with_identity(r#"{"type":"matchExact"}"#),
        SignedIdentity::MatchExact
    );
    assert_eq!(
        with_identity(r#"{"type":"matchRepoDigestOrExact"}"#),
        SignedIdentity::MatchRepoDigestOrExact
    );
    assert_eq!(
        with_identity(r#"{"type":"matchRepository"}"#),
        SignedIdentity::MatchRepository
    );
    assert_eq!(
        with_identity(r#"{"type":"exactReference","dockerReference":"quay.io/signed:v1"}"#),
        SignedIdentity::ExactReference(DockerRef::parse("quay.io/signed:v1").unwrap())
    );
    assert_eq!(
        with_identity(r#"{"type":"exactRepository","dockerRepository":"quay.io/signed"}"#),
        SignedIdentity::ExactRepository(DockerRef::parse("quay.io/signed").unwrap())
    );
    assert_eq!(
        with_identity(
            r#"{"type":"remapIdentity","prefix":"mirror:5000/vendor","signedPrefix":"vendor.example.com"}"#
        ),
        SignedIdentity::RemapIdentity {
            prefix: "mirror:5000/vendor".into(),
            signed_prefix: "vendor.example.com".into()
        }
    );
    // Types olm-rs cannot verify load, and name themselves.
    for (json, words) in [
        (
            r#"{"type":"signedBy","keyType":"GPGKeys","keyPath":"/x.gpg"}"#,
            "signedBy",
        ),
        (
            r#"{"type":"sigstoreSigned","fulcio":{"caPath":"/ca","oidcIssuer":"i","subjectEmail":"e"},"rekorPublicKeyPath":"/r"}"#,
            "fulcio",
        ),
        (
            r#"{"type":"sigstoreSigned","pki":{"caRootsPath":"/ca","subjectEmail":"e"}}"#,
            "pki",
        ),
        (
            r#"{"type":"sigstoreSigned","keyPath":"/k.pub","rekorPublicKeyPath":"/r"}"#,
            "rekorPublicKeyPath",
        ),
        (
            r#"{"type":"signedBaseLayer","baseLayerIdentity":{"type":"matchRepository"}}"#,
            "signedBaseLayer",
        ),
    ] {
        match req(json) {
            Requirement::Unsupported { what } => assert!(what.contains(words), "{json}: {what}"),
            other => panic!("{json}: {other:?}"),
        }
    }
}

#[test]
fn malformed_files_name_the_file_and_the_field() {
    let key = TestKey::generate();
    let files = Files::with_key("/k.pub", &key);
    let cases = [
        ("not json", "(file)"),
        (r#"{"transports": {}}"#, "default"),
        (r#"{"default": [], "transports": {}}"#, "default"),
        (
            r#"{"default": [{"type": "reject"}], "extra": 1}"#,
            "(top level).extra",
        ),
        (
            r#"{"default": [{"type": "reject", "keyPath": "/k.pub"}]}"#,
            "default[0].keyPath",
        ),
        (
            r#"{"default": [{"type": "acceptSomething"}]}"#,
            "default[0].type",
        ),
        (r#"{"default": [{"kind": "reject"}]}"#, "default[0].type"),
        (
            r#"{"default": [{"type": "reject"}], "transports": {"docker": {"quay.io": [{"type": "sigstoreSigned"}]}}}"#,
            r#"transports.docker."quay.io"[0]"#,
        ),
        (
            r#"{"default": [{"type": "sigstoreSigned", "keyPath": "/k.pub", "keyData": "AA=="}]}"#,
            "default[0]",
        ),
        (
            r#"{"default": [{"type": "sigstoreSigned", "keyPath": "/missing.pub"}]}"#,
            "default[0].keyPath",
        ),
        (
            r#"{"default": [{"type": "sigstoreSigned", "keyData": "not base64!"}]}"#,
            "default[0].keyData",
        ),
        (
            r#"{"default": [{"type": "sigstoreSigned", "keyPaths": []}]}"#,
            "default[0].keyPaths",
        ),
        (
            r#"{"default": [{"type": "sigstoreSigned", "keyPath": "/k.pub", "signedIdentity": {"type": "exactReference", "dockerReference": "quay.io/x"}}]}"#,
            "default[0].signedIdentity.dockerReference",
        ),
        (
            r#"{"default": [{"type": "sigstoreSigned", "keyPath": "/k.pub", "signedIdentity": {"type": "remapIdentity", "prefix": "quay.io/", "signedPrefix": "x.io"}}]}"#,
            "default[0].signedIdentity.prefix",
        ),
        (
            r#"{"default": [{"type": "sigstoreSigned", "keyPath": "/k.pub", "signedIdentity": {"type": "matchEverything"}}]}"#,
            "default[0].signedIdentity.type",
        ),
        (
            r#"{"default": [{"type": "sigstoreSigned", "keyPath": "/k.pub", "signedIdentity": {"type": "matchExact", "x": 1}}]}"#,
            "default[0].signedIdentity.x",
        ),
    ];
    for (text, field) in cases {
        let e = parse(text, &files).unwrap_err();
        assert_eq!(e.field, field, "{text}: {e}");
        assert_eq!(e.file, Path::new("/etc/containers/policy.json"));
        assert!(
            e.to_string()
                .starts_with("image policy /etc/containers/policy.json: "),
            "{e}"
        );
    }
}

/// Only an image its scope accepts unverified may be pulled by the node instead (an unpack
/// pod): the kubelet checks no signature.
#[test]
fn an_image_accepted_unverified_is_one_whose_scope_accepts_anything() {
    let key = TestKey::generate();
    let files = Files::with_key("/path/to/sigstore-pubkey.pub", &key);
    let policy = super::ImagePolicy::new(parse(LOCKED_DOWN, &files).unwrap(), Default::default());
    assert!(policy.accepts_unverified("docker.io/library/busybox:latest"));
    assert!(
        !policy.accepts_unverified("quay.io/operator/bundle:v1"),
        "rejected by default"
    );
    assert!(
        !policy.accepts_unverified("hostname:5000/myns/sigstore-signed-with-full-references:v1"),
        "wants a signature"
    );
    assert!(!policy.accepts_unverified("not a reference"));
    assert!(super::ImagePolicy::accept_anything().accepts_unverified("quay.io/x/y:v1"));
}
