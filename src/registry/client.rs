//! A client for any `api.Registry` server (`opm serve`, `olm-rs catalog serve`, old sqlite
//! registries): connect, health check, and read the whole catalog the way OLM's catalog operator
//! does (ListBundles, then GetPackage per package; docs/catalog.md §5.1).
//!
//! Every call has a deadline: a registry that accepts the connection and then hangs must not
//! hang the controller. Plaintext HTTP/2, as OLM dials (docs/catalog.md §1).

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};

use super::proto;
use super::proto::registry_client::RegistryClient as GrpcRegistryClient;

/// Largest message accepted from a registry. Bundles with inline manifests can be several MB
/// (big CRDs); grpc-go servers send up to 2 GiB, the 4 MiB gRPC default is too small.
pub const MAX_MESSAGE_BYTES: usize = 128 * 1024 * 1024;

/// Deadlines of registry calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientTimeouts {
    /// TCP connect + HTTP/2 handshake.
    pub connect: Duration,
    /// Each unary call (health check, GetPackage).
    pub request: Duration,
    /// Reading a whole catalog (ListBundles stream and every GetPackage).
    pub fetch: Duration,
}

impl Default for ClientTimeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(5),
            request: Duration::from_secs(10),
            fetch: Duration::from_secs(120),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("registry address {address:?} is not a host:port: {message}")]
    InvalidAddress { address: String, message: String },
    #[error("cannot connect to registry {address}: {message}")]
    Connect { address: String, message: String },
    #[error("registry {address}: {call} took longer than {timeout:?}")]
    Timeout {
        address: String,
        call: &'static str,
        timeout: Duration,
    },
    #[error("registry {address}: {call} failed: {status_code:?}: {message}")]
    Call {
        address: String,
        call: &'static str,
        status_code: tonic::Code,
        message: String,
    },
    #[error("registry {address} reports health {status}")]
    NotServing { address: String, status: String },
}

impl ClientError {
    /// The address the error is about.
    pub fn address(&self) -> &str {
        match self {
            ClientError::InvalidAddress { address, .. }
            | ClientError::Connect { address, .. }
            | ClientError::Timeout { address, .. }
            | ClientError::Call { address, .. }
            | ClientError::NotServing { address, .. } => address,
        }
    }
}

/// What a registry holds, as it sent it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegistryContent {
    /// One per package named by a bundle, sorted by name. Packages whose GetPackage failed are
    /// left out (with their bundles), as OLM skips them; `skipped` says which and why.
    pub packages: Vec<proto::Package>,
    /// One message per (bundle, channel), in the order received.
    pub bundles: Vec<proto::Bundle>,
    /// `(package, error)` for packages that could not be read.
    pub skipped: Vec<(String, String)>,
}

/// A connected registry.
#[derive(Debug, Clone)]
pub struct RegistryClient {
    address: String,
    timeouts: ClientTimeouts,
    registry: GrpcRegistryClient<Channel>,
    health: HealthClient<Channel>,
}

impl RegistryClient {
    /// Dials `address` (`host:port`, or a URL with `http://`) and waits for the connection.
    pub async fn connect(
        address: &str,
        timeouts: ClientTimeouts,
    ) -> Result<RegistryClient, ClientError> {
        let uri = if address.contains("://") {
            address.to_owned()
        } else {
            format!("http://{address}")
        };
        let endpoint = Endpoint::from_shared(uri)
            .map_err(|e| ClientError::InvalidAddress {
                address: address.to_owned(),
                message: crate::error_chain::error_chain(&e),
            })?
            .connect_timeout(timeouts.connect)
            .tcp_keepalive(Some(Duration::from_secs(30)))
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(10));
        let channel = tokio::time::timeout(timeouts.connect, endpoint.connect())
            .await
            .map_err(|_| ClientError::Timeout {
                address: address.to_owned(),
                call: "connect",
                timeout: timeouts.connect,
            })?
            .map_err(|e| ClientError::Connect {
                address: address.to_owned(),
                message: crate::error_chain::error_chain(&e),
            })?;
        Ok(RegistryClient {
            address: address.to_owned(),
            timeouts,
            registry: GrpcRegistryClient::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES),
            health: HealthClient::new(channel),
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// `grpc.health.v1.Health/Check` for the whole server (service `""`, as the kubelet asks);
    /// anything but SERVING is an error.
    pub async fn check_health(&self) -> Result<(), ClientError> {
        let mut health = self.health.clone();
        let call = "Health/Check";
        let response = self
            .deadline(call, self.timeouts.request, async move {
                health
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await
            })
            .await?;
        let status = response.into_inner().status;
        if status == ServingStatus::Serving as i32 {
            Ok(())
        } else {
            let name = ServingStatus::try_from(status)
                .map(|s| s.as_str_name().to_owned())
                .unwrap_or_else(|_| status.to_string());
            Err(ClientError::NotServing {
                address: self.address.clone(),
                status: name,
            })
        }
    }

    pub async fn list_packages(&self) -> Result<Vec<String>, ClientError> {
        let mut registry = self.registry.clone();
        let call = "ListPackages";
        self.deadline(call, self.timeouts.fetch, async move {
            let mut stream = registry
                .list_packages(proto::ListPackageRequest {})
                .await?
                .into_inner();
            let mut names = Vec::new();
            while let Some(item) = stream.next().await {
                names.push(item?.name);
            }
            Ok(names)
        })
        .await
    }

    pub async fn get_package(&self, name: &str) -> Result<proto::Package, ClientError> {
        let mut registry = self.registry.clone();
        let request = proto::GetPackageRequest {
            name: name.to_owned(),
        };
        self.deadline("GetPackage", self.timeouts.request, async move {
            Ok(registry.get_package(request).await?.into_inner())
        })
        .await
    }

    pub async fn get_bundle(
        &self,
        package: &str,
        channel: &str,
        csv_name: &str,
    ) -> Result<proto::Bundle, ClientError> {
        let mut registry = self.registry.clone();
        let request = proto::GetBundleRequest {
            pkg_name: package.to_owned(),
            channel_name: channel.to_owned(),
            csv_name: csv_name.to_owned(),
        };
        self.deadline("GetBundle", self.timeouts.request, async move {
            Ok(registry.get_bundle(request).await?.into_inner())
        })
        .await
    }

    pub async fn entries_that_replace(
        &self,
        csv_name: &str,
    ) -> Result<Vec<proto::ChannelEntry>, ClientError> {
        let mut registry = self.registry.clone();
        let request = proto::GetAllReplacementsRequest {
            csv_name: csv_name.to_owned(),
        };
        self.deadline(
            "GetChannelEntriesThatReplace",
            self.timeouts.request,
            async move {
                let mut stream = registry
                    .get_channel_entries_that_replace(request)
                    .await?
                    .into_inner();
                let mut entries = Vec::new();
                while let Some(item) = stream.next().await {
                    entries.push(item?);
                }
                Ok(entries)
            },
        )
        .await
    }

    /// Every (bundle, channel) message of ListBundles.
    pub async fn list_bundles(&self) -> Result<Vec<proto::Bundle>, ClientError> {
        let mut registry = self.registry.clone();
        self.deadline("ListBundles", self.timeouts.fetch, async move {
            let mut stream = registry
                .list_bundles(proto::ListBundlesRequest {})
                .await?
                .into_inner();
            let mut bundles = Vec::new();
            while let Some(item) = stream.next().await {
                bundles.push(item?);
            }
            Ok(bundles)
        })
        .await
    }

    /// The whole catalog: ListBundles, then GetPackage for every package a bundle names.
    pub async fn fetch_content(&self) -> Result<RegistryContent, ClientError> {
        let bundles = self.list_bundles().await?;
        let names: BTreeSet<String> = bundles.iter().map(|b| b.package_name.clone()).collect();
        let mut packages = Vec::with_capacity(names.len());
        let mut skipped = Vec::new();
        // A few packages at a time: parallel enough for hundreds of packages, gentle on the server.
        let mut answers = futures::stream::iter(names.into_iter().map(|name| {
            let client = self.clone();
            async move {
                let answer = client.get_package(&name).await;
                (name, answer)
            }
        }))
        .buffer_unordered(8);
        while let Some((name, answer)) = answers.next().await {
            match answer {
                Ok(package) => packages.push(package),
                // Lost connection or deadline: the whole read fails and is retried.
                Err(err @ (ClientError::Timeout { .. } | ClientError::Connect { .. })) => {
                    return Err(err);
                }
                Err(other) => skipped.push((name, other.to_string())),
            }
        }
        drop(answers);
        packages.sort_by(|a, b| a.name.cmp(&b.name));
        let bundles = if skipped.is_empty() {
            bundles
        } else {
            bundles
                .into_iter()
                .filter(|b| !skipped.iter().any(|(p, _)| *p == b.package_name))
                .collect()
        };
        Ok(RegistryContent {
            packages,
            bundles,
            skipped,
        })
    }

    async fn deadline<T>(
        &self,
        call: &'static str,
        timeout: Duration,
        work: impl Future<Output = Result<T, tonic::Status>>,
    ) -> Result<T, ClientError> {
        match tokio::time::timeout(timeout, work).await {
            Err(_) => Err(ClientError::Timeout {
                address: self.address.clone(),
                call,
                timeout,
            }),
            Ok(Err(status)) if is_connection_failure(&status) => Err(ClientError::Connect {
                address: self.address.clone(),
                message: status.message().to_owned(),
            }),
            Ok(Err(status)) => Err(ClientError::Call {
                address: self.address.clone(),
                call,
                status_code: status.code(),
                message: status.message().to_owned(),
            }),
            Ok(Ok(value)) => Ok(value),
        }
    }
}

/// tonic reports a dropped or refused connection as `Unavailable` (or `Unknown` with a transport
/// source); both mean "reconnect", not "the registry said no".
fn is_connection_failure(status: &tonic::Status) -> bool {
    use std::error::Error as _;
    status.code() == tonic::Code::Unavailable
        || (status.code() == tonic::Code::Unknown
            && status
                .source()
                .is_some_and(|s| s.downcast_ref::<tonic::transport::Error>().is_some()))
}
