//! Issued key material, read back with x509-parser: chain, names, validity, extensions,
//! encodings (docs/certificates.md §2, §3.2).

use jiff::{SignedDuration, Timestamp};
use olm_rs::certs::{
    CA_VALIDITY, CertError, ORGANIZATION, ServiceName, issue_ca, issue_serving_cert, olm_ca_hash,
    parse_ca,
};
use sha2::{Digest, Sha256};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_SIG_ECDSA_WITH_SHA256,
};
use x509_parser::x509::X509Version;

fn now() -> Timestamp {
    "2026-03-01T12:00:00.750Z".parse().expect("timestamp")
}

fn der_of(pem_text: &str) -> Vec<u8> {
    let (rest, pem) = x509_parser::pem::parse_x509_pem(pem_text.as_bytes()).expect("PEM");
    assert!(rest.is_empty(), "one PEM block only");
    assert_eq!(pem.label, "CERTIFICATE");
    pem.contents
}

fn parse(der: &[u8]) -> X509Certificate<'_> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der).expect("X.509");
    assert!(rest.is_empty());
    cert
}

fn attr<'a>(cert: &'a X509Certificate<'_>, which: &str) -> Vec<&'a str> {
    let subject = cert.subject();
    let iter: Vec<_> = match which {
        "CN" => subject.iter_common_name().collect(),
        "O" => subject.iter_organization().collect(),
        _ => unreachable!(),
    };
    iter.into_iter()
        .map(|a| a.as_str().expect("utf8 attribute"))
        .collect()
}

fn assert_go_pem_layout(text: &str, label: &str) {
    assert!(
        text.starts_with(&format!("-----BEGIN {label}-----\n")),
        "{text}"
    );
    assert!(
        text.ends_with(&format!("-----END {label}-----\n")),
        "{text}"
    );
    assert!(!text.contains('\r'));
    let body: Vec<&str> = text.lines().filter(|l| !l.starts_with("-----")).collect();
    let (last, full) = body.split_last().expect("body");
    assert!(full.iter().all(|l| l.len() == 64), "64-character lines");
    assert!(last.len() <= 64 && !last.is_empty());
}

#[test]
fn ca_certificate_has_olms_shape() {
    let ca = issue_ca(now()).expect("CA");
    assert_go_pem_layout(ca.cert_pem(), "CERTIFICATE");
    let der = der_of(ca.cert_pem());
    let cert = parse(&der);

    assert_eq!(cert.version(), X509Version::V3);
    let serial = cert.raw_serial_as_string().replace(':', "");
    let serial = u64::from_str_radix(&serial, 16).expect("serial fits 64 bits");
    assert!(serial > 0 && serial < i64::MAX as u64);
    assert_eq!(
        attr(&cert, "CN"),
        [format!("olm-selfsigned-{serial:x}").as_str()]
    );
    assert_eq!(attr(&cert, "O"), [ORGANIZATION]);
    assert_eq!(
        cert.issuer().as_raw(),
        cert.subject().as_raw(),
        "self-signed"
    );
    let rdn_order: Vec<String> = cert
        .subject()
        .iter_attributes()
        .map(|a| a.attr_type().to_id_string())
        .collect();
    assert_eq!(
        rdn_order,
        ["2.5.4.10", "2.5.4.3"],
        "O before CN, as Go writes"
    );

    let start = now().as_second();
    assert_eq!(cert.validity().not_before.timestamp(), start);
    assert_eq!(
        cert.validity().not_after.timestamp(),
        start + CA_VALIDITY.as_secs()
    );
    assert_eq!(ca.not_after().as_second(), start + 730 * 86_400);

    let bc = cert.basic_constraints().expect("parses").expect("present");
    assert!(bc.critical && bc.value.ca);
    let ku = cert.key_usage().expect("parses").expect("present");
    assert!(ku.value.key_cert_sign());
    assert_eq!(ku.value.flags, 1 << 5, "certSign only");
    assert!(cert.extended_key_usage().expect("parses").is_none());
    assert!(cert.subject_alternative_name().expect("parses").is_none());

    assert_eq!(
        cert.signature_algorithm.algorithm,
        OID_SIG_ECDSA_WITH_SHA256
    );
    let spki = cert.public_key();
    assert_eq!(spki.algorithm.algorithm, OID_KEY_TYPE_EC_PUBLIC_KEY);
    let curve = spki
        .algorithm
        .parameters
        .as_ref()
        .expect("curve")
        .as_oid()
        .expect("oid");
    assert_eq!(curve, OID_EC_P256);
    cert.verify_signature(None)
        .expect("self signature verifies");
}

#[test]
fn serving_certificate_chains_to_the_ca_and_names_the_service() {
    let ca = issue_ca(now()).expect("CA");
    let svc = ServiceName::for_deployment("demo-controller-manager", "demo");
    let later = now() + SignedDuration::from_hours(5);
    let serving = issue_serving_cert(&ca, &svc, later).expect("serving cert");
    assert_go_pem_layout(&serving.cert_pem, "CERTIFICATE");
    assert_go_pem_layout(&serving.key_pem, "EC PRIVATE KEY");

    let ca_der = der_of(ca.cert_pem());
    let ca_cert = parse(&ca_der);
    let der = der_of(&serving.cert_pem);
    let cert = parse(&der);

    cert.verify_signature(Some(ca_cert.public_key()))
        .expect("signed by the CA");
    assert_eq!(cert.issuer().as_raw(), ca_cert.subject().as_raw());
    let other_ca = issue_ca(now()).expect("CA");
    let other_der = der_of(other_ca.cert_pem());
    assert!(
        cert.verify_signature(Some(parse(&other_der).public_key()))
            .is_err()
    );

    assert_eq!(attr(&cert, "CN"), ["demo-controller-manager-service.demo"]);
    assert_eq!(attr(&cert, "O"), [ORGANIZATION]);
    let san = cert
        .subject_alternative_name()
        .expect("parses")
        .expect("present");
    let dns: Vec<&str> = san
        .value
        .general_names
        .iter()
        .map(|n| match n {
            GeneralName::DNSName(d) => *d,
            other => panic!("unexpected SAN {other:?}"),
        })
        .collect();
    assert_eq!(
        dns,
        [
            "demo-controller-manager-service.demo",
            "demo-controller-manager-service.demo.svc",
            "demo-controller-manager-service.demo.svc.cluster.local",
            "demo-controller-manager-service",
        ]
    );

    assert_eq!(cert.validity().not_before.timestamp(), later.as_second());
    assert_eq!(
        cert.validity().not_after.timestamp(),
        ca.not_after().as_second(),
        "ends with the CA"
    );
    assert_eq!(serving.not_after, ca.not_after());

    let bc = cert.basic_constraints().expect("parses").expect("present");
    assert!(!bc.value.ca);
    let eku = cert.extended_key_usage().expect("parses").expect("present");
    assert!(eku.value.server_auth && !eku.value.client_auth && !eku.value.any);
    let ku = cert.key_usage().expect("parses").expect("present");
    assert!(ku.value.digital_signature() && !ku.value.key_cert_sign());
    assert_eq!(
        cert.signature_algorithm.algorithm,
        OID_SIG_ECDSA_WITH_SHA256
    );

    // Two issuances never share a key or a serial.
    let again = issue_serving_cert(&ca, &svc, later).expect("serving cert");
    assert_ne!(again.key_pem, serving.key_pem);
    assert_ne!(
        parse(&der_of(&again.cert_pem)).raw_serial(),
        cert.raw_serial()
    );
}

#[test]
fn ca_hash_is_sha256_of_the_stored_pem() {
    let ca = issue_ca(now()).expect("CA");
    let expected: String = Sha256::digest(ca.cert_pem().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(olm_ca_hash(ca.cert_pem().as_bytes()), expected);
}

#[test]
fn an_expired_ca_cannot_issue() {
    let ca = issue_ca(now()).expect("CA");
    let svc = ServiceName::new("s", "ns");
    let err = issue_serving_cert(&ca, &svc, ca.not_after()).expect_err("expired");
    assert!(matches!(err, CertError::CaExpired { .. }), "{err}");
}

#[test]
fn a_ca_kept_by_the_caller_can_be_loaded_and_issue() {
    // A CA made elsewhere (rcgen directly), loaded from PEM: PKCS#8 key.
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    params.not_before = rcgen::date_time_ymd(2026, 1, 1);
    params.not_after = rcgen::date_time_ymd(2028, 1, 1);
    let ca_cert = params.self_signed(&key).expect("CA");
    let ca = parse_ca(&ca_cert.pem(), &key.serialize_pem()).expect("loads");
    assert_eq!(ca.not_after().to_string(), "2028-01-01T00:00:00Z");

    let serving = issue_serving_cert(&ca, &ServiceName::new("s", "ns"), now()).expect("issues");
    let ca_der = der_of(&ca_cert.pem());
    let der = der_of(&serving.cert_pem);
    parse(&der)
        .verify_signature(Some(parse(&ca_der).public_key()))
        .expect("chains");

    let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    assert!(
        parse_ca(&ca_cert.pem(), &other.serialize_pem()).is_err(),
        "key must match"
    );
}
