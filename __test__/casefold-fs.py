"""A case-insensitive folder for the tests, mounted with FUSE (mfusepy on libfuse 3).

Usage: casefold-fs.py <backing folder> <mount point>; runs until the mount point is unmounted
(fusermount3 -u). Every name is looked up as a case-insensitive file system looks it up (macOS's
APFS by default, Windows' NTFS, ext4 with casefold): `.Claude/settings.json` opens the
`.claude/settings.json` that exists, a new name is created with the case it is given, and a
folder never holds two names that differ only in case. Names are compared with Python's
`str.casefold` (Unicode full case folding). Links are kept as links; nothing is followed.

The tests use it where the kernel has no casefold support (no CONFIG_UNICODE) to make a real
ext4 casefold folder on a loop device.
"""

import errno
import os
import sys

import mfusepy as fuse


class CaseFold(fuse.Operations):
    use_ns = True

    def __init__(self, root):
        self.root = os.path.realpath(root)

    def _real(self, path):
        """The backing path of `path`, each existing name matched case-insensitively."""
        cur = self.root
        for part in (p for p in path.split("/") if p):
            exact = os.path.join(cur, part)
            if os.path.lexists(exact):
                cur = exact
                continue
            folded = part.casefold()
            try:
                names = os.listdir(cur)
            except OSError:
                names = []
            match = next((n for n in names if n.casefold() == folded), part)
            cur = os.path.join(cur, match)
        return cur

    def _new(self, path):
        """The backing path for a name about to be made: its folder matched, the name as given,
        EEXIST when a name differing only in case is there."""
        parent, name = os.path.split(path.rstrip("/"))
        real = self._real(parent)
        try:
            taken = any(n.casefold() == name.casefold() for n in os.listdir(real))
        except OSError:
            taken = False
        if taken:
            raise fuse.FuseOSError(errno.EEXIST)
        return os.path.join(real, name)

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self._real(path))
        except OSError as e:
            raise fuse.FuseOSError(e.errno)
        keys = ("st_ino", "st_mode", "st_nlink", "st_uid", "st_gid", "st_size")
        attrs = {k: getattr(st, k) for k in keys}
        # use_ns: times in nanoseconds.
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return attrs

    def readdir(self, path, fh=None):
        # With use_ino each entry carries its inode: one of 0 is skipped by readdir(3).
        real = self._real(path)
        out = []
        for name in [".", ".."] + os.listdir(real):
            try:
                st = os.lstat(os.path.join(real, name))
            except OSError:
                continue
            out.append((name, {"st_ino": st.st_ino, "st_mode": st.st_mode}, 0))
        return out

    def readlink(self, path):
        return os.readlink(self._real(path))

    def access(self, path, amode):
        if not os.access(self._real(path), amode, follow_symlinks=False):
            raise fuse.FuseOSError(errno.EACCES)

    def chmod(self, path, mode, *rest):
        os.chmod(self._real(path), mode, follow_symlinks=False)

    def chown(self, path, uid, gid, *rest):
        os.chown(self._real(path), uid, gid, follow_symlinks=False)

    def utimens(self, path, times=None, *rest):
        os.utime(self._real(path), ns=None if times is None else (int(times[0]), int(times[1])), follow_symlinks=False)

    def mkdir(self, path, mode):
        os.mkdir(self._new(path), mode)

    def rmdir(self, path):
        os.rmdir(self._real(path))

    def unlink(self, path):
        os.unlink(self._real(path))

    def symlink(self, target, source):
        os.symlink(source, self._new(target))

    def rename(self, old, new, *rest):
        src = self._real(old)
        parent, name = os.path.split(new.rstrip("/"))
        real_parent = self._real(parent)
        existing = os.path.join(real_parent, os.path.basename(self._real(new)))
        # Over a name that exists in another case: that one is replaced; else the name as given
        # (a rename that only changes the case included).
        dst = existing if os.path.lexists(existing) and existing != src else os.path.join(real_parent, name)
        os.replace(src, dst)

    def create(self, path, mode, fi=None):
        return os.open(self._new(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)

    def open(self, path, flags):
        return os.open(self._real(path), flags & ~(os.O_CREAT | os.O_EXCL) | os.O_NOFOLLOW)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self._real(path), length)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        os.fsync(fh)

    def release(self, path, fh):
        os.close(fh)

    def statfs(self, path):
        st = os.statvfs(self.root)
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")
        return {k: getattr(st, k) for k in keys}


if __name__ == "__main__":
    backing, mountpoint = sys.argv[1:3]
    # use_ino: a name in any case is the same file (its backing inode); allow_other: a container's
    # user reaches the folder when the engine bind-mounts it.
    # No attribute or name caching: one file reached under two cases is two kernel inodes, and
    # what one of them writes must show through the other at once.
    fuse.FUSE(CaseFold(backing), mountpoint, foreground=True, nothreads=True, use_ino=True, allow_other=True,
              attr_timeout=0, entry_timeout=0, negative_timeout=0)
