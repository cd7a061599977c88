//! The control plane's certificates, made with rcgen in milliseconds (ECDSA P-256): a CA, the
//! API server's serving certificate, client certificates for the admin (`system:masters`) and
//! the controller-manager, and the service-account signing key.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A client identity: certificate and key, PEM.
pub struct ClientCert {
    pub cert_pem: String,
    pub key_pem: String,
}

/// Every file the programs read, written under one directory.
pub struct Pki {
    pub ca_pem: String,
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    /// Signs service-account tokens.
    pub service_account_key: PathBuf,
    /// Verifies them.
    pub service_account_public: PathBuf,
    pub admin: ClientCert,
    /// The admin's certificate and key as files (the kubelet client of the API server).
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub controller_manager: ClientCert,
}

impl Pki {
    /// Writes the PKI into `dir`. `service_ip` is the first address of the service range (the
    /// `kubernetes` Service) and `address` the API server's own; the serving certificate names
    /// both.
    pub fn create(dir: &Path, service_ip: &str, address: &str) -> anyhow::Result<Self> {
        let ca_key = KeyPair::generate().context("CA key")?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "olm-rs e2e-real CA");
        let ca_cert = ca_params.self_signed(&ca_key).context("CA certificate")?;
        let ca_pem = ca_cert.pem();
        let ca_key_pem = ca_key.serialize_pem();
        let issuer = Issuer::new(ca_params, ca_key);

        let serving_names = vec![
            "localhost".to_owned(),
            "kubernetes".to_owned(),
            "kubernetes.default".to_owned(),
            "kubernetes.default.svc".to_owned(),
            "kubernetes.default.svc.cluster.local".to_owned(),
            "127.0.0.1".to_owned(),
            service_ip.to_owned(),
        ];
        let mut serving_names = serving_names;
        if !serving_names.iter().any(|n| n == address) {
            serving_names.push(address.to_owned());
        }
        let serving = leaf(
            &issuer,
            serving_names,
            &[("", "kube-apiserver")],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let admin = leaf(
            &issuer,
            Vec::new(),
            &[("system:masters", "olm-rs-e2e-admin")],
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        let controller_manager = leaf(
            &issuer,
            Vec::new(),
            &[("", "system:kube-controller-manager")],
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        let service_account = KeyPair::generate().context("service-account key")?;

        let write = |name: &str, text: &str| -> anyhow::Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        };
        Ok(Self {
            ca_cert: write("ca.crt", &ca_pem)?,
            ca_key: write("ca.key", &ca_key_pem)?,
            serving_cert: write("apiserver.crt", &serving.cert_pem)?,
            serving_key: write("apiserver.key", &serving.key_pem)?,
            service_account_key: write("sa.key", &service_account.serialize_pem())?,
            service_account_public: write("sa.pub", &service_account.public_key_pem())?,
            admin_cert: write("admin.crt", &admin.cert_pem)?,
            admin_key: write("admin.key", &admin.key_pem)?,
            ca_pem,
            admin,
            controller_manager,
        })
    }
}

/// A leaf certificate signed by the CA; `subject` is `(organization, common name)` pairs
/// (an empty organization is left out).
fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    names: Vec<String>,
    subject: &[(&str, &str)],
    usage: ExtendedKeyUsagePurpose,
) -> anyhow::Result<ClientCert> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names)?;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    for (organization, common_name) in subject {
        if !organization.is_empty() {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *organization);
        }
        params
            .distinguished_name
            .push(DnType::CommonName, *common_name);
    }
    let cert = params.signed_by(&key, issuer)?;
    Ok(ClientCert {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}
