//! The host folder as `apply` of a folder copy reads and writes it: every path walked from the
//! folder one name at a time with `openat(O_NOFOLLOW)`, so no link on the way (or at the end) is
//! ever followed; files written aside in their folder and renamed over the old one, only when
//! the host still has what the caller saw; no setuid, setgid or sticky bit; a root process
//! gives what it makes the owner of what it replaces (or of the folder it is in).

use super::manifest::Entry;

/// What the host has at a path.
#[cfg_attr(not(unix), allow(dead_code))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostSide {
    /// Nothing (nor any folder on its way).
    Absent,
    /// A file or a link, with its permission bits and owner.
    Has {
        entry: Entry,
        mode: u32,
        owner: (u32, u32),
    },
    /// Something `apply` never writes over: a folder, a special file, a link or file on the
    /// way, an unreadable file; why.
    Other(String),
}

impl HostSide {
    /// Whether the host has `want` there (`None`: nothing).
    pub fn is(&self, want: Option<&Entry>) -> bool {
        match (self, want) {
            (HostSide::Absent, None) => true,
            (HostSide::Has { entry, .. }, Some(w)) => entry == w,
            _ => false,
        }
    }
}

/// The permission bits a written file gets: the old file's read and write bits (0644 for a new
/// one), and an `x` wherever there is an `r` when the copy's file is executable; never more.
#[cfg_attr(not(unix), allow(dead_code))]
pub fn mode_for(old: Option<u32>, executable: bool) -> u32 {
    let base = old.map_or(0o644, |m| m & 0o666);
    if executable {
        base | ((base & 0o444) >> 2)
    } else {
        base
    }
}

#[cfg(unix)]
pub use unix::HostFolder;

#[cfg(unix)]
mod unix {
    use std::ffi::CString;
    use std::fs::File;
    use std::io::{self, Read, Write};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::path::Path;

    use super::{HostSide, mode_for};
    use crate::sandbox::folder::clone::manifest::Entry;

    /// The host folder, opened once.
    pub struct HostFolder {
        root: OwnedFd,
    }

    fn name(n: &str) -> io::Result<CString> {
        CString::new(n).map_err(|_| io::Error::other("a name holds a NUL byte"))
    }

    fn fd_of(raw: libc::c_int) -> io::Result<OwnedFd> {
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just returned by the system, owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(raw) })
    }

    fn check(r: libc::c_int) -> io::Result<()> {
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn open_at(dir: &OwnedFd, n: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
        let c = name(n)?;
        let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a valid descriptor and a NUL-terminated name.
        fd_of(unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, 0o600 as libc::c_uint) })
    }

    fn lstat_at(dir: &OwnedFd, n: &str) -> io::Result<Option<libc::stat>> {
        let c = name(n)?;
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: a valid descriptor, a NUL-terminated name and room for the answer.
        let r = unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                c.as_ptr(),
                st.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        match check(r) {
            // SAFETY: fstatat filled it.
            Ok(()) => Ok(Some(unsafe { st.assume_init() })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn owner_of(fd: &OwnedFd) -> io::Result<(u32, u32)> {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: a valid descriptor and room for the answer.
        check(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
        // SAFETY: fstat filled it.
        let st = unsafe { st.assume_init() };
        Ok((st.st_uid, st.st_gid))
    }

    fn is_root() -> bool {
        // SAFETY: no arguments, no failure.
        unsafe { libc::geteuid() == 0 }
    }

    /// Hands `n` in `dir` to `owner` when this process is root (else it is this user's).
    fn give(dir: &OwnedFd, n: &str, owner: (u32, u32)) -> io::Result<()> {
        if !is_root() {
            return Ok(());
        }
        let c = name(n)?;
        // SAFETY: a valid descriptor and a NUL-terminated name; links are not followed.
        check(unsafe {
            libc::fchownat(
                dir.as_raw_fd(),
                c.as_ptr(),
                owner.0,
                owner.1,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })
    }

    impl HostFolder {
        /// Opens the workspace folder.
        pub fn open(folder: &Path) -> io::Result<HostFolder> {
            let root = File::open(folder)?;
            if !root.metadata()?.is_dir() {
                return Err(io::Error::other("it is not a folder"));
            }
            Ok(HostFolder { root: root.into() })
        }

        /// The folder holding `path` and its last name; `None` when a folder on the way is
        /// missing (made, with `create`). A link or file on the way is an error.
        fn parent<'p>(
            &self,
            path: &'p str,
            create: bool,
        ) -> io::Result<Option<(OwnedFd, &'p str)>> {
            // The caller checked it already; checked again here, where it matters.
            crate::sandbox::folder::clone::manifest::check_path(path).map_err(io::Error::other)?;
            let (dirs, leaf) = path.rsplit_once('/').unwrap_or(("", path));
            let mut at = self.root.try_clone()?;
            for d in dirs.split('/').filter(|d| !d.is_empty()) {
                let flags = libc::O_RDONLY | libc::O_DIRECTORY;
                at = match open_at(&at, d, flags) {
                    Ok(fd) => fd,
                    Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                        let c = name(d)?;
                        // SAFETY: a valid descriptor and a NUL-terminated name.
                        check(unsafe { libc::mkdirat(at.as_raw_fd(), c.as_ptr(), 0o755) })?;
                        give(&at, d, owner_of(&at)?)?;
                        open_at(&at, d, flags)?
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                        return Err(io::Error::other(format!(
                            "{d:?} on its way is a link or not a folder on the host"
                        )));
                    }
                    Err(e) => return Err(e),
                };
            }
            Ok(Some((at, leaf)))
        }

        /// What the host has at `path`, with the bytes of a file of at most `keep` bytes.
        pub fn state(&self, path: &str, keep: u64) -> (HostSide, Option<Vec<u8>>) {
            let got = self.parent(path, false).and_then(|p| {
                p.map_or(Ok((HostSide::Absent, None)), |(d, n)| state_in(&d, n, keep))
            });
            got.unwrap_or_else(|e| (HostSide::Other(e.to_string()), None))
        }

        /// Removes `aside` (a file or link the layer writes aside, [`aside_name`]) from the
        /// folder holding `path`, reached through no link. Whether it was there.
        pub fn remove_aside(&self, path: &str, aside: &str) -> io::Result<bool> {
            if !super::is_aside_name(aside) {
                return Ok(false);
            }
            let Some((dir, _)) = self.parent(path, false)? else {
                return Ok(false);
            };
            let Some(st) = lstat_at(&dir, aside)? else {
                return Ok(false);
            };
            let kind = st.st_mode & libc::S_IFMT;
            if kind != libc::S_IFREG && kind != libc::S_IFLNK {
                return Ok(false);
            }
            let c = name(aside)?;
            // SAFETY: a valid descriptor and a NUL-terminated name.
            check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) })?;
            Ok(true)
        }

        /// Writes `new` (or removes what is there, with `None`) at `path` when the host still
        /// has `expected` there, writing it aside as `aside` ([`aside_name`]) first.
        pub fn put(
            &self,
            path: &str,
            expected: &HostSide,
            new: Option<(&Entry, &[u8])>,
            aside: &str,
        ) -> io::Result<()> {
            let Some((dir, leaf)) = self.parent(path, new.is_some())? else {
                return if *expected == HostSide::Absent {
                    Ok(())
                } else {
                    Err(changed())
                };
            };
            if state_in(&dir, leaf, 0)?.0 != *expected {
                return Err(changed());
            }
            let Some((entry, bytes)) = new else {
                let c = name(leaf)?;
                // SAFETY: a valid descriptor and a NUL-terminated name.
                return check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) });
            };
            let (old_mode, owner) = match expected {
                HostSide::Has { mode, owner, .. } => (Some(*mode), *owner),
                _ => (None, owner_of(&dir)?),
            };
            let written = write_aside(
                &dir,
                aside,
                entry,
                bytes,
                mode_for(old_mode, entry.executable),
            )
            .and_then(|()| give(&dir, aside, owner))
            .and_then(|()| {
                let (a, l) = (name(aside)?, name(leaf)?);
                let fd = dir.as_raw_fd();
                // SAFETY: valid descriptors and NUL-terminated names.
                check(unsafe { libc::renameat(fd, a.as_ptr(), fd, l.as_ptr()) })
            });
            if written.is_err() {
                let c = name(aside)?;
                // SAFETY: as above; the aside may not exist, which is fine.
                unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) };
            }
            written
        }
    }

    fn changed() -> io::Error {
        io::Error::other("the host's file changed meanwhile; apply again")
    }

    /// A new file or link named `aside` in `dir`.
    fn write_aside(
        dir: &OwnedFd,
        aside: &str,
        entry: &Entry,
        bytes: &[u8],
        mode: u32,
    ) -> io::Result<()> {
        if entry.kind == crate::sandbox::folder::clone::manifest::EntryKind::Link {
            let (t, a) = (name(&entry.value)?, name(aside)?);
            // SAFETY: NUL-terminated names and a valid descriptor.
            return check(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), a.as_ptr()) });
        }
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        let mut f = File::from(open_at(dir, aside, flags)?);
        f.write_all(bytes)?;
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        f.sync_all()
    }

    /// What `dir` has at `n` (see [`HostFolder::state`]).
    fn state_in(dir: &OwnedFd, n: &str, keep: u64) -> io::Result<(HostSide, Option<Vec<u8>>)> {
        let Some(st) = lstat_at(dir, n)? else {
            return Ok((HostSide::Absent, None));
        };
        // `st_mode` is a u16 on macOS.
        #[allow(clippy::unnecessary_cast)]
        let (mode, owner) = (st.st_mode as u32, (st.st_uid, st.st_gid));
        let kind = st.st_mode & libc::S_IFMT;
        if kind == libc::S_IFLNK {
            let c = name(n)?;
            let mut buf = vec![0u8; 4096];
            // SAFETY: a valid descriptor, a NUL-terminated name and a buffer of this length.
            let len = unsafe {
                libc::readlinkat(
                    dir.as_raw_fd(),
                    c.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if len < 0 {
                return Err(io::Error::last_os_error());
            }
            buf.truncate(len as usize);
            let entry = Entry::link(&String::from_utf8_lossy(&buf));
            return Ok((HostSide::Has { entry, mode, owner }, None));
        }
        if kind != libc::S_IFREG {
            return Ok((
                HostSide::Other("it is a folder or a special file on the host".into()),
                None,
            ));
        }
        let mut bytes = Vec::new();
        // Non-blocking: a pipe swapped in meanwhile cannot hang the read.
        File::from(open_at(dir, n, libc::O_RDONLY | libc::O_NONBLOCK)?).read_to_end(&mut bytes)?;
        let entry = Entry::file(&bytes, mode & 0o111 != 0);
        let kept = (bytes.len() as u64 <= keep).then_some(bytes);
        Ok((HostSide::Has { entry, mode, owner }, kept))
    }
}

/// A new name to write a file aside as in its folder: `.po-sandbox-<pid>-<12 hex digits>`.
pub fn aside_name() -> std::io::Result<String> {
    let mut random = [0u8; 6];
    getrandom::fill(&mut random).map_err(std::io::Error::other)?;
    Ok(format!(
        ".po-sandbox-{}-{}",
        std::process::id(),
        hex::encode(random)
    ))
}

/// Whether `name` is one [`aside_name`] makes.
#[cfg_attr(not(unix), allow(dead_code))]
pub fn is_aside_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(".po-sandbox-") else {
        return false;
    };
    let Some((pid, random)) = rest.split_once('-') else {
        return false;
    };
    !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && random.len() == 12
        && random.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Elsewhere than Unix: writing a folder copy's files is not built.
#[cfg(not(unix))]
pub struct HostFolder;

#[cfg(not(unix))]
impl HostFolder {
    pub fn open(_folder: &std::path::Path) -> std::io::Result<HostFolder> {
        Err(std::io::Error::other(
            "diff and apply of a folder without git are built for Linux and macOS hosts only",
        ))
    }

    pub fn state(&self, _path: &str, _keep: u64) -> (HostSide, Option<Vec<u8>>) {
        (HostSide::Other("not built on this platform".into()), None)
    }

    pub fn put(
        &self,
        _: &str,
        _: &HostSide,
        _: Option<(&Entry, &[u8])>,
        _: &str,
    ) -> std::io::Result<()> {
        Err(std::io::Error::other("not built on this platform"))
    }

    pub fn remove_aside(&self, _: &str, _: &str) -> std::io::Result<bool> {
        Ok(false)
    }
}
