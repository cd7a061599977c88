//! Reuse vs re-issue of a cert Secret over time, with a fake clock (docs/certificates.md §6).

use jiff::{SignedDuration, Timestamp};
use olm_rs::certs::{
    CertPlan, CertSecretData, RotationReason, RotationVerdict, ServiceName, needs_rotation,
    olm_ca_hash, plan_certs,
};

fn t0() -> Timestamp {
    "2026-01-10T08:00:00Z".parse().expect("timestamp")
}

fn at(days: i64, seconds: i64) -> Timestamp {
    t0() + SignedDuration::from_hours(days * 24) + SignedDuration::from_secs(seconds)
}

fn svc() -> ServiceName {
    ServiceName::for_deployment("demo-controller-manager", "demo")
}

fn fresh() -> CertPlan {
    plan_certs(None, &svc(), t0()).expect("issues")
}

fn reason(data: &CertSecretData, now: Timestamp) -> RotationReason {
    match needs_rotation(data, &svc().checked_hosts(), now) {
        RotationVerdict::Rotate(reason) => reason,
        RotationVerdict::Valid(v) => panic!("expected a rotation, got {v:?}"),
    }
}

#[test]
fn a_missing_secret_gets_new_certificates() {
    let plan = fresh();
    assert!(!plan.reused);
    assert_eq!(plan.reissue_reason, Some(RotationReason::SecretMissing));
    assert_eq!(plan.certs_last_updated, t0());
    assert_eq!(plan.certs_rotate_at, at(729, 0), "730 days minus 24 hours");
    assert_eq!(
        plan.secret_data.olm_ca_key.as_deref(),
        Some(plan.ca_pem.as_slice())
    );
    assert_eq!(plan.ca_hash, olm_ca_hash(&plan.ca_pem));
    assert!(plan.secret_data.tls_crt.is_some() && plan.secret_data.tls_key.is_some());
    // What was just issued passes the check OLM runs on every sync.
    assert!(matches!(
        needs_rotation(&plan.secret_data, &svc().checked_hosts(), t0()),
        RotationVerdict::Valid(_)
    ));
}

#[test]
fn before_rotate_at_the_secret_is_reused_byte_for_byte() {
    let first = fresh();
    for now in [at(0, 1), at(365, 0), at(729, 0)] {
        let again = plan_certs(Some(&first.secret_data), &svc(), now).expect("plans");
        assert!(again.reused, "at {now}");
        assert_eq!(again.reissue_reason, None);
        assert_eq!(again.secret_data, first.secret_data);
        assert_eq!(again.ca_hash, first.ca_hash, "pods keep their olmcahash");
        // Status times come from the certificates, not from this sync (docs/certificates.md §10.1).
        assert_eq!(again.certs_last_updated, t0());
        assert_eq!(again.certs_rotate_at, first.certs_rotate_at);
    }
}

#[test]
fn after_rotate_at_new_certificates_are_issued() {
    let first = fresh();
    let now = at(729, 1);
    let next = plan_certs(Some(&first.secret_data), &svc(), now).expect("plans");
    assert!(!next.reused);
    assert_eq!(
        next.reissue_reason,
        Some(RotationReason::RotationDue {
            rotate_at: at(729, 0)
        })
    );
    assert_ne!(next.ca_pem, first.ca_pem, "a new CA");
    assert_ne!(next.ca_hash, first.ca_hash, "pods roll");
    assert_ne!(next.secret_data.tls_key, first.secret_data.tls_key);
    assert_eq!(next.certs_last_updated, now);
    assert_eq!(
        next.certs_rotate_at,
        now + SignedDuration::from_hours(729 * 24)
    );
}

#[test]
fn an_expired_ca_is_replaced() {
    let first = fresh();
    let now = at(731, 0);
    assert_eq!(
        reason(&first.secret_data, now),
        RotationReason::CaExpired {
            not_after: at(730, 0)
        }
    );
    let next = plan_certs(Some(&first.secret_data), &svc(), now).expect("plans");
    assert!(!next.reused);
    assert_ne!(next.ca_pem, first.ca_pem);
}

#[test]
fn certificates_from_the_future_are_replaced() {
    let first = fresh();
    assert_eq!(
        reason(&first.secret_data, at(0, -1)),
        RotationReason::CaNotYetValid { not_before: t0() }
    );
}

#[test]
fn a_tampered_or_missing_key_is_regenerated() {
    let first = fresh();
    let other = fresh();

    let mut swapped = first.secret_data.clone();
    swapped.tls_key = other.secret_data.tls_key.clone();
    assert_eq!(reason(&swapped, at(1, 0)), RotationReason::KeyDoesNotMatch);
    let plan = plan_certs(Some(&swapped), &svc(), at(1, 0)).expect("plans");
    assert!(!plan.reused);
    assert_eq!(plan.reissue_reason, Some(RotationReason::KeyDoesNotMatch));

    let mut garbage = first.secret_data.clone();
    garbage.tls_key =
        Some(b"-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n".to_vec());
    assert!(matches!(
        reason(&garbage, at(1, 0)),
        RotationReason::UnusableKey { .. }
    ));

    let mut missing = first.secret_data.clone();
    missing.tls_key = None;
    assert_eq!(
        reason(&missing, at(1, 0)),
        RotationReason::EntryMissing { key: "tls.key" }
    );
}

#[test]
fn a_tampered_certificate_or_foreign_ca_is_replaced() {
    let first = fresh();
    let other = fresh();

    let mut foreign_ca = first.secret_data.clone();
    foreign_ca.olm_ca_key = other.secret_data.olm_ca_key.clone();
    assert!(matches!(
        reason(&foreign_ca, at(1, 0)),
        RotationReason::NotSignedByCa { .. }
    ));

    // Same issuer name, broken signature: the last DER byte belongs to the signature.
    let crt = pem::parse(first.secret_data.tls_crt.clone().expect("crt")).expect("PEM");
    let mut der = crt.into_contents();
    let last = der.len() - 1;
    der[last] ^= 0x01;
    let mut bad_signature = first.secret_data.clone();
    bad_signature.tls_crt = Some(pem::encode(&pem::Pem::new("CERTIFICATE", der)).into_bytes());
    assert!(matches!(
        reason(&bad_signature, at(1, 0)),
        RotationReason::NotSignedByCa { .. }
    ));

    let mut not_pem = first.secret_data.clone();
    not_pem.tls_crt = Some(b"hello".to_vec());
    assert!(matches!(
        reason(&not_pem, at(1, 0)),
        RotationReason::NotACertificate { key: "tls.crt", .. }
    ));

    let mut key_as_ca = first.secret_data.clone();
    key_as_ca.olm_ca_key = first.secret_data.tls_key.clone();
    assert!(matches!(
        reason(&key_as_ca, at(1, 0)),
        RotationReason::NotACertificate {
            key: "olmCAKey",
            ..
        }
    ));

    // The serving certificate offered as its own CA: not a CA, and not self-signed.
    let mut leaf_as_ca = first.secret_data.clone();
    leaf_as_ca.olm_ca_key = first.secret_data.tls_crt.clone();
    assert!(matches!(
        reason(&leaf_as_ca, at(1, 0)),
        RotationReason::NotACa { .. }
    ));

    let mut missing = first.secret_data.clone();
    missing.olm_ca_key = None;
    assert_eq!(
        reason(&missing, at(1, 0)),
        RotationReason::EntryMissing { key: "olmCAKey" }
    );
}

#[test]
fn a_secret_for_another_service_is_replaced() {
    let first = fresh();
    let elsewhere = ServiceName::for_deployment("demo-controller-manager", "other-ns");
    let verdict = needs_rotation(&first.secret_data, &elsewhere.checked_hosts(), at(1, 0));
    assert_eq!(
        verdict,
        RotationVerdict::Rotate(RotationReason::HostNotCovered {
            host: "demo-controller-manager-service.other-ns".to_owned()
        })
    );
    let plan = plan_certs(Some(&first.secret_data), &elsewhere, at(1, 0)).expect("plans");
    assert!(!plan.reused);
}

#[test]
fn a_secret_made_the_way_olm_makes_it_is_adopted() {
    // OLM's shape: three SANs, no keyUsage on the leaf, CA with certSign only. (Key in PKCS#8
    // here; SEC1 keys are covered by the plans above.)
    let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    ca_params.not_before = rcgen::date_time_ymd(2026, 1, 1);
    ca_params.not_after = rcgen::date_time_ymd(2028, 1, 1);
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);

    let leaf_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let mut leaf = rcgen::CertificateParams::new(svc().checked_hosts()).expect("params");
    leaf.is_ca = rcgen::IsCa::ExplicitNoCa;
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    leaf.not_before = rcgen::date_time_ymd(2026, 1, 1);
    leaf.not_after = rcgen::date_time_ymd(2028, 1, 1);
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).expect("leaf");

    let data = CertSecretData {
        tls_crt: Some(leaf_cert.pem().into_bytes()),
        tls_key: Some(leaf_key.serialize_pem().into_bytes()),
        olm_ca_key: Some(ca_cert.pem().into_bytes()),
    };
    let plan = plan_certs(Some(&data), &svc(), t0()).expect("plans");
    assert!(plan.reused, "{:?}", plan.reissue_reason);
    assert_eq!(plan.certs_last_updated.to_string(), "2026-01-01T00:00:00Z");
    assert_eq!(plan.certs_rotate_at.to_string(), "2027-12-31T00:00:00Z");
}

#[test]
fn reasons_read_as_plain_words() {
    assert_eq!(
        RotationReason::EntryMissing { key: "tls.crt" }.to_string(),
        "the Secret has no tls.crt entry"
    );
    assert_eq!(
        RotationReason::HostNotCovered {
            host: "a.b.svc".to_owned()
        }
        .to_string(),
        "the serving certificate does not cover the host name a.b.svc"
    );
    assert_eq!(
        RotationReason::RotationDue { rotate_at: t0() }.to_string(),
        "the certificates expire within 24 hours (rotation was due at 2026-01-10T08:00:00Z)"
    );
}
