//! The aggregation layer's front proxy: a CA of its own and the client certificate the API
//! server presents to aggregated API servers (CN `front-proxy-client`), with the flags that
//! make kube-apiserver use them and publish the CA in
//! kube-system/extension-apiserver-authentication.

use std::path::Path;

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The CN the aggregated servers must accept.
pub const CLIENT_NAME: &str = "front-proxy-client";

/// Writes the front proxy's CA and client certificate into `dir`; returns kube-apiserver's
/// flags for them.
pub fn apiserver_args(dir: &Path) -> anyhow::Result<Vec<String>> {
    let ca_key = KeyPair::generate().context("front-proxy CA key")?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "olm-rs e2e-real front-proxy CA");
    let ca_cert = ca_params.self_signed(&ca_key).context("front-proxy CA")?;
    let ca_pem = ca_cert.pem();
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params
        .distinguished_name
        .push(DnType::CommonName, CLIENT_NAME);
    let client = params.signed_by(&key, &issuer)?;

    let write = |name: &str, text: &str| -> anyhow::Result<String> {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        Ok(path.display().to_string())
    };
    let ca_file = write("front-proxy-ca.crt", &ca_pem)?;
    let cert_file = write("front-proxy-client.crt", &client.pem())?;
    let key_file = write("front-proxy-client.key", &key.serialize_pem())?;
    Ok(vec![
        format!("--requestheader-client-ca-file={ca_file}"),
        format!("--requestheader-allowed-names={CLIENT_NAME}"),
        "--requestheader-username-headers=X-Remote-User".to_owned(),
        "--requestheader-group-headers=X-Remote-Group".to_owned(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_owned(),
        format!("--proxy-client-cert-file={cert_file}"),
        format!("--proxy-client-key-file={key_file}"),
    ])
}
