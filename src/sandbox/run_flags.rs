//! Extra engine options for every container (`runFlags`, `PO_SANDBOX_RUN_FLAGS`): a pure
//! parser from `docker run`-style flags to [`RunFlags`], which the engine body maps onto the
//! Engine API's `HostConfig`. Only self-contained flags (`--flag=value`) that add a resource
//! bound, pick a runtime or only tighten are accepted; anything that would weaken the
//! container's containment or take over a part of the spec is refused with
//! `RUN_FLAGS_INVALID`, naming the flag and why, before anything is made.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// The host variable: a whitespace-separated list of flags (the `runFlags` option wins).
pub const RUN_FLAGS_VAR: &str = "PO_SANDBOX_RUN_FLAGS";

/// Where every container mounts something of its own (besides the workspace and P, which
/// [`check_tmpfs_against`] checks per container): a tmpfs may not be at, over or under them.
pub const FIXED_TARGETS: [&str; 6] = [
    crate::sandbox::spec::HOME_DIR,
    crate::sandbox::spec::RUNTIME_DIR,
    crate::sandbox::spec::GIT_DIR,
    crate::runtime_bundle::MOUNT_POINT,
    "/run/po-sandbox",
    crate::sandbox::service::BROKER_MOUNT,
];

/// Kernel file systems a tmpfs may not cover.
const SYSTEM_TARGETS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Resource limits (`--ulimit`) the engine knows and the layer accepts.
const ULIMITS: [&str; 13] = [
    "as",
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nofile",
    "nproc",
    "rss",
    "sigpending",
    "stack",
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
    let bad = |why: String| refused(item, why);
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
    let bad = |why: String| refused(item, why);
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

fn runtime_name(value: &str) -> std::result::Result<String, String> {
    let ok = value.len() <= 128
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(value.to_string())
    } else {
        Err(format!(
            "{value:?} is not a runtime name (letters, digits, '.', '_', '-', as registered in \
             the engine's runtimes)"
        ))
    }
}

/// A size as the engine reads it: a number (decimals allowed) and an optional unit b, k, m,
/// g, t (powers of 1024; `kb`, `KiB` and the like too).
pub fn bytes(value: &str) -> std::result::Result<i64, String> {
    let bad = || format!("{value:?} is not a size (a number and an optional unit b, k, m, g, t)");
    let split = value
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad()),
    };
    let (whole_part, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits_ok = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if whole_part.is_empty() || !digits_ok(whole_part) || !digits_ok(fraction) {
        return Err(bad());
    }
    if number.ends_with('.') || fraction.len() > 9 || whole_part.len() > 18 {
        return Err(bad());
    }
    let scale = 10u128.pow(fraction.len() as u32);
    let n: u128 = format!("{whole_part}{fraction}")
        .parse()
        .map_err(|_| bad())?;
    let b = (n << shift) / scale;
    match i64::try_from(b) {
        Ok(b) if b > 0 => Ok(b),
        Ok(_) => Err(format!("{value:?} is zero")),
        Err(_) => Err(format!("{value:?} is too large")),
    }
}

/// `--cpus`: a decimal number of CPUs, more than 0 and at most 1024, in billionths.
pub fn nano_cpus(value: &str) -> std::result::Result<i64, String> {
    let bad = || format!("{value:?} is not a number of CPUs (like 1.5), from 0.01 to 1024");
    let (whole_part, fraction) = value.split_once('.').unwrap_or((value, ""));
    let digits_ok = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if whole_part.is_empty() || whole_part.len() > 4 || fraction.len() > 9 {
        return Err(bad());
    }
    if !digits_ok(whole_part) || !digits_ok(fraction) || value.ends_with('.') {
        return Err(bad());
    }
    let nanos: i64 = format!("{whole_part}{fraction:0<9}")
        .parse()
        .map_err(|_| bad())?;
    if (10_000_000..=1024 * 1_000_000_000).contains(&nanos) {
        Ok(nanos)
    } else {
        Err(bad())
    }
}

/// A whole number in `min..=max`, digits only.
fn whole(value: &str, min: i64, max: i64) -> std::result::Result<i64, String> {
    let n = value
        .parse::<i64>()
        .ok()
        .filter(|_| value.chars().all(|c| c.is_ascii_digit()));
    match n {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{value:?} is not a whole number from {min} to {max}"
        )),
    }
}

fn pids_limit(value: &str, ours: i64) -> std::result::Result<i64, String> {
    if value.starts_with('-') || value == "0" {
        return Err(format!(
            "{value} would lift the pid limit; only a limit up to the layer's ({ours}) is \
             accepted"
        ));
    }
    let n = value
        .parse::<i64>()
        .ok()
        .filter(|_| value.chars().all(|c| c.is_ascii_digit()))
        .ok_or_else(|| format!("{value:?} is not a whole number"))?;
    if n > ours {
        return Err(format!(
            "{n} is above the layer's pid limit {ours}; it may only lower it (raise pidsLimit \
             for more)"
        ));
    }
    Ok(n)
}

/// `name=soft[:hard]`; `-1` is unlimited.
fn ulimit(value: &str) -> std::result::Result<Ulimit, String> {
    let (name, limits) = value
        .split_once('=')
        .ok_or_else(|| format!("{value:?} is not name=soft[:hard]"))?;
    if matches!(name, "rtprio" | "rttime" | "nice") {
        return Err(format!(
            "ulimit {name} would let processes raise their scheduling priority over the host's"
        ));
    }
    if !ULIMITS.contains(&name) {
        return Err(format!(
            "{name:?} is not a resource limit the layer accepts ({})",
            ULIMITS.join(", ")
        ));
    }
    let number = |s: &str| {
        let digits = s.strip_prefix('-').unwrap_or(s);
        match s.parse::<i64>() {
            Ok(n)
                if n >= -1 && !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) =>
            {
                Ok(n)
            }
            _ => Err(format!(
                "{s:?} in {value:?} is not a whole number (or -1, unlimited)"
            )),
        }
    };
    let (soft, hard) = match limits.split_once(':') {
        Some((s, h)) => (number(s)?, number(h)?),
        None => (number(limits)?, number(limits)?),
    };
    let above = |a: i64, b: i64| b != -1 && (a == -1 || a > b);
    if above(soft, hard) {
        return Err(format!(
            "the soft limit of {value:?} is above its hard limit"
        ));
    }
    Ok(Ulimit {
        name: name.to_string(),
        soft,
        hard,
    })
}

/// `all`, a count, or `device=<id>[,<id>…]`.
fn gpus(value: &str) -> std::result::Result<Gpus, String> {
    if value == "all" {
        return Ok(Gpus::All);
    }
    if let Ok(n) = whole(value, 1, 1024) {
        return Ok(Gpus::Count(n));
    }
    if let Some(ids) = value.strip_prefix("device=") {
        let ids: Vec<String> = ids.split(',').map(str::to_string).collect();
        let ok = ids.iter().all(|id| {
            !id.is_empty()
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | ':' | '.'))
        });
        if ok {
            return Ok(Gpus::Devices(ids));
        }
    }
    Err(format!(
        "{value:?} is not all, a count, or device=<id>[,<id>...]"
    ))
}

fn dns_search(value: &str) -> std::result::Result<String, String> {
    let ok = value == "."
        || (value.len() <= 253
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
            && !value.starts_with(['.', '-']));
    if ok {
        Ok(value.to_string())
    } else {
        Err(format!("{value:?} is not a domain name"))
    }
}

fn dns_option(value: &str) -> std::result::Result<String, String> {
    let ok = value.len() <= 64
        && value.starts_with(|c: char| c.is_ascii_alphabetic())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '-' | '_' | '.'));
    if ok {
        Ok(value.to_string())
    } else {
        Err(format!(
            "{value:?} is not a resolver option (like ndots:2, timeout:3, rotate)"
        ))
    }
}

/// `/path[:options]`: an absolute, normal path not at, over or under the layer's own mounts or
/// the kernel's file systems; options among rw, ro, noexec, exec, nosuid, nodev, size=,
/// mode=, uid=, gid=, nr_inodes=.
fn tmpfs(value: &str) -> std::result::Result<(String, String), String> {
    let (path, options) = value.split_once(':').unwrap_or((value, ""));
    let normal = path.starts_with('/')
        && path.len() > 1
        && !path.ends_with('/')
        && path[1..]
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != ".." && !seg.contains(','));
    if !normal {
        return Err(format!(
            "{path:?} is not an absolute, normal container path other than /"
        ));
    }
    for target in FIXED_TARGETS.iter().chain(SYSTEM_TARGETS.iter()) {
        if let Some(how) = clash(path, target) {
            return Err(format!("a tmpfs at {path} would be {how} {target}"));
        }
    }
    for opt in options
        .split(',')
        .filter(|o| !o.is_empty() || options.is_empty())
    {
        tmpfs_option(opt)?;
    }
    Ok((path.to_string(), options.to_string()))
}

fn tmpfs_option(opt: &str) -> std::result::Result<(), String> {
    let (key, v) = opt.split_once('=').unwrap_or((opt, ""));
    let digits = !v.is_empty() && v.chars().all(|c| c.is_ascii_digit());
    let ok = match key {
        "" => true,
        "rw" | "ro" | "noexec" | "exec" | "nosuid" | "nodev" => v.is_empty() && opt == key,
        "size" => {
            let n = v
                .strip_suffix(['k', 'm', 'g', 'K', 'M', 'G', '%'])
                .unwrap_or(v);
            !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())
        }
        "mode" => (3..=4).contains(&v.len()) && v.chars().all(|c| ('0'..='7').contains(&c)),
        "uid" | "gid" | "nr_inodes" => digits,
        _ => false,
    };
    if ok {
        Ok(())
    } else if matches!(key, "suid" | "dev") {
        Err(format!(
            "tmpfs option {opt} would let setuid files or device files on it work"
        ))
    } else {
        Err(format!(
            "{opt:?} is not a tmpfs option the layer accepts (rw, ro, noexec, exec, nosuid, \
             nodev, size=, mode=, uid=, gid=, nr_inodes=)"
        ))
    }
}

/// How `path` meets `target`: at it, over it (a parent), under it; `None` when apart.
fn clash(path: &str, target: &str) -> Option<&'static str> {
    let under = |a: &str, b: &str| a.strip_prefix(b).is_some_and(|r| r.starts_with('/'));
    if path == target {
        Some("at")
    } else if under(target, path) {
        Some("over")
    } else if under(path, target) {
        Some("inside")
    } else {
        None
    }
}

/// The tmpfs mounts against one container's own mount points (the workspace, P, guards…):
/// a tmpfs at, over or inside any of them is refused before anything is made.
pub fn check_tmpfs_against<'a>(
    flags: &RunFlags,
    targets: impl Iterator<Item = &'a str> + Clone,
) -> Result<()> {
    for path in flags.tmpfs.keys() {
        for target in targets.clone() {
            if let Some(how) = clash(path, target) {
                let given = format!("--tmpfs={path}");
                let item = flags
                    .given
                    .iter()
                    .find(|g| g.starts_with(&given))
                    .cloned()
                    .unwrap_or(given);
                return Err(refused(
                    &item,
                    format!("a tmpfs at {path} would be {how} the container's mount {target}"),
                ));
            }
        }
    }
    Ok(())
}

/// `key[=value]`, the key not in the layer's `po.` namespace.
fn label(value: &str) -> std::result::Result<(String, String), String> {
    let (key, v) = value.split_once('=').unwrap_or((value, ""));
    if key.is_empty() {
        return Err("a label needs a key (key=value)".into());
    }
    let lower = key.to_lowercase();
    if lower == "po" || lower.starts_with("po.") {
        return Err(format!(
            "label {key:?} is in the layer's own po.* namespace (ownership, workspace, spec hash)"
        ));
    }
    Ok((key.to_string(), v.to_string()))
}

/// Only options that tighten: `no-new-privileges` (already on; `None`) and an SELinux level
/// (`label=level:…`). Everything else is refused, saying why.
fn security_opt(value: &str) -> std::result::Result<Option<String>, String> {
    let sep = value.find(['=', ':']).unwrap_or(value.len());
    let key = value[..sep].to_ascii_lowercase();
    let arg = value.get(sep + 1..).unwrap_or("");
    let arg_lower = arg.to_ascii_lowercase();
    match key.as_str() {
        "no-new-privileges" if sep == value.len() || arg_lower == "true" => Ok(None),
        "no-new-privileges" => Err(format!(
            "security-opt {value} would allow new privileges (setuid); the layer always sets \
             no-new-privileges"
        )),
        "seccomp" if arg_lower == "unconfined" => {
            Err("security-opt seccomp=unconfined would turn off the system-call filter".into())
        }
        "seccomp" => Err(format!(
            "security-opt {value}: a custom seccomp profile can allow more than the engine's \
             default, which the layer cannot prove it does not; the default profile applies"
        )),
        "apparmor" => Err(format!(
            "security-opt {value}: only the engine's default AppArmor profile is accepted \
             (unconfined, or another profile, can allow more)"
        )),
        "label" if arg_lower.starts_with("level:") && label_level(&arg[6..]) => {
            Ok(Some(format!("label=level:{}", &arg[6..])))
        }
        "label" if arg_lower == "disable" => {
            Err("security-opt label=disable would turn off SELinux separation".into())
        }
        "label" => Err(format!(
            "security-opt {value}: only label=level:<level> is accepted (type, user, role or \
             disable can loosen SELinux separation)"
        )),
        "systempaths" => Err(format!(
            "security-opt {value} would unmask the kernel paths under /proc and /sys"
        )),
        _ => Err(format!(
            "security-opt {value} is not one the layer accepts (no-new-privileges, \
             label=level:<level>)"
        )),
    }
}

/// An SELinux MCS level: `s0`, `s0:c1,c2`, `s0-s0:c0.c1023`.
fn label_level(level: &str) -> bool {
    !level.is_empty()
        && level.starts_with('s')
        && level
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | ',' | '.' | '-'))
}

#[cfg(test)]
mod tests;
