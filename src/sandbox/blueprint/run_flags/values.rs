//! The value of one run flag: each decoder checks it and says why it refuses it; and the tmpfs
//! mounts checked against a container's own mount points.

use std::borrow::Cow;
use std::fmt;

use super::{FIXED_TARGETS, Gpus, RunFlags, Ulimit, refused};
use crate::error::Result;

/// Why a run flag's value (or an option read the same way) is refused; its text follows the
/// flag in `RUN_FLAGS_INVALID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadValue {
    /// Not of the form the flag takes: `value` (inside `within`, when it is a part of it) is
    /// not what was `expected`.
    NotA {
        value: String,
        within: Option<String>,
        expected: Cow<'static, str>,
    },
    /// Of the right form, but not a value the flag takes (zero, too large, soft above hard).
    Unaccepted(String),
    /// It would loosen what the layer enforces or take over what it owns; says how.
    Loosens(String),
}

impl BadValue {
    /// `value` is not what was `expected`.
    fn not_a(value: &str, expected: impl Into<Cow<'static, str>>) -> Self {
        BadValue::NotA {
            value: value.to_string(),
            within: None,
            expected: expected.into(),
        }
    }
}

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadValue::NotA {
                value,
                within: None,
                expected,
            } => write!(f, "{value:?} is not {expected}"),
            BadValue::NotA {
                value,
                within: Some(within),
                expected,
            } => write!(f, "{value:?} in {within:?} is not {expected}"),
            BadValue::Unaccepted(why) | BadValue::Loosens(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for BadValue {}

/// A decoded value, or why it is refused.
type Decoded<T> = std::result::Result<T, BadValue>;

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

/// A runtime's name as registered in the engine (`runc`, `runsc`…).
pub(super) fn runtime_name(value: &str) -> Decoded<String> {
    let ok = value.len() <= 128
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(value.to_string())
    } else {
        Err(BadValue::not_a(
            value,
            "a runtime name (letters, digits, '.', '_', '-', as registered in the engine's \
             runtimes)",
        ))
    }
}

/// A size as the engine reads it: a number (decimals allowed) and an optional unit b, k, m,
/// g, t (powers of 1024; `kb`, `KiB` and the like too).
pub fn bytes(value: &str) -> Decoded<i64> {
    let bad = || {
        BadValue::not_a(
            value,
            "a size (a number and an optional unit b, k, m, g, t)",
        )
    };
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
        Ok(_) => Err(BadValue::Unaccepted(format!("{value:?} is zero"))),
        Err(_) => Err(BadValue::Unaccepted(format!("{value:?} is too large"))),
    }
}

/// `--cpus`: a decimal number of CPUs, more than 0 and at most 1024, in billionths.
pub fn nano_cpus(value: &str) -> Decoded<i64> {
    let bad = || BadValue::not_a(value, "a number of CPUs (like 1.5), from 0.01 to 1024");
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
pub(super) fn whole(value: &str, min: i64, max: i64) -> Decoded<i64> {
    let n = value
        .parse::<i64>()
        .ok()
        .filter(|_| value.chars().all(|c| c.is_ascii_digit()));
    match n {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(BadValue::not_a(
            value,
            format!("a whole number from {min} to {max}"),
        )),
    }
}

/// `--pids-limit`: a whole number, at most the layer's own limit (it may only lower it).
pub(super) fn pids_limit(value: &str, ours: i64) -> Decoded<i64> {
    if value.starts_with('-') || value == "0" {
        return Err(BadValue::Loosens(format!(
            "{value} would lift the pid limit; only a limit up to the layer's ({ours}) is \
             accepted"
        )));
    }
    let n = value
        .parse::<i64>()
        .ok()
        .filter(|_| value.chars().all(|c| c.is_ascii_digit()))
        .ok_or_else(|| BadValue::not_a(value, "a whole number"))?;
    if n > ours {
        return Err(BadValue::Loosens(format!(
            "{n} is above the layer's pid limit {ours}; it may only lower it (raise pidsLimit \
             for more)"
        )));
    }
    Ok(n)
}

/// `name=soft[:hard]`; `-1` is unlimited.
pub(super) fn ulimit(value: &str) -> Decoded<Ulimit> {
    let (name, limits) = value
        .split_once('=')
        .ok_or_else(|| BadValue::not_a(value, "name=soft[:hard]"))?;
    if matches!(name, "rtprio" | "rttime" | "nice") {
        return Err(BadValue::Loosens(format!(
            "ulimit {name} would let processes raise their scheduling priority over the host's"
        )));
    }
    if !ULIMITS.contains(&name) {
        return Err(BadValue::not_a(
            name,
            format!(
                "a resource limit the layer accepts ({})",
                ULIMITS.join(", ")
            ),
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
            _ => Err(BadValue::NotA {
                value: s.to_string(),
                within: Some(value.to_string()),
                expected: "a whole number (or -1, unlimited)".into(),
            }),
        }
    };
    let (soft, hard) = match limits.split_once(':') {
        Some((s, h)) => (number(s)?, number(h)?),
        None => (number(limits)?, number(limits)?),
    };
    let above = |a: i64, b: i64| b != -1 && (a == -1 || a > b);
    if above(soft, hard) {
        return Err(BadValue::Unaccepted(format!(
            "the soft limit of {value:?} is above its hard limit"
        )));
    }
    Ok(Ulimit {
        name: name.to_string(),
        soft,
        hard,
    })
}

/// `all`, a count, or `device=<id>[,<id>…]`.
pub(super) fn gpus(value: &str) -> Decoded<Gpus> {
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
    Err(BadValue::not_a(
        value,
        "all, a count, or device=<id>[,<id>...]",
    ))
}

/// A search domain (or `.`, none).
pub(super) fn dns_search(value: &str) -> Decoded<String> {
    let ok = value == "."
        || (value.len() <= 253
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
            && !value.starts_with(['.', '-']));
    if ok {
        Ok(value.to_string())
    } else {
        Err(BadValue::not_a(value, "a domain name"))
    }
}

/// A resolver option (`ndots:2`, `timeout:1`…).
pub(super) fn dns_option(value: &str) -> Decoded<String> {
    let ok = value.len() <= 64
        && value.starts_with(|c: char| c.is_ascii_alphabetic())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '-' | '_' | '.'));
    if ok {
        Ok(value.to_string())
    } else {
        Err(BadValue::not_a(
            value,
            "a resolver option (like ndots:2, timeout:3, rotate)",
        ))
    }
}

/// `/path[:options]`: an absolute, normal path not at, over or under the layer's own mounts or
/// the kernel's file systems; options among rw, ro, noexec, exec, nosuid, nodev, size=,
/// mode=, uid=, gid=, nr_inodes=.
pub(super) fn tmpfs(value: &str) -> Decoded<(String, String)> {
    let (path, options) = value.split_once(':').unwrap_or((value, ""));
    let normal = path.starts_with('/')
        && path.len() > 1
        && !path.ends_with('/')
        && path[1..]
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != ".." && !seg.contains(','));
    if !normal {
        return Err(BadValue::not_a(
            path,
            "an absolute, normal container path other than /",
        ));
    }
    for target in FIXED_TARGETS.iter().chain(SYSTEM_TARGETS.iter()) {
        if let Some(how) = clash(path, target) {
            return Err(BadValue::Loosens(format!(
                "a tmpfs at {path} would be {how} {target}"
            )));
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

/// One tmpfs mount option, among those [`tmpfs`] accepts.
fn tmpfs_option(opt: &str) -> Decoded<()> {
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
        Err(BadValue::Loosens(format!(
            "tmpfs option {opt} would let setuid files or device files on it work"
        )))
    } else {
        Err(BadValue::not_a(
            opt,
            "a tmpfs option the layer accepts (rw, ro, noexec, exec, nosuid, nodev, size=, \
             mode=, uid=, gid=, nr_inodes=)",
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
pub(super) fn label(value: &str) -> Decoded<(String, String)> {
    let (key, v) = value.split_once('=').unwrap_or((value, ""));
    if key.is_empty() {
        return Err(BadValue::Unaccepted(
            "a label needs a key (key=value)".into(),
        ));
    }
    let lower = key.to_lowercase();
    if lower == "po" || lower.starts_with("po.") {
        return Err(BadValue::Loosens(format!(
            "label {key:?} is in the layer's own po.* namespace (ownership, workspace, spec hash)"
        )));
    }
    Ok((key.to_string(), v.to_string()))
}

/// Only options that tighten: `no-new-privileges` (already on; `None`) and an SELinux level
/// (`label=level:…`). Everything else is refused, saying why.
pub(super) fn security_opt(value: &str) -> Decoded<Option<String>> {
    let sep = value.find(['=', ':']).unwrap_or(value.len());
    let key = value[..sep].to_ascii_lowercase();
    let arg = value.get(sep + 1..).unwrap_or("");
    let arg_lower = arg.to_ascii_lowercase();
    match key.as_str() {
        "no-new-privileges" if sep == value.len() || arg_lower == "true" => Ok(None),
        "no-new-privileges" => Err(BadValue::Loosens(format!(
            "security-opt {value} would allow new privileges (setuid); the layer always sets \
             no-new-privileges"
        ))),
        "seccomp" if arg_lower == "unconfined" => Err(BadValue::Loosens(
            "security-opt seccomp=unconfined would turn off the system-call filter".into(),
        )),
        "seccomp" => Err(BadValue::Loosens(format!(
            "security-opt {value}: a custom seccomp profile can allow more than the engine's \
             default, which the layer cannot prove it does not; the default profile applies"
        ))),
        "apparmor" => Err(BadValue::Loosens(format!(
            "security-opt {value}: only the engine's default AppArmor profile is accepted \
             (unconfined, or another profile, can allow more)"
        ))),
        "label" if arg_lower.starts_with("level:") && label_level(&arg[6..]) => {
            Ok(Some(format!("label=level:{}", &arg[6..])))
        }
        "label" if arg_lower == "disable" => Err(BadValue::Loosens(
            "security-opt label=disable would turn off SELinux separation".into(),
        )),
        "label" => Err(BadValue::Loosens(format!(
            "security-opt {value}: only label=level:<level> is accepted (type, user, role or \
             disable can loosen SELinux separation)"
        ))),
        "systempaths" => Err(BadValue::Loosens(format!(
            "security-opt {value} would unmask the kernel paths under /proc and /sys"
        ))),
        _ => Err(BadValue::Unaccepted(format!(
            "security-opt {value} is not one the layer accepts (no-new-privileges, \
             label=level:<level>)"
        ))),
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
