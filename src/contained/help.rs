//! The help skill of a contained session: a pi skill (`SKILL.md`) that tells the agent what its
//! sandbox is — what is mounted where, which providers are brokered, the network, and what it
//! cannot do — from the same environment `/po-sandbox` reports. On the host there is none.

use std::collections::HashMap;

use super::identity::{BrokerRoute, CLONE_LINE, REVIEW_LINE, RouteKind, SandboxState};
use crate::names::paths::{BROKER_MOUNT, GIT_DIR, HOME_DIR, RUNTIME_DIR, TOKEN_PATH};
use crate::runtime_bundle::MOUNT_POINT as BUNDLE_DIR;
use crate::sandbox::blueprint::SEED_FILES;

/// The skill's name: pi offers it as `/skill:po-sandbox`.
pub const SKILL_NAME: &str = "po-sandbox";

/// What the skill reads beyond the sandbox state: the container's own paths, as its
/// environment names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelpFacts {
    /// P, the workspace's Po folder (`PO_HOME`).
    pub po_home: Option<String>,
    /// The home folder (`HOME`).
    pub home: Option<String>,
    /// The container's own token file (`PO_SANDBOX_TOKEN_FILE`).
    pub token_file: Option<String>,
}

/// Reads the facts from an environment.
pub fn read_facts(env: &HashMap<String, String>) -> HelpFacts {
    let get = |name: &str| {
        env.get(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    HelpFacts {
        po_home: get("PO_HOME"),
        home: get("HOME"),
        token_file: get("PO_SANDBOX_TOKEN_FILE"),
    }
}

const DESCRIPTION: &str = "What this Po sandbox container is and what it allows. Where the workspace, the home folder and Po's folders are mounted, which paths are read-only, which model providers are brokered, the network, and what cannot be done here (no container engine, no host paths beyond the mounts, no OAuth /login). Read it before installing tools, using paths outside the workspace, changing git hooks or config, starting containers, or logging in to a model provider.";

/// The skill's `SKILL.md`, or `None` when the session is not contained. `cwd` is the session's
/// working directory (the workspace, or a folder in it).
pub fn skill(s: &SandboxState, facts: &HelpFacts, cwd: Option<&str>) -> Option<String> {
    if !s.contained {
        return None;
    }
    let mut md = format!("---\nname: {SKILL_NAME}\ndescription: {DESCRIPTION}\n---\n\n");
    md.push_str("# This session runs in a Po sandbox container\n\n");
    md.push_str(&match &s.workspace {
        Some(w) => format!("It serves the workspace \"{w}\"."),
        None => "The container did not name its workspace (`PO_WORKSPACE` is not set).".into(),
    });
    md.push_str(
        " Everything below is what `/po-sandbox` reports, from this container's environment.\n\n",
    );
    mounts(&mut md, s, facts, cwd);
    providers(&mut md, s);
    network(&mut md, s);
    git(&mut md, s);
    limits(&mut md);
    if !s.problems.is_empty() {
        md.push_str("\n## Problems with this container's variables\n\n");
        for p in &s.problems {
            md.push_str(&format!("- {p}\n"));
        }
    }
    Some(md)
}

fn mounts(md: &mut String, s: &SandboxState, facts: &HelpFacts, cwd: Option<&str>) {
    md.push_str("## What is mounted where\n\n");
    md.push_str(if s.clone {
        "- The workspace folder, read-write, at the same path as on the host: a copy, not the host's folder"
    } else {
        "- The workspace folder, read-write, at the same path as on the host"
    });
    match cwd {
        Some(cwd) => md.push_str(&format!(" (this session works in `{cwd}`).\n")),
        None => md.push_str(".\n"),
    }
    let home = facts.home.as_deref().unwrap_or(HOME_DIR);
    md.push_str(&format!(
        "- `{home}` (`HOME`): this container's home, a volume of its own; it outlives the container, and it is not the host's home.\n"
    ));
    match &facts.po_home {
        Some(p) => md.push_str(&format!(
            "- `{p}` (`PO_HOME`): this workspace's Po folder on the host's disk, read-write (conversations, artifacts). Its {} are the host's, read-only.\n",
            SEED_FILES.join(", ")
        )),
        None => md.push_str("- `PO_HOME` is not set: this container has no Po folder.\n"),
    }
    md.push_str(&format!(
        "- `{BUNDLE_DIR}`: the Po runtime bundle that runs this container's server, read-only.\n- `{RUNTIME_DIR}`: package caches (npm, corepack, `XDG_CACHE_HOME`), and `{GIT_DIR}`: room for git worktrees; both volumes of this workspace.\n"
    ));
    let token = facts.token_file.as_deref().unwrap_or(TOKEN_PATH);
    md.push_str(&format!(
        "- `{token}` (`PO_SANDBOX_TOKEN_FILE`): this container's own token, read-only.\n"
    ));
    if s.route
        .as_ref()
        .is_some_and(|r| r.kind == RouteKind::Socket)
    {
        md.push_str(&format!(
            "- `{BROKER_MOUNT}`: the credential broker's socket folder.\n"
        ));
    }
    if s.clone {
        md.push_str(&format!("- {CLONE_LINE}\n"));
        return;
    }
    if s.guarded_paths.is_empty() {
        md.push_str(
            "- No workspace paths are guarded: everything in the workspace is writable here.\n",
        );
    } else {
        md.push_str("- Read-only here, because the host runs them later (git hooks and config, editor tasks, direnv): ");
        let quoted: Vec<String> = s.guarded_paths.iter().map(|p| format!("`{p}`")).collect();
        md.push_str(&quoted.join(", "));
        md.push_str(". Writing them fails (read-only file system); git works, but `git config` writes fail. Ask the user to change them on the host.\n");
    }
    md.push_str(&format!("- {REVIEW_LINE}\n"));
}

fn providers(md: &mut String, s: &SandboxState) {
    md.push_str("\n## Model providers\n\n");
    if !s.brokered {
        md.push_str("No providers are brokered: model calls use this session's own credentials.\n");
        return;
    }
    let route = match s.route.as_ref() {
        Some(BrokerRoute {
            kind: RouteKind::Socket,
            target,
        }) => format!("the broker socket `{target}`, through a loopback bridge in this session"),
        Some(BrokerRoute { target, .. }) => format!("the broker at `{target}`"),
        None => String::new(),
    };
    md.push_str(&format!(
        "Brokered: {}, via {route}. Their key variables hold per-session tokens, not keys: the host's credential broker adds the real key to each request, so the keys never enter this container. A token is useless outside this session; do not print or copy it.\n",
        s.brokered_providers
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
}

fn network(md: &mut String, s: &SandboxState) {
    md.push_str("\n## Network\n\n");
    md.push_str("This container shares a network namespace held by a small companion container on its hub's own bridge network, with firewall rules loaded before this container started; it has no capability to change them. Connections to other workspaces' containers, to the host (the bridge gateway and the host's own addresses), to link-local addresses (cloud metadata, 169.254.0.0/16, fe80::/10) and to private ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) are refused at once, in every mode.");
    match s.network.as_deref() {
        Some("open") => md.push_str(" Mode `open`: the public internet is reachable."),
        Some("none") => md.push_str(" Mode `none`: nothing else is reachable, no DNS either; only loopback and the broker route work."),
        Some(m) => md.push_str(&format!(" Mode `{m}`: at packet level nothing else is reachable; only listed hosts, through a proxy on the broker route.")),
        None => {}
    }
    md.push_str(" Only the server's one port is published, on the host's 127.0.0.1; nothing else listening in here is published.");
    if s.route.as_ref().is_some_and(|r| r.kind == RouteKind::Tcp) {
        md.push_str(
            " The broker is reached over TCP (a VM engine): `host.docker.internal` is the host.",
        );
    }
    let egress = s.egress_socket.clone().or_else(|| {
        s.egress_proxy_route
            .as_deref()
            .map(crate::contained::identity::without_credentials)
    });
    if let Some(socket) = &egress {
        md.push_str(&format!(
            "\n\nOutbound connections go through the host's egress proxy (`{socket}`), which lets through only the hosts and ports the host lists (`networkAllow`); anything else is answered `403 egress denied: <host>:<port> is not in networkAllow …`, naming the command with which the person allows it on the host (`po-sandbox allow <host>:<port>`): ask the person, do not work around a denial. "
        ));
        match &s.egress_proxy {
            Some(proxy) => md.push_str(&format!(
                "This session's tools reach it at `{}` through `HTTPS_PROXY`/`HTTP_PROXY` (npm, git, curl and pip honour them); `NO_PROXY` keeps loopback direct. Do not unset them, and ask the user to add a host on the host side rather than working around the proxy.\n",
                crate::contained::identity::without_credentials(proxy)
            )),
            None => md.push_str("This session has not bridged it (`HTTPS_PROXY` is not set): start a new session.\n"),
        }
        return;
    }
    md.push('\n');
}

fn git(md: &mut String, s: &SandboxState) {
    if let Some(line) = crate::contained::identity::registries_line(s) {
        md.push_str(&format!("\n## Package registries\n\n{line} Do not replace the registry settings or add a token; when an install is refused, ask the person.\n"));
    }
    if let Some(line) = crate::contained::identity::git_line(s) {
        md.push_str(&format!("\n## Git\n\n{line} Use the remotes as they are (do not rewrite them, add credentials or set `GIT_CONFIG_*`); when a push is refused, ask the person rather than working around it.\n"));
    }
}

fn limits(md: &mut String) {
    md.push_str("\n## What cannot be done here\n\n");
    md.push_str("- No container engine: no Docker or Podman socket is mounted, and sandboxes do not nest. Do not try to start containers.\n");
    md.push_str("- No host paths beyond the mounts above: the host's home, its other projects and the rest of its `~/.po` are not here. A path outside them is this image's own file system, not the host's.\n");
    md.push_str("- No OAuth `/login`: subscription logins are not brokered, and keys stay on the host. For a provider that is not brokered, ask the user to grant it on the host rather than pasting a key here.\n");
    md.push_str("- No privileges: every capability is dropped, with no-new-privileges and a process limit, so `sudo` and system package installs (`apt-get`) are not the way here; install tools per project (npm, corepack) into the workspace or the home folder.\n");
}

#[cfg(test)]
mod tests;
