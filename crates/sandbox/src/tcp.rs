//! Serving the API over plain HTTP on a local port, for `kubectl` and other out-of-process
//! clients.

use std::net::SocketAddr;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use super::server::ApiServer;

/// A running HTTP listener. Dropping it (or [`ServingHandle::shutdown`]) stops the listener and
/// closes every open connection, including watches.
#[derive(Debug)]
pub struct ServingHandle {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ServingHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig for this listener (default namespace `default`).
    pub fn kubeconfig_yaml(&self) -> String {
        super::kubeconfig::kubeconfig_yaml(&self.url(), "default")
    }

    /// Stops the listener and waits until every connection is closed.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ServingHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub(crate) async fn serve(server: ApiServer, addr: SocketAddr) -> std::io::Result<ServingHandle> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let (stop, mut stopped) = oneshot::channel::<()>();
    let router = crate::http::router(server);
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let service = TowerToHyperService::new(router.clone());
                    connections.spawn(async move {
                        let builder = auto::Builder::new(TokioExecutor::new());
                        if let Err(err) = builder.serve_connection(TokioIo::new(stream), service).await {
                            tracing::debug!(%err, "sandbox connection ended with an error");
                        }
                    });
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        // Watches never end on their own; dropping the connection tasks closes them.
        connections.abort_all();
        while connections.join_next().await.is_some() {}
    });
    Ok(ServingHandle {
        addr,
        stop: Some(stop),
        task: Some(task),
    })
}
