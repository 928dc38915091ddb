//! Where an Engine API answers: a Unix socket, a named pipe, TCP (plain or TLS) or SSH, parsed
//! from `DOCKER_HOST`-style URIs as the docker CLI reads them.

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
    /// HTTP over TLS over TCP (`tcp://host:port` with `DOCKER_TLS_VERIFY`, or a Docker context
    /// with TLS material): the engine's certificate is checked against `certs/ca.pem`, and this
    /// client shows `certs/cert.pem` with `certs/key.pem`.
    Tls {
        host: String,
        port: u16,
        certs: PathBuf,
    },
    /// The engine on another machine through the system's OpenSSH client
    /// (`ssh … docker system dial-stdio`).
    Ssh(SshTarget),
    /// A Windows named pipe (`npipe:////./pipe/docker_engine`), kept as `//./pipe/NAME`.
    NamedPipe(String),
    /// A URI the layer cannot use; `why` says what to do instead.
    Unsupported { uri: String, why: String },
}

/// An `ssh://[user@]host[:port][/socket]` engine: the machine to log in to, and the engine's
/// socket there (the remote docker CLI's default when `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// The login name (`ssh -l`); the person's ssh config decides when `None`.
    pub user: Option<String>,
    /// The host name or address, as ssh resolves it (its config's `Host` entries apply).
    pub host: String,
    /// The port (`ssh -p`); the ssh config's or 22 when `None`.
    pub port: Option<u16>,
    /// The engine's socket on that machine (`docker -H unix://… system dial-stdio`).
    pub socket: Option<String>,
    /// The ssh command to run (`PO_SANDBOX_SSH_COMMAND`); `ssh` when `None`. Not part of the URI.
    pub command: Option<String>,
}

/// TLS to a `tcp://` engine, as the docker CLI's variables set it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Tls {
    /// Plain HTTP.
    #[default]
    Off,
    /// TLS with the engine's certificate checked, the files in this folder (`ca.pem`,
    /// `cert.pem`, `key.pem`).
    Verify(PathBuf),
    /// TLS without checking the engine's certificate (`DOCKER_TLS` without
    /// `DOCKER_TLS_VERIFY`, a context's `SkipTLSVerify`): refused.
    Unverified,
}

impl Endpoint {
    /// Parses a `DOCKER_HOST` / `CONTAINER_HOST` value, plain HTTP for `tcp://`.
    pub fn parse(uri: &str) -> Endpoint {
        Endpoint::parse_with(uri, &Tls::Off)
    }

    /// Parses a `DOCKER_HOST` / `CONTAINER_HOST` value; `tls` says how a `tcp://` engine is
    /// reached.
    pub fn parse_with(uri: &str, tls: &Tls) -> Endpoint {
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
            return Endpoint::tcp(uri, rest, tls);
        }
        if let Some(rest) = uri.strip_prefix("ssh://") {
            return match SshTarget::parse(rest) {
                Ok(target) => Endpoint::Ssh(target),
                Err(why) => Endpoint::Unsupported {
                    uri: redact_ssh(uri),
                    why,
                },
            };
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
        unsupported("expected unix:///path/to/socket, tcp://HOST:PORT or ssh://[USER@]HOST[:PORT]")
    }

    /// A `tcp://` (or `http://`) URI, `rest` the part after the scheme: plain, or TLS as `tls`
    /// says (port 2376 by default then, as the docker CLI has it).
    fn tcp(uri: &str, rest: &str, tls: &Tls) -> Endpoint {
        let unsupported = |why: &str| Endpoint::Unsupported {
            uri: uri.to_string(),
            why: why.to_string(),
        };
        if let Some((_, host)) = rest.rsplit_once('@') {
            // Never echo the user info: it may hold a password.
            let scheme = &uri[..uri.len() - rest.len()];
            return Endpoint::Unsupported {
                uri: format!("{scheme}***@{host}"),
                why: "malformed: an engine endpoint carries no user or password (user:password@); use tcp://HOST:PORT, like tcp://127.0.0.1:2375".into(),
            };
        }
        if *tls == Tls::Unverified {
            return unsupported(
                "TLS without checking the engine's certificate (DOCKER_TLS without DOCKER_TLS_VERIFY, or a context's SkipTLSVerify) lets anyone on the path act as the engine; set DOCKER_TLS_VERIFY=1 with the engine's CA in DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem)",
            );
        }
        let rest = rest.trim_end_matches('/');
        let default_port = if matches!(tls, Tls::Verify(_)) {
            2376
        } else {
            2375
        };
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) => match p.parse::<u16>() {
                Ok(p) if p > 0 => (h, p),
                _ => {
                    return unsupported(
                        "the port must be a number between 1 and 65535, like tcp://127.0.0.1:2375",
                    );
                }
            },
            None => (rest, default_port),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || host.contains('/') {
            return unsupported("expected tcp://HOST:PORT, like tcp://127.0.0.1:2375");
        }
        let host = host.to_string();
        match tls {
            Tls::Verify(certs) => Endpoint::Tls {
                host,
                port,
                certs: certs.clone(),
            },
            _ => Endpoint::Tcp { host, port },
        }
    }

    /// How the engine is reached, in one word: `unix`, `npipe`, `tcp`, `tls` or `ssh`.
    pub fn transport(&self) -> &'static str {
        match self {
            Endpoint::Unix(_) => "unix",
            Endpoint::NamedPipe(_) => "npipe",
            Endpoint::Tcp { .. } => "tcp",
            Endpoint::Tls { .. } => "tls",
            Endpoint::Ssh(_) => "ssh",
            Endpoint::Unsupported { .. } => "unsupported",
        }
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

/// A login name or host name that ssh takes as a word: never an option (`-o…`), no space,
/// quote or shell character.
fn ssh_word(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-:%".contains(&b))
}

impl SshTarget {
    /// `[user@]host[:port][/socket]`, the part after `ssh://`.
    fn parse(rest: &str) -> Result<SshTarget, String> {
        let example = "like ssh://me@build-box or ssh://me@build-box:2222/run/docker.sock";
        let (user, rest) = match rest.rsplit_once('@') {
            Some((user, _)) if user.contains(':') => {
                return Err(format!(
                    "malformed: an ssh:// engine carries no password (user:password@); ssh uses your keys and agent, {example}"
                ));
            }
            Some((user, rest)) => (Some(user), rest),
            None => (None, rest),
        };
        let (authority, socket) = match rest.find('/') {
            Some(i) => (&rest[..i], Some(&rest[i..])),
            None => (rest, None),
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            match v6.split_once(']') {
                Some((h, "")) => (h, None),
                Some((h, p)) => (h, Some(p.strip_prefix(':').unwrap_or(p))),
                None => return Err(format!("expected [IPv6]:PORT, {example}")),
            }
        } else {
            match authority.rsplit_once(':') {
                // An IPv6 address is written in brackets, as in any URI.
                Some((h, _)) if h.contains(':') => {
                    return Err(format!(
                        "an IPv6 address goes in brackets, [::1]:22, {example}"
                    ));
                }
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(p) if p > 0 => Some(p),
                _ => {
                    return Err(format!(
                        "the port must be a number between 1 and 65535, {example}"
                    ));
                }
            },
        };
        if !ssh_word(host) {
            return Err(format!(
                "the host {host:?} is not a host name or address ssh can take (letters, digits, '.', '-', '_', not starting with '-'), {example}"
            ));
        }
        if let Some(u) = user
            && !ssh_word(u)
        {
            return Err(format!(
                "the user {u:?} is not a login name ssh can take (letters, digits, '.', '-', '_', not starting with '-'), {example}"
            ));
        }
        let socket = socket.filter(|s| *s != "/");
        if let Some(s) = socket {
            let safe = s
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b));
            if !safe || s.contains("..") {
                return Err(format!(
                    "the socket path {s:?} may hold only letters, digits and / . _ - (it is passed to the remote shell), {example}"
                ));
            }
        }
        Ok(SshTarget {
            user: user.map(str::to_string),
            host: host.to_string(),
            port,
            socket: socket.map(str::to_string),
            command: None,
        })
    }
}

/// An `ssh://` URI as it may be shown: the user info's password, if any, never is.
fn redact_ssh(uri: &str) -> String {
    match uri["ssh://".len()..].rsplit_once('@') {
        Some((user, host)) if user.contains(':') => format!("ssh://***@{host}"),
        _ => uri.to_string(),
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
            Endpoint::Tls { host, port, .. } if host.contains(':') => {
                write!(f, "tcp://[{host}]:{port}")
            }
            Endpoint::Tls { host, port, .. } => write!(f, "tcp://{host}:{port}"),
            Endpoint::Ssh(t) => {
                write!(f, "ssh://")?;
                if let Some(user) = &t.user {
                    write!(f, "{user}@")?;
                }
                match (t.host.contains(':'), t.port) {
                    (true, Some(p)) => write!(f, "[{}]:{p}", t.host)?,
                    (true, None) => write!(f, "[{}]", t.host)?,
                    (false, Some(p)) => write!(f, "{}:{p}", t.host)?,
                    (false, None) => write!(f, "{}", t.host)?,
                }
                write!(f, "{}", t.socket.as_deref().unwrap_or(""))
            }
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
            Endpoint::parse("unix:///var/run/docker.sock"),
            Endpoint::Unix("/var/run/docker.sock".into())
        );
        assert_eq!(
            Endpoint::parse("/run/podman/podman.sock"),
            Endpoint::Unix("/run/podman/podman.sock".into())
        );
        assert_eq!(
            Endpoint::parse("tcp://127.0.0.1:2375"),
            Endpoint::Tcp {
                host: "127.0.0.1".into(),
                port: 2375
            }
        );
        assert_eq!(
            Endpoint::parse("tcp://engine"),
            Endpoint::Tcp {
                host: "engine".into(),
                port: 2375
            }
        );
        assert_eq!(
            Endpoint::parse("tcp://[::1]:2376"),
            Endpoint::Tcp {
                host: "::1".into(),
                port: 2376
            }
        );
        assert_eq!(
            Endpoint::parse("tcp://[::1]:2376").to_string(),
            "tcp://[::1]:2376"
        );
    }

    #[test]
    fn parses_named_pipes() {
        for uri in [
            "npipe:////./pipe/docker_engine",
            "npipe://\\\\.\\pipe\\docker_engine",
        ] {
            let e = Endpoint::parse(uri);
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
        let unix = Endpoint::parse("unix:///var/run/docker.sock");
        let pipe = Endpoint::parse("npipe:////./pipe/podman-machine-default");
        let tcp = Endpoint::parse("tcp://127.0.0.1:2375");
        let bad = Endpoint::parse("ssh://-oProxyCommand=x");
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
            ("ssh://me:pw@build-box", false, "ssh://***@build-box"),
        ] {
            let tls = if tls {
                Tls::Verify("/c".into())
            } else {
                Tls::Off
            };
            let e = Endpoint::parse_with(uri, &tls);
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
            ("ssh://-oProxyCommand=touch%20x", false),
            ("ssh://me@-host", false),
            ("ssh://-l@host", false),
            ("ssh://me@host:0", false),
            ("ssh://me@host:ssh", false),
            ("ssh://me@ho st", false),
            ("ssh://me@host;rm", false),
            ("ssh://me@host/run/docker.sock;rm", false),
            ("ssh://me@host/run/$(x).sock", false),
            ("ssh://me@host/../../x.sock", false),
            ("ssh://", false),
            ("ssh://[::1", false),
            ("ssh://::1", false),
            ("ssh://me@fe80::1:22", false),
            ("tcp://127.0.0.1:0", false),
            ("tcp://127.0.0.1:99999", false),
            ("tcp://:2375", false),
            ("npipe://docker_engine", false),
            ("npipe:////./pipe/", false),
            ("npipe:////./pipe/a/b", false),
            ("docker.sock", false),
            ("", false),
            ("tcp://user:pw@127.0.0.1:2375", false),
        ] {
            let tls = if tls { Tls::Unverified } else { Tls::Off };
            match Endpoint::parse_with(uri, &tls) {
                Endpoint::Unsupported { why, .. } => assert!(!why.is_empty(), "{uri}"),
                other => panic!("{uri} parsed as {other:?}"),
            }
        }
    }

    #[test]
    fn parses_tls_with_its_certificates_and_the_tls_port() {
        let certs = PathBuf::from("/home/me/.docker");
        let tls = Tls::Verify(certs.clone());
        assert_eq!(
            Endpoint::parse_with("tcp://build-box:2376", &tls),
            Endpoint::Tls {
                host: "build-box".into(),
                port: 2376,
                certs: certs.clone()
            }
        );
        let e = Endpoint::parse_with("tcp://10.0.0.5", &tls);
        assert_eq!(e.to_string(), "tcp://10.0.0.5:2376");
        assert_eq!(e.transport(), "tls");
        // TLS is for tcp:// only, as the docker CLI does.
        assert_eq!(
            Endpoint::parse_with("unix:///var/run/docker.sock", &tls).transport(),
            "unix"
        );
        let Endpoint::Unsupported { why, .. } =
            Endpoint::parse_with("tcp://build-box:2376", &Tls::Unverified)
        else {
            panic!("unverified TLS accepted")
        };
        assert!(why.contains("DOCKER_TLS_VERIFY=1"), "{why}");
    }

    #[test]
    fn parses_ssh_targets_and_shows_them_back() {
        for (uri, user, host, port, socket) in [
            ("ssh://build-box", None, "build-box", None, None),
            ("ssh://me@build-box", Some("me"), "build-box", None, None),
            (
                "ssh://me@10.0.0.5:2222",
                Some("me"),
                "10.0.0.5",
                Some(2222),
                None,
            ),
            (
                "ssh://me@[::1]:2222/run/user/1000/docker.sock",
                Some("me"),
                "::1",
                Some(2222),
                Some("/run/user/1000/docker.sock"),
            ),
            ("ssh://[::1]", None, "::1", None, None),
            (
                "ssh://box.example.org/var/run/docker.sock",
                None,
                "box.example.org",
                None,
                Some("/var/run/docker.sock"),
            ),
        ] {
            let e = Endpoint::parse(uri);
            assert_eq!(
                e,
                Endpoint::Ssh(SshTarget {
                    user: user.map(str::to_string),
                    host: host.into(),
                    port,
                    socket: socket.map(str::to_string),
                    command: None,
                }),
                "{uri}"
            );
            assert_eq!(e.to_string(), uri);
            assert_eq!(e.transport(), "ssh");
            assert_eq!(Endpoint::parse(&e.to_string()), e, "{uri}");
        }
    }
}
