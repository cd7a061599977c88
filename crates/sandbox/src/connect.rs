//! The ways into an [`ApiServer`]: an in-process `kube::Client`, the HTTP service itself, and
//! HTTP on a local port. Each starts the built-in controllers once a tokio runtime is there.

use crate::server::{ApiServer, ApiServerOptions};

impl Default for ApiServer {
    fn default() -> Self {
        Self::new()
    }
}

impl ApiServer {
    /// A server with default options (workload simulator on).
    pub fn new() -> Self {
        Self::with_options(ApiServerOptions::default())
    }

    pub fn with_options(opts: ApiServerOptions) -> Self {
        let server = ApiServer::unstarted(opts);
        server.start_background();
        server
    }

    /// A `kube::Client` talking to this server in-process; default namespace `default`.
    /// Must be called inside a tokio runtime.
    pub fn client(&self) -> kube::Client {
        self.start_background();
        kube::Client::new(self.service(), "default")
    }

    /// The HTTP service itself (a `tower::Service` over `http::Request`s).
    pub fn service(&self) -> axum::Router {
        crate::http::router(self.clone())
    }

    /// Serves the API over plain HTTP on `addr` (use port 0 for a free port).
    pub async fn serve(
        &self,
        addr: std::net::SocketAddr,
    ) -> std::io::Result<crate::tcp::ServingHandle> {
        self.start_background();
        crate::tcp::serve(self.clone(), addr).await
    }

    /// Starts the built-in controllers once a tokio runtime is available.
    fn start_background(&self) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        if self.claim_background() {
            crate::controllers::spawn(self);
        }
    }
}
