//! The host this process runs on, as one value: its variables, user and OS. Every platform
//! decision reads it, so tests can describe any host without touching the real one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

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

impl HostEnv {
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
