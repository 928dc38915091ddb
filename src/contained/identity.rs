//! Whether this process runs inside a sandbox container, for which workspace, and how its model
//! providers reach the host's credential broker — all read from the environment it is given.
//! Malformed or contradictory variables become `problems`, never errors: a person asking
//! `/po-sandbox` must always get an answer.

use std::collections::HashMap;
use std::path::Path;

pub(crate) use crate::broker::server::RouteKind;
use crate::names::vars::{
    ADDRESS_VAR, EGRESS_PROXY_VAR, EGRESS_SOCKET_VAR, GUARDED_PATHS_VAR, NETWORK_VAR,
    PROVIDERS_VAR, SANDBOX_VAR, SOCKET_VAR, WORKSPACE_MODE_VAR, WORKSPACE_VAR,
};

/// The proxy variables a session sets for its tools once the egress bridge runs.
pub const PROXY_VARS: [&str; 4] = ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"];

/// How brokered provider calls reach the host's credential broker.
#[napi_derive::napi(object, js_name = "BrokerRouteInfo")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRoute {
    /// `socket` (a bind-mounted Unix socket, reached through a loopback bridge) or `tcp`.
    pub kind: RouteKind,
    /// The socket path (`socket`) or `host:port` (`tcp`).
    pub target: String,
}

impl BrokerRoute {
    fn new(kind: RouteKind, target: &str) -> BrokerRoute {
        BrokerRoute {
            kind,
            target: target.to_string(),
        }
    }
}

/// What the environment says about this process.
#[napi_derive::napi(object, object_from_js = false)]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxState {
    /// Runs inside a sandbox container (`PO_SANDBOX=1`).
    pub contained: bool,
    /// The workspace id (`PO_WORKSPACE`).
    pub workspace: Option<String>,
    /// Providers whose calls go through the broker (`PO_BROKER_PROVIDERS`, valid names only).
    pub brokered_providers: Vec<String>,
    /// The broker route (`PO_BROKER_SOCKET` or `PO_BROKER_ADDRESS`), when exactly one valid
    /// route is set.
    pub route: Option<BrokerRoute>,
    /// Providers are re-pointed at the broker: a route, at least one provider, no problem.
    pub brokered: bool,
    /// Paths of the workspace mounted read-only here, because the host runs them later
    /// (`PO_SANDBOX_GUARDED_PATHS`: git hooks and config, editor tasks, `.envrc`).
    pub guarded_paths: Vec<String>,
    /// The egress proxy's socket (`PO_BROKER_EGRESS_SOCKET`, allowlist mode): the only way
    /// out of this container, through a loopback bridge and `HTTPS_PROXY`.
    pub egress_socket: Option<String>,
    /// The egress proxy's URL on the TCP route (`PO_BROKER_EGRESS_PROXY`, VM engines): used as
    /// `HTTPS_PROXY` directly. It carries the grant's egress credentials: never shown.
    pub egress_proxy_route: Option<String>,
    /// The proxy this session's tools use (`HTTPS_PROXY`, set by the extension at
    /// `session_start` when it bridged the egress socket).
    pub egress_proxy: Option<String>,
    /// The egress mode this container's network rules enforce (`PO_SANDBOX_NETWORK`: `open`,
    /// `none` or `allowlist`), when set.
    pub network: Option<String>,
    /// Malformed or contradictory variables, in words (never thrown).
    pub problems: Vec<String>,
    /// The workspace is a copy in a volume of its own (clone mode:
    /// `PO_SANDBOX_WORKSPACE_MODE=clone`): nothing written reaches the host until taken.
    pub clone: bool,
    /// The git hosts whose HTTPS (and SSH-form) remotes go through the broker's git route
    /// (the container's git configuration, `GIT_CONFIG_*`, with `PO_BROKER_GIT_TOKEN`).
    pub git_hosts: Vec<String>,
    /// The package registries reached through the broker's registry routes (`npm`,
    /// `npm @scope`, `pip`), from npm's generated user config and `PIP_INDEX_URL`.
    pub registries: Vec<String>,
}

fn get<'a>(env: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    env.get(name).map(String::as_str)
}

fn valid_provider(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn valid_address(addr: &str) -> bool {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
}

/// The egress mode a container lists (`PO_SANDBOX_NETWORK`); an unknown one is a problem.
fn network(env: &HashMap<String, String>, problems: &mut Vec<String>) -> Option<String> {
    use crate::sandbox::blueprint::{MODES, NetworkMode};
    let value = get(env, NETWORK_VAR)?.trim();
    match NetworkMode::parse(value) {
        Some(m) => Some(m.as_str().to_string()),
        None => {
            problems.push(format!(
                "{NETWORK_VAR}={value:?} is not a network mode ({MODES})."
            ));
            None
        }
    }
}

/// What the network allows in words, for `/po-sandbox`.
fn network_words(mode: &str) -> &'static str {
    match mode {
        "open" => {
            "the public internet; other workspaces, the host, link-local and private addresses are refused"
        }
        "none" => "nothing but loopback and the broker route",
        _ => {
            "nothing but loopback and the broker route, through which only allowlisted hosts are reached"
        }
    }
}

/// The guarded paths a container lists (`PO_SANDBOX_GUARDED_PATHS`).
fn guarded_paths(env: &HashMap<String, String>) -> Vec<String> {
    get(env, GUARDED_PATHS_VAR)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// `PO_BROKER_PROVIDERS`: valid names once each; bad ones and an empty list are problems.
fn providers_var(env: &HashMap<String, String>, s: &mut SandboxState) {
    if let Some(raw) = get(env, PROVIDERS_VAR) {
        let mut names: Vec<String> = Vec::new();
        for name in raw
            .split([',', ' ', '\t', '\n'])
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            if !valid_provider(name) {
                s.problems.push(format!(
                    "{PROVIDERS_VAR} names {name:?}, which is not a provider id (lowercase letters, digits, '-' or '_'); it is ignored."
                ));
            } else if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
        // A grant for the egress proxy or the git route alone names no provider.
        let egress_only = [
            EGRESS_SOCKET_VAR,
            EGRESS_PROXY_VAR,
            crate::broker::git::TOKEN_VAR,
            crate::broker::registry::TOKEN_VAR,
        ]
        .iter()
        .any(|var| get(env, var).is_some_and(|v| !v.trim().is_empty()));
        if names.is_empty()
            && !egress_only
            && !s.problems.iter().any(|p| p.starts_with(PROVIDERS_VAR))
        {
            s.problems
                .push(format!("{PROVIDERS_VAR} is set but names no provider."));
        }
        s.brokered_providers = names;
    }
}

/// Reads the sandbox state from an environment.
pub fn read_state(env: &HashMap<String, String>) -> SandboxState {
    let mut s = SandboxState::default();
    match get(env, SANDBOX_VAR).map(str::trim) {
        None | Some("") | Some("0") => {}
        Some("1") => s.contained = true,
        Some(other) => s.problems.push(format!(
            "{SANDBOX_VAR}={other:?} is not understood: it is 1 inside a sandbox container and unset on the host. Treating this session as running on the host."
        )),
    }
    match get(env, WORKSPACE_VAR).map(str::trim) {
        Some(w) if !w.is_empty() => s.workspace = Some(w.to_string()),
        _ if s.contained => s.problems.push(format!(
            "{SANDBOX_VAR}=1 but {WORKSPACE_VAR} is not set: the container was started without naming its workspace."
        )),
        _ => {}
    }
    providers_var(env, &mut s);
    let socket = get(env, SOCKET_VAR)
        .map(str::trim)
        .filter(|v| !v.is_empty());
    let address = get(env, ADDRESS_VAR)
        .map(str::trim)
        .filter(|v| !v.is_empty());
    match (socket, address) {
        (Some(_), Some(_)) => s.problems.push(format!(
            "Both {SOCKET_VAR} and {ADDRESS_VAR} are set; a container gets exactly one broker route, so neither is used."
        )),
        (Some(path), None) if !path.starts_with('/') => s.problems.push(format!(
            "{SOCKET_VAR}={path:?} is not an absolute path; the broker socket route is not used."
        )),
        (Some(path), None) if path.split('/').any(|seg| seg == "..") => s.problems.push(format!(
            "{SOCKET_VAR}={path:?} contains '..'; the broker socket route is not used."
        )),
        (Some(path), None) => s.route = Some(BrokerRoute::new(RouteKind::Socket, path)),
        (None, Some(addr)) if !valid_address(addr) => s.problems.push(format!(
            "{ADDRESS_VAR}={addr:?} is not HOST:PORT; the broker address route is not used."
        )),
        (None, Some(addr)) => s.route = Some(BrokerRoute::new(RouteKind::Tcp, addr)),
        (None, None) => {}
    }
    if !s.brokered_providers.is_empty()
        && s.route.is_none()
        && socket.is_none()
        && address.is_none()
    {
        s.problems.push(format!(
            "{PROVIDERS_VAR} names providers but no broker route ({SOCKET_VAR} or {ADDRESS_VAR}) is set, so their calls are not brokered."
        ));
    }
    if s.route.is_some() && s.brokered_providers.is_empty() && get(env, PROVIDERS_VAR).is_none() {
        s.problems.push(format!(
            "A broker route is set but {PROVIDERS_VAR} is not, so no provider is brokered."
        ));
    }
    s.guarded_paths = guarded_paths(env);
    s.clone = get(env, WORKSPACE_MODE_VAR).map(str::trim) == Some("clone");
    egress(env, &mut s);
    s.git_hosts = crate::broker::git::hosts_in(env);
    s.registries = crate::broker::registry::names_in(env);
    s.network = network(env, &mut s.problems);
    // Half-right variables re-point nothing: a person fixes them first (`/po-sandbox` says how).
    s.brokered = s.route.is_some() && !s.brokered_providers.is_empty() && s.problems.is_empty();
    s
}

/// The egress socket and the proxy the session set for it.
fn egress(env: &HashMap<String, String>, s: &mut SandboxState) {
    match get(env, EGRESS_PROXY_VAR).map(str::trim) {
        None | Some("") => {}
        Some(url) if url.starts_with("http://") => s.egress_proxy_route = Some(url.to_string()),
        Some(_) => s.problems.push(format!(
            "{EGRESS_PROXY_VAR} is not an http:// proxy URL; the egress proxy is not used."
        )),
    }
    match get(env, EGRESS_SOCKET_VAR).map(str::trim) {
        None | Some("") if s.egress_proxy_route.is_none() => return,
        None | Some("") => {}
        Some(path) if !path.starts_with('/') || path.split('/').any(|seg| seg == "..") => {
            s.problems.push(format!(
                "{EGRESS_SOCKET_VAR}={path:?} is not an absolute path without '..'; the egress proxy is not used."
            ));
            return;
        }
        Some(path) => s.egress_socket = Some(path.to_string()),
    }
    s.egress_proxy = get(env, PROXY_VARS[0])
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string);
}

/// What the report and the help skill say of the registry routes.
pub fn registries_line(s: &SandboxState) -> Option<String> {
    (!s.registries.is_empty()).then(|| format!(
        "Package registries through the host's broker, with the person's credential (this container holds only a placeholder): {}. npm and pip are configured for them already (npm's user config, PIP_INDEX_URL); they only read (install), publishing goes from the host.",
        s.registries.join(", ")
    ))
}

/// What the report and the help skill say of the git route.
pub fn git_line(s: &SandboxState) -> Option<String> {
    (!s.git_hosts.is_empty()).then(|| format!(
        "Git over HTTPS to {} (HTTPS and SSH-form remotes alike) goes through the host's broker, which adds the person's credential: this container holds only a placeholder. Pushes may create branches in the workspace's own remotes and move forward the branches this sandbox created; the default branch, tags, force updates, deletions and other repositories only where the person's policy allows (a refused push says why, and what the person can allow).",
        s.git_hosts.join(", ")
    ))
}

/// A proxy URL without its credentials (`http://po:…@host:port` → `http://host:port`).
pub fn without_credentials(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((_, host)) => format!("{scheme}://{host}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// The report's egress line.
fn egress_line(s: &SandboxState) -> Option<String> {
    let via = match (&s.egress_socket, &s.egress_proxy_route) {
        (Some(socket), _) => format!("bridged to {socket}"),
        (None, Some(route)) => format!("the host's egress port {}", without_credentials(route)),
        (None, None) => return None,
    };
    Some(match &s.egress_proxy {
        Some(proxy) => format!(
            "Egress proxy: on, at {} (HTTPS_PROXY/HTTP_PROXY; {via}): only the hosts and ports the host's networkAllow lists are reachable.",
            without_credentials(proxy)
        ),
        None => format!(
            "Egress proxy: on ({via}), but this session has not set it (HTTPS_PROXY is not set): start a new session."
        ),
    })
}

/// What the person can check on the host of this session's writes that the host may run.
pub const REVIEW_LINE: &str = "Writable here though the host may run them (package.json scripts, Makefiles, cargo, npm and yarn configuration, tool versions, workflows, AGENTS.md/CLAUDE.md, nested repositories): the person can list what this session changed in them with `po-sandbox review <folder>` on the host.";

/// What the person does with the work of a session on a copy (clone mode).
pub const CLONE_LINE: &str = "This workspace is a copy of the host folder in a volume of its own (clone mode): nothing written here reaches the host until the person takes it. On the host they see this session's commits and uncommitted changes with `po-sandbox diff <folder>` and take them as a branch with `po-sandbox apply <folder>` (uncommitted work comes as a commit marked `Po-Sandbox: uncommitted work`, or a patch with --patch); a folder without git's changed files they write into the folder with `po-sandbox apply <folder> --yes` (files the host may run only with --include-executable). Commit what is ready.";

/// The text `/po-sandbox` shows.
pub fn report(s: &SandboxState) -> String {
    let mut out = String::new();
    if s.contained {
        match &s.workspace {
            Some(w) => out.push_str(&format!(
                "This session runs inside a sandbox container, for workspace \"{w}\"."
            )),
            None => out.push_str("This session runs inside a sandbox container."),
        }
    } else {
        out.push_str("This session runs directly on the host, not in a sandbox container.");
    }
    out.push('\n');
    if s.brokered {
        let route = match s.route.as_ref() {
            Some(BrokerRoute {
                kind: RouteKind::Socket,
                target,
            }) => format!("the broker socket {target} (through a loopback bridge)"),
            Some(BrokerRoute {
                kind: RouteKind::Tcp,
                target,
            }) => format!("the broker at {target}"),
            None => unreachable!(),
        };
        out.push_str(&format!(
            "Brokered providers: {}, via {route}. Their keys stay on the host.",
            s.brokered_providers.join(", ")
        ));
    } else {
        out.push_str("No providers are brokered: model calls use this session's own credentials.");
    }
    if s.contained {
        if s.clone {
            out.push_str(&format!("\n{CLONE_LINE}"));
        } else if s.guarded_paths.is_empty() {
            out.push_str(
                "\nNo workspace paths are guarded: everything in the workspace is writable here.",
            );
        } else {
            out.push_str(&format!(
                "\nRead-only here, because the host runs them later: {}.",
                s.guarded_paths.join(", ")
            ));
        }
        if !s.clone {
            out.push_str(&format!("\n{REVIEW_LINE}"));
        }
        if let Some(mode) = &s.network {
            out.push_str(&format!("\nNetwork: {mode} ({}).", network_words(mode)));
        }
    }
    for line in [egress_line(s), git_line(s), registries_line(s)]
        .into_iter()
        .flatten()
    {
        out.push('\n');
        out.push_str(&line);
    }
    if !s.problems.is_empty() {
        out.push_str("\nProblems:");
        for p in &s.problems {
            out.push_str("\n- ");
            out.push_str(p);
        }
    }
    out
}

/// [`report`], with a line per port forwarded to the host now when contained (the relays in
/// this container's process table, `/proc/<pid>/cmdline`).
pub fn report_now(s: &SandboxState) -> String {
    let mut out = report(s);
    if s.contained {
        out.push_str(&forwards_lines(&forwarded_ports(Path::new("/proc"))));
    }
    out
}

/// The ports relays forward from this container: `(port, host_port)` of every process whose
/// command line is a relay's, in `proc` (a `/proc`), sorted.
pub fn forwarded_ports(proc: &Path) -> Vec<(u16, u16)> {
    let Ok(entries) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    let mut found: Vec<(u16, u16)> = entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter_map(|cmdline| {
            let text = String::from_utf8_lossy(&cmdline).into_owned();
            crate::relay::parse_agent_args(&text.split('\0').collect::<Vec<_>>())
        })
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

/// The report's lines for forwarded ports (empty when there are none).
pub fn forwards_lines(ports: &[(u16, u16)]) -> String {
    ports
        .iter()
        .map(|(port, host)| {
            format!("\nPort {port} is forwarded to the host's 127.0.0.1:{host} (po-sandbox port).")
        })
        .collect()
}

#[cfg(test)]
mod tests;
