//! Extra engine options for every container (`runFlags`, `PO_SANDBOX_RUN_FLAGS`): a pure
//! parser from `docker run`-style flags to [`RunFlags`], which the engine body maps onto the
//! Engine API's `HostConfig`. Only self-contained flags (`--flag=value`) that add a resource
//! bound, pick a runtime or only tighten are accepted; anything that would weaken the
//! container's containment or take over a part of the spec is refused with
//! `RUN_FLAGS_INVALID`, naming the flag and why, before anything is made.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::names::paths;
pub(crate) use crate::names::vars::RUN_FLAGS_VAR;

mod values;
pub use values::{BadValue, bytes, check_tmpfs_against, nano_cpus};
use values::{
    dns_option, dns_search, gpus, label, pids_limit, runtime_name, security_opt, tmpfs, ulimit,
    whole,
};

/// Where every container mounts something of its own (besides the workspace and P, which
/// [`check_tmpfs_against`] checks per container): a tmpfs may not be at, over or under them.
pub const FIXED_TARGETS: [&str; 6] = [
    paths::HOME_DIR,
    paths::RUNTIME_DIR,
    paths::GIT_DIR,
    crate::runtime_bundle::MOUNT_POINT,
    "/run/po-sandbox",
    paths::BROKER_MOUNT,
];

/// Every flag the layer accepts, for messages.
pub const ACCEPTED: &str = "--runtime, --memory (-m), --memory-swap, --cpus, --cpu-shares (-c), \
--pids-limit, --shm-size, --ulimit, --gpus, --dns, --dns-search, --dns-option, --tmpfs, \
--label (-l), --security-opt";

/// One `--ulimit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ulimit {
    pub name: String,
    /// `-1`: unlimited.
    pub soft: i64,
    /// `-1`: unlimited.
    pub hard: i64,
}

/// `--gpus`: all, a count, or device ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gpus {
    All,
    Count(i64),
    Devices(Vec<String>),
}

/// The accepted flags, checked and decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFlags {
    /// The flags in their long form (`--memory=512m`), in the order given: hashed into the
    /// spec and shown by the doctor and `ls`.
    pub given: Vec<String>,
    /// `HostConfig.Runtime`.
    pub runtime: Option<String>,
    /// `HostConfig.Memory`, bytes.
    pub memory: Option<i64>,
    /// `HostConfig.MemorySwap`, bytes (`-1`: unlimited swap).
    pub memory_swap: Option<i64>,
    /// `HostConfig.NanoCpus`.
    pub nano_cpus: Option<i64>,
    /// `HostConfig.CpuShares`.
    pub cpu_shares: Option<i64>,
    /// A pid limit at most the layer's.
    pub pids_limit: Option<i64>,
    /// `HostConfig.ShmSize`, bytes.
    pub shm_size: Option<i64>,
    /// `HostConfig.Ulimits`.
    pub ulimits: Vec<Ulimit>,
    /// `HostConfig.DeviceRequests` (one, for GPUs).
    pub gpus: Option<Gpus>,
    /// `HostConfig.Dns`.
    pub dns: Vec<String>,
    /// `HostConfig.DnsSearch`.
    pub dns_search: Vec<String>,
    /// `HostConfig.DnsOptions`.
    pub dns_options: Vec<String>,
    /// `HostConfig.Tmpfs`: container path → mount options.
    pub tmpfs: BTreeMap<String, String>,
    /// Labels added to the container (never `po.*`).
    pub labels: BTreeMap<String, String>,
    /// Security options added to the layer's (only ones that tighten).
    pub security_opt: Vec<String>,
}

fn refused(flag: &str, reason: impl Into<String>) -> Error {
    Error::RunFlagsInvalid {
        flag: flag.into(),
        reason: reason.into(),
    }
}

/// `runFlags` (the complete list), else `PO_SANDBOX_RUN_FLAGS` split on whitespace, else none.
/// `pids_limit` is the layer's own limit, which `--pids-limit` may only lower.
pub fn resolve(option: Option<&[String]>, var: Option<&str>, pids_limit: i64) -> Result<RunFlags> {
    match (option, var) {
        (Some(list), _) => parse(list, pids_limit),
        (None, Some(value)) => {
            let list: Vec<String> = value.split_whitespace().map(str::to_string).collect();
            parse(&list, pids_limit)
        }
        (None, None) => Ok(RunFlags::default()),
    }
}

/// Checks and decodes a list of flags; the first bad one is the error.
pub fn parse(list: &[String], pids_limit: i64) -> Result<RunFlags> {
    let mut flags = RunFlags::default();
    for item in list {
        let (name, value) = split(item)?;
        let value = match value {
            Some(v) if v.is_empty() => {
                return Err(refused(
                    item,
                    format!("its value is empty; write --{name}=<value>"),
                ));
            }
            Some(v) => v,
            None => {
                return Err(refused(
                    item,
                    format!(
                        "it needs its value attached, as --{name}=<value>: a separated value \
                         (--{name} <value>) is refused because a bare word cannot be told from \
                         an image name"
                    ),
                ));
            }
        };
        apply(&mut flags, item, &name, &value, pids_limit)?;
        flags.given.push(format!("--{name}={value}"));
    }
    check_swap(&flags)?;
    Ok(flags)
}

/// Dashes other than `-` that a flag copied from a document may start with.
fn unicode_dash(c: char) -> bool {
    matches!(
        c,
        '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{FE58}' | '\u{FE63}' | '\u{FF0D}' | '\u{00AD}'
    )
}

/// Splits one item into its long flag name and its attached value (`None`: no `=`).
fn split(item: &str) -> Result<(String, Option<String>)> {
    if item.is_empty() {
        return Err(refused(item, "it is empty"));
    }
    if let Some(c) = item.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(refused(
            item,
            format!("it contains whitespace or a control character ({c:?}); one flag per item"),
        ));
    }
    if let Some(c) = item.chars().next().filter(|c| unicode_dash(*c)) {
        return Err(refused(
            item,
            format!(
                "it starts with the Unicode dash U+{:04X}, not an ASCII '-'; type the flag with \
                 ASCII hyphens",
                c as u32
            ),
        ));
    }
    if item == "--" {
        return Err(refused(
            item,
            "'--' ends the options; nothing may follow the flags",
        ));
    }
    if let Some(long) = item.strip_prefix("--") {
        let (name, value) = match long.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (long, None),
        };
        return Ok((checked_name(item, name)?, value));
    }
    if let Some(short) = item.strip_prefix('-').filter(|s| !s.is_empty()) {
        return short_flag(item, short);
    }
    Err(refused(
        item,
        "it is not a flag: run flags are self-contained (--flag or --flag=value); a separated \
         value (--runtime runsc) is refused because a bare word cannot be told from an image name",
    ))
}

/// `-m512m`, `-m=512m`, `-l key=value`… as their long names.
fn short_flag(item: &str, short: &str) -> Result<(String, Option<String>)> {
    let mut chars = short.chars();
    let letter = chars.next().unwrap_or_default();
    let rest = chars.as_str();
    let long = match letter {
        'm' => "memory",
        'c' => "cpu-shares",
        'l' => "label",
        'e' => "env",
        'u' => "user",
        'v' => "volume",
        'p' => "publish",
        'P' => "publish-all",
        'w' => "workdir",
        _ => {
            return Err(refused(
                item,
                format!("-{letter} is not a flag the layer maps; accepted: {ACCEPTED}"),
            ));
        }
    };
    if let Some(reason) = refusal(long) {
        return Err(refused(item, format!("-{letter} (--{long}) {reason}")));
    }
    let value = match rest {
        "" => None,
        r => Some(r.strip_prefix('=').unwrap_or(r).to_string()),
    };
    Ok((long.to_string(), value))
}

/// A long name: lower-case ASCII letters, digits and inner hyphens; a refused one names why.
fn checked_name(item: &str, name: &str) -> Result<String> {
    let lower = name.to_ascii_lowercase();
    let well_formed = !lower.is_empty()
        && lower.starts_with(|c: char| c.is_ascii_lowercase())
        && !lower.ends_with('-')
        && lower
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !well_formed {
        return Err(refused(
            item,
            "it is not a well-formed flag (--name or --name=value, the name in ASCII letters, \
             digits and hyphens)",
        ));
    }
    if let Some(reason) = refusal(&lower) {
        return Err(refused(item, format!("--{lower} {reason}")));
    }
    if lower != name {
        return Err(refused(
            item,
            format!("flag names are lower-case: write --{lower}"),
        ));
    }
    if !is_accepted(&lower) {
        return Err(refused(
            item,
            format!("--{lower} is not a flag the layer maps onto the engine; accepted: {ACCEPTED}"),
        ));
    }
    Ok(lower)
}

fn is_accepted(name: &str) -> bool {
    matches!(
        name,
        "runtime"
            | "memory"
            | "memory-swap"
            | "cpus"
            | "cpu-shares"
            | "pids-limit"
            | "shm-size"
            | "ulimit"
            | "gpus"
            | "dns"
            | "dns-search"
            | "dns-option"
            | "dns-opt"
            | "tmpfs"
            | "label"
            | "security-opt"
    )
}

/// Why a flag is refused in any form (with any value, `=false` included), or `None`.
fn refusal(name: &str) -> Option<&'static str> {
    Some(match name {
        "privileged" => {
            "would give the container every capability and the host's devices; it is refused in \
             any form (=false too): the layer owns privileges"
        }
        "cap-add" => "would add capabilities; the layer drops all of them",
        "cap-drop" => "changes nothing: every capability is already dropped",
        n if n.starts_with("device") => "would give the container host devices",
        "pid" | "ipc" | "uts" | "userns" | "cgroupns" => {
            "would choose a namespace of the container (=host shares the host's); the layer \
             owns the namespaces"
        }
        "network" | "net" | "network-alias" | "net-alias" => {
            "would change the container's network; the provider owns the network"
        }
        "user" | "group-add" => {
            "would change who the container runs as; the `user` option owns that (uid:gid)"
        }
        "volume" | "mount" | "volumes-from" => {
            "would mount host paths or volumes; the spec owns every mount (workspaces, \
             guardedPaths)"
        }
        "env" | "env-file" => {
            "would set environment variables; the spec owns the environment (the allowlist and \
             the broker's)"
        }
        "publish" | "publish-all" | "expose" => {
            "would publish ports; the layer publishes exactly one, on 127.0.0.1"
        }
        "add-host" => "would add host entries; the layer owns them",
        "cgroup-parent" => "would move the container out of the engine's cgroup and its limits",
        "workdir" | "entrypoint" | "name" | "hostname" | "restart" | "init" | "rm" => {
            "would change the container the spec describes; the layer owns it"
        }
        _ => return None,
    })
}

/// Decodes one accepted flag's value into `flags`.
fn apply(flags: &mut RunFlags, item: &str, name: &str, value: &str, pids: i64) -> Result<()> {
    let bad = |why: BadValue| refused(item, why.to_string());
    let once = |set: bool| {
        if set {
            Err(refused(item, format!("--{name} is given more than once")))
        } else {
            Ok(())
        }
    };
    match name {
        "runtime" => {
            once(flags.runtime.is_some())?;
            flags.runtime = Some(runtime_name(value).map_err(bad)?);
        }
        "memory" => {
            once(flags.memory.is_some())?;
            let bytes = bytes(value).map_err(bad)?;
            if bytes < 6 << 20 {
                return Err(refused(item, "the engine's minimum memory limit is 6m"));
            }
            flags.memory = Some(bytes);
        }
        "memory-swap" => {
            once(flags.memory_swap.is_some())?;
            flags.memory_swap = Some(if value == "-1" {
                -1
            } else {
                bytes(value).map_err(bad)?
            });
        }
        "cpus" => {
            once(flags.nano_cpus.is_some())?;
            flags.nano_cpus = Some(nano_cpus(value).map_err(bad)?);
        }
        "cpu-shares" => {
            once(flags.cpu_shares.is_some())?;
            flags.cpu_shares = Some(whole(value, 2, 262_144).map_err(bad)?);
        }
        "pids-limit" => {
            once(flags.pids_limit.is_some())?;
            flags.pids_limit = Some(pids_limit(value, pids).map_err(bad)?);
        }
        "shm-size" => {
            once(flags.shm_size.is_some())?;
            flags.shm_size = Some(bytes(value).map_err(bad)?);
        }
        _ => return apply_list(flags, item, name, value),
    }
    Ok(())
}

/// The repeatable flags (and `--gpus`).
fn apply_list(flags: &mut RunFlags, item: &str, name: &str, value: &str) -> Result<()> {
    let bad = |why: BadValue| refused(item, why.to_string());
    match name {
        "ulimit" => {
            let u = ulimit(value).map_err(bad)?;
            if flags.ulimits.iter().any(|o| o.name == u.name) {
                return Err(refused(item, format!("ulimit {} is given twice", u.name)));
            }
            flags.ulimits.push(u);
        }
        "gpus" => {
            if flags.gpus.is_some() {
                return Err(refused(item, "--gpus is given more than once"));
            }
            flags.gpus = Some(gpus(value).map_err(bad)?);
        }
        "dns" => {
            let ip: std::net::IpAddr = value
                .parse()
                .map_err(|_| refused(item, format!("{value:?} is not an IP address")))?;
            flags.dns.push(ip.to_string());
        }
        "dns-search" => flags.dns_search.push(dns_search(value).map_err(bad)?),
        "dns-option" | "dns-opt" => flags.dns_options.push(dns_option(value).map_err(bad)?),
        "tmpfs" => {
            let (path, options) = tmpfs(value).map_err(bad)?;
            if flags.tmpfs.contains_key(&path) {
                return Err(refused(item, format!("a tmpfs at {path} is given twice")));
            }
            flags.tmpfs.insert(path, options);
        }
        "label" => {
            let (key, v) = label(value).map_err(bad)?;
            if flags.labels.contains_key(&key) {
                return Err(refused(item, format!("label {key:?} is given twice")));
            }
            flags.labels.insert(key, v);
        }
        "security-opt" => {
            if let Some(opt) = security_opt(value).map_err(bad)? {
                flags.security_opt.push(opt);
            }
        }
        other => unreachable!("--{other} is accepted but not decoded"),
    }
    Ok(())
}

/// Podman's Docker API ignores `HostConfig.Runtime`: a `--runtime` flag would silently not
/// apply there, so on Podman it is refused (Podman's runtime is set in its `containers.conf`).
pub fn refuse_on_podman(flags: &RunFlags) -> Result<()> {
    match &flags.runtime {
        Some(r) => Err(refused(
            &format!("--runtime={r}"),
            format!(
                "the engine is Podman, whose Docker API ignores the runtime a container asks \
                 for, so it would not run on {r}; set Podman's runtime in containers.conf \
                 ([engine] runtime = \"{r}\") and drop this flag"
            ),
        )),
        None => Ok(()),
    }
}

/// `--memory-swap` needs `--memory`, and is at least as large (or `-1`).
fn check_swap(flags: &RunFlags) -> Result<()> {
    let Some(swap) = flags.memory_swap else {
        return Ok(());
    };
    let item = flags
        .given
        .iter()
        .find(|g| g.starts_with("--memory-swap="))
        .cloned()
        .unwrap_or_default();
    match flags.memory {
        None => Err(refused(&item, "--memory-swap needs --memory as well")),
        Some(m) if swap != -1 && swap < m => Err(refused(
            &item,
            "--memory-swap (memory plus swap) must be at least --memory, or -1",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
