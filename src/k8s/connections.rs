//! The API client's TCP connections, kept so that all of them can be reset at once
//! (docs/leader-election.md §2.1).
//!
//! A write whose request bytes were handed to the kernel before the renew deadline, into a
//! network already cut, is not stopped by dropping the request in olm-rs: a socket closed the
//! ordinary way (FIN) keeps its unsent data and the kernel delivers it when the network comes
//! back — seconds after another replica took over. A reset discards it. So every socket of
//! olm-rs's API client is registered here and lingers 0 s (a close, also at process exit,
//! is a reset), and the write fence resets them all the moment it closes with a write in
//! flight (`leader_election::Fence`).
//!
//! The reset leaves the socket to its owner (the connection's task, which closes it): the set
//! holds a duplicate of each socket's descriptor, and `connect(AF_UNSPEC)` on it disconnects
//! the TCP socket on Linux — it sends RST and purges the send queue — in place.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::client::ConfigExt;
use tokio::net::TcpStream;
use tower::{BoxError, ServiceBuilder};

/// Building the API client failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("API client for {server}: {what}: {source}")]
    Config {
        server: String,
        what: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// The open connections of one client. Cloning shares the set.
#[derive(Clone, Default)]
pub struct Connections(Arc<Mutex<Registry>>);

#[derive(Default)]
struct Registry {
    next: u64,
    open: HashMap<u64, OwnedFd>,
    resets: u64,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Connections(open: {})", self.open())
    }
}

impl Connections {
    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many connections are open.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    /// How many connections `reset_all` reset, in all.
    pub fn resets(&self) -> u64 {
        self.lock().resets
    }

    /// Resets every open connection: the peer gets RST, and whatever the kernel had not
    /// delivered yet is discarded. Their owners see an error at their next read or write and
    /// drop them; later requests open new ones. Returns how many were reset.
    pub fn reset_all(&self) -> usize {
        let mut registry = self.lock();
        let count = registry
            .open
            .values()
            .filter(|fd| rustix::net::connect_unspec(fd).is_ok())
            .count();
        registry.resets += count as u64;
        count
    }

    fn track(&self, stream: TokioIo<TcpStream>) -> std::io::Result<Tracked> {
        let fd = stream.inner().as_fd().try_clone_to_owned()?;
        // A close is a reset from now on, at process exit too (see the module's comment).
        rustix::net::sockopt::set_socket_linger(&fd, Some(std::time::Duration::ZERO))?;
        let mut registry = self.lock();
        registry.next += 1;
        let id = registry.next;
        registry.open.insert(id, fd);
        Ok(Tracked {
            io: stream,
            id,
            connections: self.clone(),
        })
    }
}

/// A connection in the set; it leaves the set when dropped.
pub struct Tracked {
    io: TokioIo<TcpStream>,
    id: u64,
    connections: Connections,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.connections.lock().open.remove(&self.id);
    }
}

impl Connection for Tracked {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

impl hyper::rt::Read for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// hyper's TCP connector, with every connection it opens put in `connections`.
#[derive(Clone)]
pub struct TrackingConnector {
    inner: HttpConnector,
    connections: Connections,
}

impl TrackingConnector {
    pub fn new(mut inner: HttpConnector, connections: Connections) -> Self {
        // TLS is layered on top; this connector must accept `https` URIs.
        inner.enforce_http(false);
        Self { inner, connections }
    }
}

impl tower::Service<Uri> for TrackingConnector {
    type Response = Tracked;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Tracked, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(BoxError::from)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let connections = self.connections.clone();
        Box::pin(async move { Ok(connections.track(connecting.await?)?) })
    }
}

/// A Kubernetes client for `config` like `kube::Client::try_from` builds (TLS, credentials,
/// kube's retry of 429/503/504), whose connections are in the returned set. A proxy in
/// `config` is not supported here (olm-rs talks to its API server directly).
pub fn client(config: kube::Config) -> Result<(kube::Client, Connections), ClientError> {
    let server = config.cluster_url.to_string();
    let fail = |what| {
        let server = server.clone();
        move |source| ClientError::Config {
            server,
            what,
            source,
        }
    };
    let connections = Connections::default();
    let mut tcp = HttpConnector::new();
    tcp.set_connect_timeout(config.connect_timeout);
    tcp.set_nodelay(true);
    let tls = config
        .rustls_https_connector_with_connector(TrackingConnector::new(tcp, connections.clone()))
        .map_err(fail("TLS"))?;
    let http: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(tls);
    let auth = config.auth_layer().map_err(fail("credentials"))?;
    let headers = config.extra_headers_layer().map_err(fail("headers"))?;
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.default_retry.then(|| {
            tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry())
        }))
        .option_layer(auth)
        .layer(headers)
        .map_err(BoxError::from)
        .service(http);
    Ok((
        kube::Client::new(service, config.default_namespace),
        connections,
    ))
}

#[cfg(test)]
mod tests {
    use std::io::ErrorKind;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tower::ServiceExt;

    use super::*;

    async fn connect(connections: &Connections, port: u16) -> Tracked {
        let connector = TrackingConnector::new(HttpConnector::new(), connections.clone());
        let uri: Uri = format!("http://127.0.0.1:{port}").parse().unwrap();
        connector.oneshot(uri).await.unwrap()
    }

    #[tokio::test]
    async fn a_reset_reaches_the_peer_as_a_reset_and_a_dropped_connection_leaves_the_set() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Connections::default();
        let mut first = connect(&connections, port).await;
        let (mut peer, _) = listener.accept().await.unwrap();
        let second = connect(&connections, port).await;
        let (mut closed_peer, _) = listener.accept().await.unwrap();
        assert_eq!(connections.open(), 2);

        drop(second);
        assert_eq!(connections.open(), 1, "a dropped connection leaves the set");
        // A close lingers 0 s: the peer sees a reset, not an orderly end.
        let mut buf = [0u8; 8];
        let closed = closed_peer.read(&mut buf).await;
        assert_eq!(closed.unwrap_err().kind(), ErrorKind::ConnectionReset);

        let sent = hyper::rt::Write::poll_write(Pin::new(&mut first), &mut noop(), b"PATCH");
        assert!(matches!(sent, Poll::Ready(Ok(5))), "{sent:?}");
        assert_eq!(connections.reset_all(), 1);
        assert_eq!(connections.resets(), 1);
        let mut got = Vec::new();
        let end = loop {
            match peer.read(&mut buf).await {
                Ok(0) => break Ok(()),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => break Err(e),
            }
        };
        assert_eq!(end.unwrap_err().kind(), ErrorKind::ConnectionReset);
        // The reset connection's owner sees it fail; nothing more goes out on it.
        let after = std::future::poll_fn(|cx| {
            hyper::rt::Write::poll_write(Pin::new(&mut first), cx, b"more")
        })
        .await;
        assert!(after.is_err(), "writes after the reset fail: {after:?}");
        let _ = peer.write_all(b"x").await;
        drop(first);
        assert_eq!(connections.open(), 0);
    }

    fn noop() -> Context<'static> {
        Context::from_waker(std::task::Waker::noop())
    }
}
