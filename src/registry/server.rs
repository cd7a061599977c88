//! The gRPC server: `api.Registry` over a shared, read-only `CatalogIndex`, plus
//! `grpc.health.v1.Health` and server reflection, as `opm serve` registers them
//! (docs/catalog.md §5, §6.4). Answers are computed per request from the index (`queries`);
//! nothing is pre-rendered, so memory stays at the size of the index.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use tokio::net::TcpListener;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use crate::catalog::CatalogIndex;

use super::proto::registry_server::{Registry, RegistryServer};
use super::proto::{self};
use super::queries::{self, QueryError};

type Answers<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// How many ListBundles messages are rendered ahead of the client.
const LIST_BUNDLES_BUFFER: usize = 16;

/// `api.Registry` over one catalog.
#[derive(Debug, Clone)]
pub struct RegistryService {
    index: Arc<CatalogIndex>,
}

impl RegistryService {
    pub fn new(index: Arc<CatalogIndex>) -> RegistryService {
        RegistryService { index }
    }
}

/// opm answers with plain Go errors, which gRPC sends as UNKNOWN with the error text.
fn status(err: QueryError) -> Status {
    Status::unknown(err.0)
}

fn stream_of<T: Send + 'static>(items: Vec<T>) -> Answers<T> {
    Box::pin(futures::stream::iter(items.into_iter().map(Ok)))
}

#[tonic::async_trait]
impl Registry for RegistryService {
    type ListPackagesStream = Answers<proto::PackageName>;
    type GetChannelEntriesThatReplaceStream = Answers<proto::ChannelEntry>;
    type GetChannelEntriesThatProvideStream = Answers<proto::ChannelEntry>;
    type GetLatestChannelEntriesThatProvideStream = Answers<proto::ChannelEntry>;
    type ListBundlesStream = Answers<proto::Bundle>;

    async fn list_packages(
        &self,
        _: Request<proto::ListPackageRequest>,
    ) -> Result<Response<Self::ListPackagesStream>, Status> {
        Ok(Response::new(stream_of(queries::list_packages(
            &self.index,
        ))))
    }

    async fn get_package(
        &self,
        request: Request<proto::GetPackageRequest>,
    ) -> Result<Response<proto::Package>, Status> {
        queries::get_package(&self.index, &request.get_ref().name)
            .map(Response::new)
            .map_err(status)
    }

    async fn get_bundle(
        &self,
        request: Request<proto::GetBundleRequest>,
    ) -> Result<Response<proto::Bundle>, Status> {
        let r = request.get_ref();
        queries::get_bundle(&self.index, &r.pkg_name, &r.channel_name, &r.csv_name)
            .map(Response::new)
            .map_err(status)
    }

    async fn get_bundle_for_channel(
        &self,
        request: Request<proto::GetBundleInChannelRequest>,
    ) -> Result<Response<proto::Bundle>, Status> {
        let r = request.get_ref();
        queries::get_bundle_for_channel(&self.index, &r.pkg_name, &r.channel_name)
            .map(Response::new)
            .map_err(status)
    }

    async fn get_channel_entries_that_replace(
        &self,
        request: Request<proto::GetAllReplacementsRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatReplaceStream>, Status> {
        queries::entries_that_replace(&self.index, &request.get_ref().csv_name)
            .map(|entries| Response::new(stream_of(entries)))
            .map_err(status)
    }

    async fn get_bundle_that_replaces(
        &self,
        request: Request<proto::GetReplacementRequest>,
    ) -> Result<Response<proto::Bundle>, Status> {
        let r = request.get_ref();
        queries::bundle_that_replaces(&self.index, &r.csv_name, &r.pkg_name, &r.channel_name)
            .map(Response::new)
            .map_err(status)
    }

    async fn get_channel_entries_that_provide(
        &self,
        request: Request<proto::GetAllProvidersRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatProvideStream>, Status> {
        let r = request.get_ref();
        let gvk = queries::requested_gvk(&r.group, &r.version, &r.kind);
        queries::entries_that_provide(&self.index, &gvk)
            .map(|entries| Response::new(stream_of(entries)))
            .map_err(status)
    }

    async fn get_latest_channel_entries_that_provide(
        &self,
        request: Request<proto::GetLatestProvidersRequest>,
    ) -> Result<Response<Self::GetLatestChannelEntriesThatProvideStream>, Status> {
        let r = request.get_ref();
        let gvk = queries::requested_gvk(&r.group, &r.version, &r.kind);
        queries::latest_entries_that_provide(&self.index, &gvk)
            .map(|entries| Response::new(stream_of(entries)))
            .map_err(status)
    }

    async fn get_default_bundle_that_provides(
        &self,
        request: Request<proto::GetDefaultProviderRequest>,
    ) -> Result<Response<proto::Bundle>, Status> {
        let r = request.get_ref();
        let gvk = queries::requested_gvk(&r.group, &r.version, &r.kind);
        queries::default_bundle_that_provides(&self.index, &gvk)
            .map(Response::new)
            .map_err(status)
    }

    async fn list_bundles(
        &self,
        _: Request<proto::ListBundlesRequest>,
    ) -> Result<Response<Self::ListBundlesStream>, Status> {
        // Render lazily and a few messages ahead: a whole catalog is never held twice.
        let index = Arc::clone(&self.index);
        let (tx, rx) = tokio::sync::mpsc::channel(LIST_BUNDLES_BUFFER);
        tokio::spawn(async move {
            for bundle in queries::list_bundles(&index) {
                if tx.send(Ok(bundle)).await.is_err() {
                    break; // the client went away
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// `grpc.health.v1.Health` as opm answers it: SERVING for any service name — the server only
/// listens once its catalog is loaded.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysServing;

#[tonic::async_trait]
impl Health for AlwaysServing {
    async fn check(
        &self,
        _: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        Ok(Response::new(HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        }))
    }

    type WatchStream = Answers<HealthCheckResponse>;

    /// opm v1.50 answers UNIMPLEMENTED; a stream that says SERVING and then stays open is what
    /// the health protocol asks for and what a client watching would expect.
    async fn watch(
        &self,
        _: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let serving = HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        };
        Ok(Response::new(Box::pin(
            futures::stream::once(async move { Ok(serving) }).chain(futures::stream::pending()),
        )))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("registry server stopped: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Serves `index` on `listener` until `shutdown` resolves.
pub async fn serve(
    index: Arc<CatalogIndex>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    tonic::transport::Server::builder()
        .add_service(RegistryServer::new(RegistryService::new(index)))
        .add_service(HealthServer::new(AlwaysServing))
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
        .await?;
    Ok(())
}
