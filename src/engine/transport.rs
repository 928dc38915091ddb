//! Engines reached through a connection of the layer's own: TLS over TCP ([`tls`], the project's
//! rustls, trusting only the engine's CA) and SSH ([`ssh`], the system's OpenSSH client running
//! `docker system dial-stdio` on the engine's machine, as the docker CLI does). Both are one
//! engine client: an HTTP/1 client over a [`Dialer`] that opens one stream to the engine;
//! idle connections are kept and reused, so a hub does not dial per call.
//!
//! A connection that fails says why in a [`Failure`] (a host key that does not match, a
//! certificate from another CA): it travels inside the client's error, and [`failure_in`]
//! finds it there, so detection and every engine call name the fix.

pub(crate) mod ssh;
pub(crate) mod tls;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bollard::{ClientVersion, Docker};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How long an idle connection is kept for the next call.
const IDLE: Duration = Duration::from_secs(30);

/// Why a connection to the engine could not be made, in words that name the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text}")]
pub(crate) struct Failure {
    /// The reason code detection reports (`ENGINE_SSH_HOST_KEY`, `ENGINE_TLS_UNTRUSTED`…).
    pub code: &'static str,
    /// What happened and what to do.
    pub text: String,
}

impl Failure {
    pub(crate) fn new(code: &'static str, text: impl Into<String>) -> Failure {
        Failure {
            code,
            text: text.into(),
        }
    }

    /// As an I/O error, so it travels through the HTTP client to the caller.
    pub(crate) fn io(self) -> std::io::Error {
        std::io::Error::other(self)
    }
}

/// The [`Failure`] somewhere in `e`'s chain of sources, if any.
pub(crate) fn failure_in<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Failure> {
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(e) = at {
        if let Some(f) = e.downcast_ref::<Failure>() {
            return Some(f);
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(f) = io.get_ref().and_then(|i| i.downcast_ref::<Failure>())
        {
            return Some(f);
        }
        // bollard's I/O error is transparent: its source is the I/O error's source, which
        // skips the Failure the I/O error holds.
        if let Some(bollard::errors::Error::IOError { err }) = e.downcast_ref()
            && let Some(f) = err.get_ref().and_then(|i| i.downcast_ref::<Failure>())
        {
            return Some(f);
        }
        at = e.source();
    }
    None
}

/// A byte stream to the engine.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// One connection to the engine, as the HTTP client takes it.
pub(crate) struct Stream(Box<dyn Io>);

impl Stream {
    pub(crate) fn new(io: impl Io + 'static) -> Stream {
        Stream(Box::new(io))
    }
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

type Dialing = Pin<Box<dyn Future<Output = std::io::Result<TokioIo<Stream>>> + Send>>;

/// Opens one connection to the engine.
pub(crate) trait Dial: Send + Sync + 'static {
    fn dial(&self) -> Pin<Box<dyn Future<Output = std::io::Result<Stream>> + Send>>;
    /// Why a connection of this dialer failed lately, if one did: a connection that ends
    /// before its request is sent fails the request with a plain "connection closed", and
    /// this says why.
    fn last_failure(&self) -> Option<Failure> {
        None
    }
}

/// The HTTP client's connector: every new connection is a [`Dial`].
#[derive(Clone)]
pub(crate) struct Dialer(Arc<dyn Dial>);

impl tower_service::Service<hyper::Uri> for Dialer {
    type Response = TokioIo<Stream>;
    type Error = std::io::Error;
    type Future = Dialing;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: hyper::Uri) -> Dialing {
        let dialing = self.0.dial();
        Box::pin(async move { dialing.await.map(TokioIo::new) })
    }
}

/// An engine client over `dial`, speaking `version`, each request bounded by `secs`.
pub(crate) fn client(
    dial: impl Dial,
    secs: u64,
    version: &ClientVersion,
) -> Result<Docker, bollard::errors::Error> {
    let dial: Arc<dyn Dial> = Arc::new(dial);
    let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_idle_timeout(IDLE)
        .build(Dialer(Arc::clone(&dial)));
    let http = Arc::new(http);
    Docker::connect_with_custom_transport(
        move |request: bollard::BollardRequest| {
            let (http, dial) = (Arc::clone(&http), Arc::clone(&dial));
            async move {
                http.request(request).await.map_err(|e| {
                    match (failure_in(&e), dial.last_failure()) {
                        (None, Some(why)) => bollard::errors::Error::from(why.io()),
                        _ => bollard::errors::Error::from(e),
                    }
                })
            }
        },
        // The host part is a name of the layer's own: the dialer, not the URI, says where the
        // engine is.
        Some("http://engine"),
        secs,
        version,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_found_anywhere_in_the_chain() {
        let f = Failure::new("ENGINE_SSH_HOST_KEY", "the host key of box does not match");
        let io = f.clone().io();
        assert_eq!(failure_in(&io), Some(&f));
        #[derive(Debug, thiserror::Error)]
        #[error("client error (Connect)")]
        struct Outer(#[source] std::io::Error);
        let outer = Outer(f.clone().io());
        assert_eq!(failure_in(&outer), Some(&f));
        let plain = std::io::Error::other("refused");
        assert_eq!(failure_in(&plain), None);
        // As the client hands a connection's last failure on: bollard's transparent I/O error.
        let bollard = bollard::errors::Error::from(f.clone().io());
        assert_eq!(failure_in(&bollard), Some(&f));
    }
}
