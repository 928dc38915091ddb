//! TLS to a `tcp://` engine (`DOCKER_TLS_VERIFY`, or a Docker context with TLS material): the
//! engine's certificate must chain to `ca.pem` of the certificate folder (the system's roots are
//! not trusted for an engine), and this client shows `cert.pem` with `key.pem` when they are
//! there, as the docker CLI does.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::{Dial, Failure, Stream};

/// The code of a certificate folder that cannot be used.
pub(crate) const FILES: &str = "ENGINE_TLS_FILES";
/// The code of an engine whose certificate this client does not trust, or that refused this
/// client's.
pub(crate) const UNTRUSTED: &str = "ENGINE_TLS_UNTRUSTED";

/// Dials `host:port` and speaks TLS with the engine.
pub(crate) struct TlsDial {
    host: String,
    port: u16,
    name: ServerName<'static>,
    config: Arc<rustls::ClientConfig>,
    certs: PathBuf,
}

impl TlsDial {
    /// Reads the certificate folder: `Err` names the file and the fix.
    pub(crate) fn new(host: &str, port: u16, certs: &Path) -> Result<TlsDial, Failure> {
        let name = ServerName::try_from(host.to_string()).map_err(|_| {
            Failure::new(
                FILES,
                format!("{host} is not a host name or address TLS can check"),
            )
        })?;
        Ok(TlsDial {
            host: host.to_string(),
            port,
            name,
            config: Arc::new(config(certs)?),
            certs: certs.to_path_buf(),
        })
    }
}

fn unreadable(file: &Path, e: impl std::fmt::Display) -> Failure {
    Failure::new(
        FILES,
        format!(
            "cannot use {} for TLS to the engine ({e}). The docker CLI's layout is ca.pem (the engine's CA), cert.pem and key.pem (this client's) in DOCKER_CERT_PATH (default ~/.docker) or the context's TLS folder; put them there, or point DOCKER_CERT_PATH at the folder that holds them",
            file.display()
        ),
    )
}

/// The client configuration: the engine's CA only, and this client's certificate when given.
fn config(certs: &Path) -> Result<rustls::ClientConfig, Failure> {
    let ca = certs.join("ca.pem");
    let mut roots = rustls::RootCertStore::empty();
    let listed = CertificateDer::pem_file_iter(&ca).map_err(|e| unreadable(&ca, e))?;
    for cert in listed {
        let cert = cert.map_err(|e| unreadable(&ca, e))?;
        roots.add(cert).map_err(|e| unreadable(&ca, e))?;
    }
    if roots.is_empty() {
        return Err(unreadable(&ca, "no certificate in it"));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| unreadable(&ca, e))?
        .with_root_certificates(roots);
    let (cert, key) = (certs.join("cert.pem"), certs.join("key.pem"));
    if !cert.exists() && !key.exists() {
        return Ok(builder.with_no_client_auth());
    }
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
        .map_err(|e| unreadable(&cert, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| unreadable(&cert, e))?;
    let private = PrivateKeyDer::from_pem_file(&key).map_err(|e| unreadable(&key, e))?;
    builder
        .with_client_auth_cert(chain, private)
        .map_err(|e| unreadable(&cert, e))
}

impl Dial for TlsDial {
    fn dial(&self) -> Pin<Box<dyn std::future::Future<Output = std::io::Result<Stream>> + Send>> {
        let (host, port, name) = (self.host.clone(), self.port, self.name.clone());
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(&self.config));
        let certs = self.certs.clone();
        Box::pin(async move {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            let _ = tcp.set_nodelay(true);
            match connector.connect(name, tcp).await {
                Ok(tls) => Ok(Stream::new(Checked {
                    tls,
                    host,
                    port,
                    certs,
                })),
                Err(e) => Err(handshake_failure(&host, port, &certs, e).io()),
            }
        })
    }
}

/// A TLS connection whose failures say why: with TLS 1.3 the engine refuses this client's
/// certificate after the handshake, at the first read.
struct Checked {
    tls: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    host: String,
    port: u16,
    certs: PathBuf,
}

impl AsyncRead for Checked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.tls).poll_read(cx, buf) {
            Poll::Ready(Err(e)) if rustls_error(&e).is_some() => {
                let failure = handshake_failure(&self.host, self.port, &self.certs, e);
                Poll::Ready(Err(failure.io()))
            }
            other => other,
        }
    }
}

impl AsyncWrite for Checked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.tls).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tls).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tls).poll_shutdown(cx)
    }
}

/// The TLS error inside an I/O error, if it is one.
fn rustls_error(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>())
}

/// A failed handshake, in words: whose certificate was refused, and what to do.
fn handshake_failure(host: &str, port: u16, certs: &Path, e: std::io::Error) -> Failure {
    let text = match rustls_error(&e) {
        Some(rustls::Error::InvalidCertificate(why)) => format!(
            "the engine at {host}:{port} showed a certificate this client does not trust ({why:?}): it is not signed by the CA in {}, or it does not name {host}. Put the engine's CA in that file (docker's ca.pem), or point DOCKER_CERT_PATH at the right folder",
            certs.join("ca.pem").display()
        ),
        Some(rustls::Error::AlertReceived(alert)) => format!(
            "the engine at {host}:{port} refused this client's certificate ({alert:?}): {} is not signed by the CA the engine trusts (its --tlscacert), or is missing. Use a client certificate made by that CA",
            certs.join("cert.pem").display()
        ),
        _ => {
            return Failure::new(
                UNTRUSTED,
                format!("TLS with the engine at {host}:{port} failed: {e}"),
            );
        }
    };
    Failure::new(UNTRUSTED, text)
}
