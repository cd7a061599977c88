//! Errors of the certificate module.

/// Failure to build or read key material. Validity problems of an existing Secret are not
/// errors: they come back as a [`super::RotationReason`].
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("generating {what}: {source}")]
    Generate {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("time {0} cannot be written into a certificate")]
    TimeOutOfRange(jiff::Timestamp),
    #[error("CA certificate expires at {not_after}, cannot issue a serving certificate at {now}")]
    CaExpired {
        not_after: jiff::Timestamp,
        now: jiff::Timestamp,
    },
    #[error("host name {host:?} cannot be put into a certificate: {source}")]
    BadHostName { host: String, source: rcgen::Error },
    #[error("{what}: {detail}")]
    Parse { what: &'static str, detail: String },
    /// A plan whose Secret data lacks the serving pair (never made by `plan_certs`; kept as an
    /// error rather than a panic).
    #[error("Secret {0} has no tls.crt or tls.key")]
    IncompleteSecret(String),
}
