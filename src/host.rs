//! The host this process runs on, as one value: its variables, user and OS. Every platform
//! decision reads it, so tests can describe any host without touching the real one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The host operating system, as far as engine locations go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostOs {
    Linux,
    MacOs,
    Windows,
    Other,
}

impl HostOs {
    /// The OS this process runs on.
    pub fn current() -> HostOs {
        match std::env::consts::OS {
            "linux" => HostOs::Linux,
            "macos" => HostOs::MacOs,
            "windows" => HostOs::Windows,
            _ => HostOs::Other,
        }
    }
}

/// The parts of the host that decide where engines live: its variables, user and OS.
#[derive(Debug, Clone)]
pub struct HostEnv {
    vars: HashMap<String, String>,
    /// The effective user id (0 where there is none).
    pub uid: u32,
    /// The effective group id (0 where there is none).
    pub gid: u32,
    /// The host OS.
    pub os: HostOs,
}

/// A caller's environment record (`process.env` or a plain object) as variables: `None` values
/// (`undefined`, `null`) count as unset; no record at all means this process's environment.
pub fn given_vars(env: Option<HashMap<String, Option<String>>>) -> HashMap<String, String> {
    match env {
        Some(map) => map
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect(),
        None => std::env::vars().collect(),
    }
}

impl HostEnv {
    /// A caller's environment record, as [`given_vars`] reads it, with this process's user and OS.
    pub fn given(env: Option<HashMap<String, Option<String>>>) -> HostEnv {
        HostEnv::from_vars(given_vars(env))
    }

    /// The given variables with this process's user and OS.
    pub fn from_vars(vars: HashMap<String, String>) -> HostEnv {
        #[cfg(unix)]
        // SAFETY: getuid/getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        #[cfg(not(unix))]
        let (uid, gid) = (0, 0);
        HostEnv {
            vars,
            uid,
            gid,
            os: HostOs::current(),
        }
    }

    /// Every variable.
    pub fn vars(&self) -> &HashMap<String, String> {
        &self.vars
    }

    /// A variable's value; empty counts as unset.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The user's home folder (`HOME`), when absolute.
    pub fn home(&self) -> Option<PathBuf> {
        self.var("HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    }

    /// `XDG_RUNTIME_DIR`, or `/run/user/<uid>` where it is unset.
    pub fn runtime_dir(&self) -> PathBuf {
        self.var("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| PathBuf::from(format!("/run/user/{}", self.uid)))
    }

    /// Runs inside a sandbox container (`PO_SANDBOX=1`), where containers must not nest.
    pub fn contained(&self) -> bool {
        self.var(crate::names::vars::SANDBOX_VAR)
            .is_some_and(|v| v.trim() == "1")
    }

    /// Where per-grant broker socket folders go: `given` when absolute (an `OPTIONS_INVALID`
    /// naming `option` otherwise), else `$XDG_RUNTIME_DIR/po-broker`, else
    /// `/run/user/<uid>/po-broker` when that runtime folder exists (a session without the
    /// variable: `su`, `runuser`, cron), else `<tmpdir>/po-broker-<uid>`. The broker refuses a
    /// folder another user could change (see `broker::socket`).
    pub fn broker_socket_dir(&self, given: Option<&str>, option: &str) -> Result<PathBuf> {
        match given {
            Some(d) if d.starts_with('/') => Ok(PathBuf::from(d)),
            Some(d) => Err(Error::OptionsInvalid {
                option: option.into(),
                reason: format!("{d:?} is not an absolute path"),
            }),
            None => Ok(
                match self.var("XDG_RUNTIME_DIR").filter(|d| d.starts_with('/')) {
                    Some(d) => PathBuf::from(d).join("po-broker"),
                    None => {
                        let run = PathBuf::from(format!("/run/user/{}", self.uid));
                        if run.is_dir() {
                            run.join("po-broker")
                        } else {
                            std::env::temp_dir().join(format!("po-broker-{}", self.uid))
                        }
                    }
                },
            ),
        }
    }

    /// Finds an executable on `PATH` (I/O: one stat per folder).
    pub fn which(&self, program: &str) -> Option<PathBuf> {
        let path = self.var("PATH")?;
        std::env::split_paths(path)
            .map(|dir| dir.join(program))
            .find(|p| is_executable(p))
    }
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

/// This machine's own interface addresses (loopback left out): what a workspace container must
/// not reach when its engine runs here. Empty where they cannot be read.
pub fn interface_addresses() -> Vec<std::net::IpAddr> {
    #[cfg(unix)]
    {
        let mut out = Vec::new();
        let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
        // SAFETY: getifaddrs fills a list we free below; each entry is read before that.
        if unsafe { libc::getifaddrs(&mut list) } != 0 {
            return out;
        }
        let mut cur = list;
        while !cur.is_null() {
            // SAFETY: `cur` is an entry of the list getifaddrs returned.
            let entry = unsafe { &*cur };
            if let Some(ip) = unsafe { socket_ip(entry.ifa_addr) }
                && !ip.is_loopback()
            {
                out.push(ip);
            }
            cur = entry.ifa_next;
        }
        // SAFETY: the list came from getifaddrs and is freed once.
        unsafe { libc::freeifaddrs(list) };
        out.sort();
        out.dedup();
        out
    }
    #[cfg(not(unix))]
    {
        Vec::new()
    }
}

/// The IP address of a socket address, when it is IPv4 or IPv6.
///
/// # Safety
/// `addr` is null or points to a socket address of the length its family says.
#[cfg(unix)]
unsafe fn socket_ip(addr: *const libc::sockaddr) -> Option<std::net::IpAddr> {
    if addr.is_null() {
        return None;
    }
    // SAFETY: the caller's promise; the family says which struct it is.
    unsafe {
        match i32::from((*addr).sa_family) {
            libc::AF_INET => {
                let a = &*(addr as *const libc::sockaddr_in);
                Some(std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)).into())
            }
            libc::AF_INET6 => {
                let a = &*(addr as *const libc::sockaddr_in6);
                Some(std::net::Ipv6Addr::from(a.sin6_addr.s6_addr).into())
            }
            _ => None,
        }
    }
}

/// The name servers a `resolv.conf` text lists.
pub fn name_servers(resolv_conf: &str) -> Vec<std::net::IpAddr> {
    resolv_conf
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some("nameserver")).then(|| words.next()?.parse().ok())?
        })
        .collect()
}

/// The name servers this machine resolves through (systemd-resolved's upstreams when its stub
/// is in `/etc/resolv.conf`, as Docker does), loopback left out.
pub fn resolvers() -> Vec<std::net::IpAddr> {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let mut servers = name_servers(&read("/etc/resolv.conf"));
    if servers.iter().any(|s| s.is_loopback()) {
        servers.extend(name_servers(&read("/run/systemd/resolve/resolv.conf")));
    }
    servers.retain(|s| !s.is_loopback());
    servers
}

#[cfg(test)]
impl HostEnv {
    /// A host with exactly these variables (and this process's user and OS), for tests.
    pub fn with_vars(vars: &[(&str, &str)]) -> HostEnv {
        HostEnv::from_vars(
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }
}

/// A numeric `uid:gid`, as containers run and sockets are owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserIds {
    pub uid: u32,
    pub gid: u32,
}

impl UserIds {
    /// Parses `uid:gid` (both numeric); an `OPTIONS_INVALID` naming `option` otherwise.
    pub fn parse(value: &str, option: &str) -> Result<UserIds> {
        value
            .split_once(':')
            .and_then(|(u, g)| {
                Some(UserIds {
                    uid: u.parse().ok()?,
                    gid: g.parse().ok()?,
                })
            })
            .ok_or_else(|| Error::OptionsInvalid {
                option: option.into(),
                reason: format!("{value:?} must be numeric uid:gid, like 1000:1000"),
            })
    }
}

impl std::fmt::Display for UserIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.uid, self.gid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_vars_drop_unset_values_and_default_to_the_process() {
        let record = HashMap::from([
            ("A".to_string(), Some("1".to_string())),
            ("B".to_string(), None),
        ]);
        assert_eq!(
            given_vars(Some(record)),
            HashMap::from([("A".to_string(), "1".to_string())])
        );
        assert_eq!(
            given_vars(None),
            std::env::vars().collect::<HashMap<_, _>>()
        );
        assert_eq!(HostEnv::given(Some(HashMap::new())).vars().len(), 0);
    }

    #[test]
    fn user_ids_parse_only_numeric_pairs() {
        assert_eq!(
            UserIds::parse("1000:100", "user").unwrap(),
            UserIds {
                uid: 1000,
                gid: 100
            }
        );
        assert_eq!(UserIds::parse("0:0", "user").unwrap().to_string(), "0:0");
        for bad in [
            "",
            "1000",
            "1000:",
            ":1000",
            "a:b",
            "1000:100:1",
            "-1:0",
            " 1:1",
            "99999999999:0",
        ] {
            let e = UserIds::parse(bad, "user").unwrap_err();
            assert_eq!(e.code(), "OPTIONS_INVALID", "{bad:?}");
            assert!(e.to_string().starts_with("Invalid option user: "), "{e}");
        }
    }

    #[test]
    fn contained_only_with_sandbox_one() {
        assert!(HostEnv::with_vars(&[("PO_SANDBOX", "1")]).contained());
        assert!(HostEnv::with_vars(&[("PO_SANDBOX", " 1 ")]).contained());
        assert!(!HostEnv::with_vars(&[("PO_SANDBOX", "0")]).contained());
        assert!(!HostEnv::with_vars(&[("PO_SANDBOX", "")]).contained());
        assert!(!HostEnv::with_vars(&[]).contained());
    }

    #[test]
    fn broker_socket_dir_default_and_given() {
        let h = HostEnv::with_vars(&[("XDG_RUNTIME_DIR", "/run/user/7")]);
        assert_eq!(
            h.broker_socket_dir(None, "socketDir").unwrap(),
            PathBuf::from("/run/user/7/po-broker")
        );
        assert_eq!(
            h.broker_socket_dir(Some("/s"), "socketDir").unwrap(),
            PathBuf::from("/s")
        );
        let e = h.broker_socket_dir(Some("rel"), "socketDir").unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid option socketDir: \"rel\" is not an absolute path"
        );
        let relative_xdg = HostEnv::with_vars(&[("XDG_RUNTIME_DIR", "run")]);
        // An empty value is not "unset": it is refused like any relative path.
        assert!(
            relative_xdg
                .broker_socket_dir(Some(""), "socketDir")
                .is_err()
        );
        let dir = relative_xdg.broker_socket_dir(None, "socketDir").unwrap();
        assert_eq!(
            dir,
            std::env::temp_dir().join(format!("po-broker-{}", relative_xdg.uid))
        );
    }
}
