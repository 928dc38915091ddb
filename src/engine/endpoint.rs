//! Where an Engine API answers: a Unix socket or a TCP address, parsed from `DOCKER_HOST`-style URIs.

use std::fmt;
use std::path::PathBuf;

use crate::host::HostOs;

/// One place an engine may answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Unix socket path.
    Unix(PathBuf),
    /// Plain HTTP over TCP (`tcp://host:port`).
    Tcp { host: String, port: u16 },
    /// A Windows named pipe (`npipe:////./pipe/docker_engine`), kept as `//./pipe/NAME`.
    NamedPipe(String),
    /// A URI the layer cannot use; `why` says what to do instead.
    Unsupported { uri: String, why: String },
}

impl Endpoint {
    /// Parses a `DOCKER_HOST` / `CONTAINER_HOST` value. `tls` is whether `DOCKER_TLS_VERIFY` is on.
    pub fn parse(uri: &str, tls: bool) -> Endpoint {
        let uri = uri.trim();
        let unsupported = |why: &str| Endpoint::Unsupported {
            uri: uri.to_string(),
            why: why.to_string(),
        };
        if let Some(path) = uri.strip_prefix("unix://") {
            if !path.starts_with('/') {
                return unsupported(
                    "a unix:// endpoint needs an absolute socket path, like unix:///var/run/docker.sock",
                );
            }
            return Endpoint::Unix(PathBuf::from(path));
        }
        if uri.starts_with('/') {
            return Endpoint::Unix(PathBuf::from(uri));
        }
        if let Some(rest) = uri
            .strip_prefix("tcp://")
            .or_else(|| uri.strip_prefix("http://"))
        {
            if let Some((_, host)) = rest.rsplit_once('@') {
                // Never echo the user info: it may hold a password.
                let scheme = &uri[..uri.len() - rest.len()];
                return Endpoint::Unsupported {
                    uri: format!("{scheme}***@{host}"),
                    why: "malformed: an engine endpoint carries no user or password (user:password@); use tcp://HOST:PORT, like tcp://127.0.0.1:2375".into(),
                };
            }
            if tls {
                return unsupported(
                    "TLS to a remote engine (DOCKER_TLS_VERIFY) is not supported yet; forward the remote socket to a local one (ssh -L /tmp/engine.sock:/var/run/docker.sock host) and point DOCKER_HOST at unix:///tmp/engine.sock",
                );
            }
            let rest = rest.trim_end_matches('/');
            let (host, port) = match rest.rsplit_once(':') {
                Some((h, p)) => match p.parse::<u16>() {
                    Ok(p) if p > 0 => (h, p),
                    _ => {
                        return unsupported(
                            "the port must be a number between 1 and 65535, like tcp://127.0.0.1:2375",
                        );
                    }
                },
                None => (rest, 2375),
            };
            let host = host.trim_start_matches('[').trim_end_matches(']');
            if host.is_empty() || host.contains('/') {
                return unsupported("expected tcp://HOST:PORT, like tcp://127.0.0.1:2375");
            }
            return Endpoint::Tcp {
                host: host.to_string(),
                port,
            };
        }
        if uri.starts_with("ssh://") {
            return unsupported(
                "ssh:// engines are not supported; forward the remote socket (ssh -L /tmp/engine.sock:/var/run/docker.sock host) and use unix:///tmp/engine.sock",
            );
        }
        if let Some(path) = uri.strip_prefix("npipe://") {
            let name = path
                .replace('\\', "/")
                .strip_prefix("//./pipe/")
                .map(str::to_string);
            return match name.filter(|n| !n.is_empty() && !n.contains('/')) {
                Some(n) => Endpoint::NamedPipe(format!("//./pipe/{n}")),
                None => unsupported("expected a named pipe like npipe:////./pipe/docker_engine"),
            };
        }
        unsupported("expected unix:///path/to/socket or tcp://HOST:PORT")
    }

    /// Whether a process on `os` can reach this kind of endpoint: Unix sockets everywhere but
    /// Windows, named pipes only on Windows, TCP everywhere. `Err` says why not and what to use.
    pub fn usable_on(&self, os: HostOs) -> Result<(), Unusable> {
        match (self, os) {
            (Endpoint::Unix(_), HostOs::Windows) => Err(Unusable::UnixOnWindows),
            (Endpoint::NamedPipe(_), os) if os != HostOs::Windows => Err(Unusable::PipeOffWindows),
            (Endpoint::Unsupported { why, .. }, _) => Err(Unusable::Unsupported(why.clone())),
            _ => Ok(()),
        }
    }

    /// The socket path, for Unix endpoints.
    pub fn socket_path(&self) -> Option<&std::path::Path> {
        match self {
            Endpoint::Unix(p) => Some(p),
            _ => None,
        }
    }
}

/// Why a process cannot reach an endpoint ([`Endpoint::usable_on`]), and what to use instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    /// A Unix socket, on Windows.
    #[error(
        "Unix sockets cannot be used on Windows; use the engine's named pipe (npipe:////./pipe/docker_engine) or tcp://HOST:PORT"
    )]
    UnixOnWindows,
    /// A named pipe, anywhere but Windows.
    #[error(
        "named pipes (npipe://) exist only on Windows; use unix:///path/to/socket or tcp://HOST:PORT"
    )]
    PipeOffWindows,
    /// A URI the layer cannot use; the text says what to do instead.
    #[error("{0}")]
    Unsupported(String),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "unix://{}", p.display()),
            Endpoint::Tcp { host, port } if host.contains(':') => {
                write!(f, "tcp://[{host}]:{port}")
            }
            Endpoint::Tcp { host, port } => write!(f, "tcp://{host}:{port}"),
            Endpoint::NamedPipe(p) => write!(f, "npipe://{p}"),
            Endpoint::Unsupported { uri, .. } => write!(f, "{uri}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_unix_and_tcp() {
        assert_eq!(
            Endpoint::parse("unix:///var/run/docker.sock", false),
            Endpoint::Unix("/var/run/docker.sock".into())
        );
        assert_eq!(
            Endpoint::parse("/run/podman/podman.sock", false),
            Endpoint::Unix("/run/podman/podman.sock".into())
        );
        assert_eq!(
            Endpoint::parse("tcp://127.0.0.1:2375", false),
            Endpoint::Tcp {
                host: "127.0.0.1".into(),
                port: 2375
            }
        );
        assert_eq!(
            Endpoint::parse("tcp://engine", false),
            Endpoint::Tcp {
                host: "engine".into(),
                port: 2375
            }
        );
        assert_eq!(
            Endpoint::parse("tcp://[::1]:2376", false),
            Endpoint::Tcp {
                host: "::1".into(),
                port: 2376
            }
        );
        assert_eq!(
            Endpoint::parse("tcp://[::1]:2376", false).to_string(),
            "tcp://[::1]:2376"
        );
    }

    #[test]
    fn parses_named_pipes() {
        for uri in [
            "npipe:////./pipe/docker_engine",
            "npipe://\\\\.\\pipe\\docker_engine",
        ] {
            let e = Endpoint::parse(uri, false);
            assert_eq!(
                e,
                Endpoint::NamedPipe("//./pipe/docker_engine".into()),
                "{uri}"
            );
            assert_eq!(e.to_string(), "npipe:////./pipe/docker_engine");
        }
    }

    #[test]
    fn endpoint_kinds_usable_by_os() {
        let unix = Endpoint::parse("unix:///var/run/docker.sock", false);
        let pipe = Endpoint::parse("npipe:////./pipe/podman-machine-default", false);
        let tcp = Endpoint::parse("tcp://127.0.0.1:2375", false);
        let bad = Endpoint::parse("ssh://me@host", false);
        for os in [HostOs::Linux, HostOs::MacOs, HostOs::Windows, HostOs::Other] {
            let windows = os == HostOs::Windows;
            assert_eq!(unix.usable_on(os).is_ok(), !windows, "{os:?}");
            assert_eq!(pipe.usable_on(os).is_ok(), windows, "{os:?}");
            assert!(tcp.usable_on(os).is_ok(), "{os:?}");
            let why = bad.usable_on(os).unwrap_err();
            assert!(matches!(why, Unusable::Unsupported(_)), "{os:?}");
            assert!(why.to_string().contains("ssh://"), "{os:?}");
        }
        let why = unix.usable_on(HostOs::Windows).unwrap_err();
        assert_eq!(why, Unusable::UnixOnWindows);
        assert!(why.to_string().contains("npipe://"));
        let why = pipe.usable_on(HostOs::MacOs).unwrap_err();
        assert_eq!(why, Unusable::PipeOffWindows);
        assert!(why.to_string().contains("only on Windows"));
    }

    #[test]
    fn user_info_is_malformed_and_never_echoed() {
        for (uri, tls, shown) in [
            (
                "tcp://user:pw@127.0.0.1:2375",
                false,
                "tcp://***@127.0.0.1:2375",
            ),
            (
                "http://user:pw@engine:2375/",
                false,
                "http://***@engine:2375/",
            ),
            ("tcp://a:b@c:d@host:2375", true, "tcp://***@host:2375"),
        ] {
            let e = Endpoint::parse(uri, tls);
            let Endpoint::Unsupported {
                uri: ref seen,
                ref why,
            } = e
            else {
                panic!("{uri}: {e:?}")
            };
            assert_eq!(seen, shown);
            assert!(why.starts_with("malformed:"), "{why}");
            assert!(
                !format!("{e}{why}").contains("pw") && !e.to_string().contains(":b@"),
                "{e}"
            );
        }
    }

    #[test]
    fn refuses_what_it_cannot_use() {
        for (uri, tls) in [
            ("unix://relative.sock", false),
            ("tcp://127.0.0.1:2376", true),
            ("tcp://127.0.0.1:0", false),
            ("tcp://127.0.0.1:99999", false),
            ("tcp://:2375", false),
            ("ssh://me@host", false),
            ("npipe://docker_engine", false),
            ("npipe:////./pipe/", false),
            ("npipe:////./pipe/a/b", false),
            ("docker.sock", false),
            ("", false),
            ("tcp://user:pw@127.0.0.1:2375", false),
        ] {
            match Endpoint::parse(uri, tls) {
                Endpoint::Unsupported { why, .. } => assert!(!why.is_empty(), "{uri}"),
                other => panic!("{uri} parsed as {other:?}"),
            }
        }
    }
}
