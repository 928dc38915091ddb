//! The workspace container's system-call filter: the layer's own seccomp profile, given to the
//! engine in place of its default one.
//!
//! Why the layer has its own: a hub that runs as root runs the container as uid 0, and with
//! every capability dropped uid 0 can still `chmod 4755` its own files; in bind mode such a file
//! is a setuid-root file in the person's folder for any local user who reaches it. Nothing in
//! the engine's default profile refuses the setuid and setgid bits, and an engine takes one
//! profile per container, so this one is complete: the system calls ordinary programs use are
//! allowed, those the engines' defaults refuse to a container without capabilities are refused
//! (module loading, mounts, namespaces, keyrings, BPF, perf, io_uring, userfaultfd, clock and
//! swap changes), and the mode-setting calls are allowed only without `S_ISUID` and `S_ISGID`
//! (`chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `mknod`, `mknodat`, and `open`, `openat`,
//! `creat` when they create). `openat2` and `clone3` carry their arguments in a structure that a
//! filter cannot read: they answer `ENOSYS`, and the C libraries fall back to `openat` and
//! `clone`. A `mkdir` mode's setuid and setgid bits are dropped by the kernel itself.
//!
//! Docker takes the profile's text in `SecurityOpt` (`seccomp=<json>`); Podman's Docker API
//! takes a path there, so for Podman the text is written to `<poHome>/seccomp/<digest>.json`.

use std::path::{Path, PathBuf};

/// System calls allowed without a condition (the union of the x86-64, i386, arm and arm64
/// tables' ordinary calls; a name an architecture does not have is skipped by the engine).
#[rustfmt::skip]
const ALLOWED: &[&str] = &[
    // Files and folders.
    "access", "chdir", "chown", "chown32", "close", "close_range", "copy_file_range", "dup",
    "dup2", "dup3", "faccessat", "faccessat2", "fadvise64", "fadvise64_64", "fallocate", "fchdir",
    "fchown", "fchown32", "fchownat", "fcntl", "fcntl64", "fdatasync", "fgetxattr", "flistxattr",
    "flock", "fremovexattr", "fsetxattr", "fstat", "fstat64", "fstatat64", "fstatfs", "fstatfs64",
    "fsync", "ftruncate", "ftruncate64", "futimesat", "getcwd", "getdents", "getdents64",
    "getxattr", "getxattrat", "lchown", "lchown32", "lgetxattr", "link", "linkat", "listxattr",
    "listxattrat", "llistxattr", "lremovexattr", "lseek", "_llseek", "lsetxattr", "lstat",
    "lstat64", "mkdir", "mkdirat", "newfstatat", "pread64", "preadv", "preadv2", "pwrite64",
    "pwritev", "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "removexattr",
    "removexattrat", "rename", "renameat", "renameat2", "rmdir", "sendfile", "sendfile64",
    "setxattr", "setxattrat", "splice", "stat", "stat64", "statfs", "statfs64", "statx", "symlink",
    "symlinkat", "sync", "sync_file_range", "sync_file_range2", "syncfs", "tee", "truncate",
    "truncate64", "umask", "unlink", "unlinkat", "utime", "utimensat", "utimensat_time64",
    "utimes", "vmsplice", "write", "writev", "cachestat", "statmount", "listmount",
    // Watching and waiting.
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "epoll_wait",
    "eventfd", "eventfd2", "fanotify_mark", "inotify_add_watch", "inotify_init", "inotify_init1",
    "inotify_rm_watch", "io_cancel", "io_destroy", "io_getevents", "io_pgetevents",
    "io_pgetevents_time64", "io_setup", "io_submit", "pause", "poll", "ppoll", "ppoll_time64",
    "pselect6", "pselect6_time64", "select", "_newselect", "signalfd", "signalfd4",
    "timerfd_create", "timerfd_gettime", "timerfd_gettime64", "timerfd_settime",
    "timerfd_settime64",
    // Memory.
    "brk", "madvise", "membarrier", "memfd_create", "memfd_secret", "mincore", "mlock", "mlock2",
    "mlockall", "mmap", "mmap2", "mprotect", "mremap", "msync", "munlock", "munlockall", "munmap",
    "pkey_alloc", "pkey_free", "pkey_mprotect", "remap_file_pages", "map_shadow_stack", "mseal",
    // Processes, threads and signals.
    "arch_prctl", "capget", "capset", "execve", "execveat", "exit", "exit_group", "fork", "futex",
    "futex_requeue", "futex_time64", "futex_wait", "futex_waitv", "futex_wake", "get_robust_list",
    "get_thread_area", "getcpu", "getegid", "getegid32", "geteuid", "geteuid32", "getgid",
    "getgid32", "getgroups", "getgroups32", "getitimer", "getpgid", "getpgrp", "getpid", "getppid",
    "getpriority", "getrandom", "getresgid", "getresgid32", "getresuid", "getresuid32",
    "getrlimit", "getrusage", "getsid", "gettid", "getuid", "getuid32", "ioprio_get", "ioprio_set",
    "kill", "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self",
    "lsm_get_self_attr", "lsm_list_modules", "modify_ldt", "pidfd_getfd", "pidfd_open",
    "pidfd_send_signal", "prctl", "prlimit64", "process_mrelease", "process_vm_readv",
    "process_vm_writev", "ptrace", "restart_syscall", "rseq", "rt_sigaction", "rt_sigpending",
    "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
    "rt_sigtimedwait_time64", "rt_tgsigqueueinfo", "sched_get_priority_max",
    "sched_get_priority_min", "sched_getaffinity", "sched_getattr", "sched_getparam",
    "sched_getscheduler", "sched_rr_get_interval", "sched_rr_get_interval_time64",
    "sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield",
    "seccomp", "set_robust_list", "set_thread_area", "set_tid_address", "set_tls", "setfsgid",
    "setfsgid32", "setfsuid", "setfsuid32", "setgid", "setgid32", "setgroups", "setgroups32",
    "setitimer", "setpgid", "setpriority", "setregid", "setregid32", "setresgid", "setresgid32",
    "setresuid", "setresuid32", "setreuid", "setreuid32", "setrlimit", "setsid", "setuid",
    "setuid32", "sigaction", "sigaltstack", "signal", "sigpending", "sigprocmask", "sigreturn",
    "sigsuspend", "tgkill", "tkill", "ugetrlimit", "vfork", "wait4", "waitid", "waitpid",
    "cacheflush", "breakpoint",
    // Time and the system.
    "adjtimex", "alarm", "clock_getres", "clock_getres_time64", "clock_gettime", "clock_gettime64",
    "clock_nanosleep", "clock_nanosleep_time64", "gettimeofday", "nanosleep", "sethostname",
    "setdomainname", "sysinfo", "time", "timer_create", "timer_delete", "timer_getoverrun",
    "timer_gettime", "timer_gettime64", "timer_settime", "timer_settime64", "times", "uname",
    // Sockets and inter-process communication.
    "accept", "accept4", "bind", "connect", "getpeername", "getsockname", "getsockopt", "ioctl",
    "ipc", "listen", "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive",
    "mq_timedreceive_time64", "mq_timedsend", "mq_timedsend_time64", "mq_unlink", "msgctl",
    "msgget", "msgrcv", "msgsnd", "pipe", "pipe2", "recv", "recvfrom", "recvmmsg",
    "recvmmsg_time64", "recvmsg", "semctl", "semget", "semop", "semtimedop", "semtimedop_time64",
    "send", "sendmmsg", "sendmsg", "sendto", "setsockopt", "shmat", "shmctl", "shmdt", "shmget",
    "shutdown", "socket", "socketcall", "socketpair",
];

/// `S_ISUID | S_ISGID`.
const SET_ID_BITS: u64 = 0o6000;
/// `O_CREAT | __O_TMPFILE`: the `open` flags with which the mode argument is used.
const CREATING: u64 = 0o100 | 0o20_000_000;
/// The namespace flags of `clone` (`CLONE_NEWNS`, `NEWCGROUP`, `NEWUTS`, `NEWIPC`, `NEWUSER`,
/// `NEWPID`, `NEWNET`): a process without capabilities can still make a user namespace.
const NEW_NAMESPACES: u64 = 0x7E02_0000;
/// The `personality` values allowed (Linux, with the address space unrandomised, and the query).
const PERSONALITIES: [u64; 5] = [0x0, 0x8, 0x2_0000, 0x2_0008, 0xffff_ffff];
/// `ENOSYS`: the answer of calls whose arguments a filter cannot read.
const ENOSYS: u32 = 38;

/// (names, argument index): calls allowed only when that argument has neither set-id bit.
const MODE_ARGS: [(&[&str], u32); 3] = [
    (&["chmod", "fchmod", "creat", "mknod"], 1),
    (&["fchmodat", "fchmodat2", "mknodat", "open"], 2),
    (&["openat"], 3),
];
/// (name, argument index of its flags): creating calls also allowed when they do not create.
const FLAG_ARGS: [(&str, u32); 2] = [("open", 1), ("openat", 2)];

fn masked(index: u32, mask: u64, value: u64) -> serde_json::Value {
    serde_json::json!({"index": index, "value": mask, "valueTwo": value, "op": "SCMP_CMP_MASKED_EQ"})
}

fn allow_when(names: &[&str], arg: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"names": names, "action": "SCMP_ACT_ALLOW", "args": [arg]})
}

/// The profile's text (JSON, the same bytes every time).
pub fn profile() -> String {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(make_profile).clone()
}

/// The profile as a JSON value, parsed once (what a live container's entry is compared with).
fn profile_value() -> &'static serde_json::Value {
    static VALUE: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    VALUE.get_or_init(|| serde_json::from_str(&profile()).unwrap_or_default())
}

fn make_profile() -> String {
    use serde_json::json;
    let mut rules = vec![
        json!({"names": ALLOWED, "action": "SCMP_ACT_ALLOW"}),
        json!({"names": ["clone3", "openat2"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS}),
        allow_when(&["clone"], masked(0, NEW_NAMESPACES, 0)),
    ];
    for (names, index) in MODE_ARGS {
        rules.push(allow_when(names, masked(index, SET_ID_BITS, 0)));
    }
    for (name, index) in FLAG_ARGS {
        rules.push(allow_when(&[name], masked(index, CREATING, 0)));
    }
    for value in PERSONALITIES {
        let arg = json!({"index": 0, "value": value, "op": "SCMP_CMP_EQ"});
        rules.push(allow_when(&["personality"], arg));
    }
    json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": 1,
        "architectures": [
            "SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32",
            "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"
        ],
        "syscalls": rules,
    })
    .to_string()
}

/// The first 16 hex digits of the profile's SHA-256: its name, and part of the spec hash.
pub fn digest() -> String {
    static DIGEST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIGEST
        .get_or_init(|| {
            use sha2::Digest;
            hex::encode(&sha2::Sha256::digest(profile().as_bytes())[..8])
        })
        .clone()
}

/// Where the profile's file is for an engine that takes a path: `<poHome>/seccomp/<digest>.json`.
pub fn file_path(po_home: &Path) -> PathBuf {
    po_home.join("seccomp").join(format!("{}.json", digest()))
}

/// The `SecurityOpt` entry: the text for Docker, the file's path for Podman.
pub fn security_opt(file: &Path, podman: bool) -> String {
    match podman {
        true => format!("seccomp={}", file.display()),
        false => format!("seccomp={}", profile()),
    }
}

/// Whether a live container's `SecurityOpt` entry is this profile: its text, or a path to its
/// file (named by its digest).
pub fn is_ours(opt: &str) -> bool {
    let Some(value) = opt
        .strip_prefix("seccomp=")
        .or(opt.strip_prefix("seccomp:"))
    else {
        return false;
    };
    let name = format!("{}.json", digest());
    match value.trim_start().starts_with('{') {
        // The same bytes (Docker gives them back as given), else the same JSON.
        true => {
            value == profile()
                || serde_json::from_str::<serde_json::Value>(value)
                    .ok()
                    .as_ref()
                    == Some(profile_value())
        }
        false => Path::new(value).file_name() == Some(std::ffi::OsStr::new(&name)),
    }
}

/// Writes the profile's file at `path` (see [`file_path`]) when it is not there yet: its folder
/// made 0755, the file 0644 (a rootless engine's user reads it), written aside and renamed, so a
/// reader never sees half of it. The name holds the digest: a file by that name holds that text.
pub fn write_file(path: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o755);
    builder.create(dir)?;
    let aside = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = (|| {
        use std::io::Write;
        let mut open = std::fs::OpenOptions::new();
        open.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o644);
        let mut file = open.open(&aside)?;
        file.write_all(profile().as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&aside, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&aside);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Vec<serde_json::Value> {
        let p: serde_json::Value = serde_json::from_str(&profile()).unwrap();
        assert_eq!(p["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(p["defaultErrnoRet"], 1);
        p["syscalls"].as_array().unwrap().clone()
    }

    /// The rules naming `name`: (action, args).
    fn rules_of(name: &str) -> Vec<(String, Vec<serde_json::Value>)> {
        rules()
            .into_iter()
            .filter(|r| r["names"].as_array().unwrap().iter().any(|n| n == name))
            .map(|r| {
                let args = r["args"].as_array().cloned().unwrap_or_default();
                (r["action"].as_str().unwrap().to_string(), args)
            })
            .collect()
    }

    #[test]
    fn mode_setting_calls_are_allowed_only_without_set_id_bits() {
        for (name, index) in [
            ("chmod", 1),
            ("fchmod", 1),
            ("creat", 1),
            ("mknod", 1),
            ("fchmodat", 2),
            ("fchmodat2", 2),
            ("mknodat", 2),
            ("open", 2),
            ("openat", 3),
        ] {
            let rules = rules_of(name);
            assert!(!rules.is_empty(), "{name} has a rule");
            assert!(
                rules
                    .iter()
                    .all(|(action, args)| action == "SCMP_ACT_ALLOW" && args.len() == 1),
                "{name}: every rule is conditional"
            );
            let mode = rules
                .iter()
                .find(|(_, a)| a[0]["index"] == index && a[0]["value"] == 0o6000)
                .unwrap_or_else(|| panic!("{name}: the mode rule on argument {index}"));
            assert_eq!(mode.1[0]["valueTwo"], 0);
            assert_eq!(mode.1[0]["op"], "SCMP_CMP_MASKED_EQ");
        }
        // `open` and `openat` also pass when they do not create (the mode is then unused).
        for (name, index) in [("open", 1), ("openat", 2)] {
            assert!(rules_of(name).iter().any(|(_, a)| a[0]["index"] == index
                && a[0]["value"] == 0o20_000_100
                && a[0]["valueTwo"] == 0));
        }
    }

    #[test]
    fn unreadable_and_escaping_calls_are_refused() {
        for name in ["openat2", "clone3"] {
            assert_eq!(rules_of(name), [("SCMP_ACT_ERRNO".to_string(), vec![])]);
        }
        let clone = rules_of("clone");
        assert_eq!(clone.len(), 1);
        assert_eq!(clone[0].1[0]["value"], 0x7E02_0000u64);
        for name in [
            "unshare",
            "setns",
            "mount",
            "umount2",
            "pivot_root",
            "bpf",
            "perf_event_open",
            "userfaultfd",
            "keyctl",
            "add_key",
            "request_key",
            "io_uring_setup",
            "init_module",
            "finit_module",
            "kexec_load",
            "open_by_handle_at",
            "name_to_handle_at",
            "fsopen",
            "open_tree",
            "move_mount",
            "swapon",
            "reboot",
            "settimeofday",
            "clock_settime",
            "chroot",
            "acct",
            "syslog",
            "kcmp",
            "iopl",
            "ioperm",
        ] {
            assert!(rules_of(name).is_empty(), "{name} is refused by default");
        }
        assert!(
            rules_of("personality")
                .iter()
                .all(|(_, a)| a[0]["op"] == "SCMP_CMP_EQ")
        );
    }

    #[test]
    fn the_unconditional_list_has_no_name_twice_and_none_of_the_conditional_ones() {
        let mut seen = std::collections::HashSet::new();
        for name in ALLOWED {
            assert!(seen.insert(*name), "{name} twice");
        }
        let conditional = [
            "chmod",
            "fchmod",
            "fchmodat",
            "fchmodat2",
            "open",
            "openat",
            "creat",
        ];
        for name in conditional
            .iter()
            .chain(&["mknod", "mknodat", "clone", "personality"])
        {
            assert!(
                !ALLOWED.contains(name),
                "{name} is allowed only with its condition"
            );
        }
    }

    #[test]
    fn the_profile_is_recognised_by_text_or_by_its_file_and_nothing_else() {
        let text = profile();
        assert_eq!(text, profile(), "the same bytes every time");
        assert_eq!(digest().len(), 16);
        assert!(is_ours(&format!("seccomp={text}")));
        // An engine may give the text back re-formatted.
        let pretty = serde_json::to_string_pretty(
            &serde_json::from_str::<serde_json::Value>(&text).unwrap(),
        )
        .unwrap();
        assert!(is_ours(&format!("seccomp={pretty}")));
        let file = file_path(Path::new("/home/p/.po"));
        assert!(file.ends_with(format!("seccomp/{}.json", digest())));
        assert!(is_ours(&security_opt(&file, true)));
        for other in [
            "seccomp=unconfined",
            "seccomp=builtin",
            "seccomp=/etc/profile.json",
            "seccomp={\"defaultAction\":\"SCMP_ACT_ALLOW\"}",
            "no-new-privileges",
            "label=level:s0",
        ] {
            assert!(!is_ours(other), "{other}");
        }
        let tampered = text.replacen("\"chmod\"", "\"chmod2\"", 1);
        assert!(!is_ours(&format!("seccomp={tampered}")));
    }

    #[cfg(unix)]
    #[test]
    fn the_file_is_written_once_readable_and_whole() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let path = file_path(home.path());
        write_file(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), profile());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode & 0o622,
            0o600,
            "read-write by its owner only: {mode:o}"
        );
        // A second write leaves it, and nothing aside is left.
        write_file(&path).unwrap();
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [path.file_name().unwrap()]);
    }
}
