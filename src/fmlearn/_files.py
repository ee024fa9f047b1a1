"""The one atomic file writer of the package (model files, svmlight files, downloads).

:func:`atomic_write` writes to a temporary file ``.fmlearn-<random>.tmp`` in the destination's
folder, flushes it to disk and renames it over the destination, so a reader never sees a
half-written file. What it guarantees, exactly (docs/reliability.md):

* the destination holds either its old content or the complete new one, after any error,
  ``KeyboardInterrupt``, SIGTERM or SIGKILL, and after a crash of the machine once the call
  returned (file and folder are fsynced);
* an error or interrupt inside the call removes the temporary file; a process killed before
  it could do so (SIGKILL, or SIGTERM without a handler) leaves it behind, and the next
  :func:`atomic_write` into the same folder deletes it. A temporary file is taken as stale
  when no process holds its lock (``flock``, released by the kernel when its writer dies) and
  it was last modified more than :data:`STALE_AFTER` seconds ago;
* only a regular file (or nothing) is replaced: a directory, a device node, a FIFO or a
  socket at the destination is refused with ``ValueError`` before anything is written; a
  symbolic link is followed, and its target is replaced atomically (the link stays);
* the new file has the mode of an ordinary new file (``0o666`` minus the umask);
* an ``OSError`` names the user's path, never the temporary file.
"""

import contextlib
import fnmatch
import os
import stat
import tempfile
import time

try:  # POSIX: the writer's lock tells a live temporary file from a killed writer's one
    import fcntl
except ImportError:  # pragma: no cover - Windows: the age rule alone
    fcntl = None

__all__ = ["atomic_write", "TEMP_PREFIX", "TEMP_SUFFIX", "STALE_AFTER"]

TEMP_PREFIX = ".fmlearn-"
TEMP_SUFFIX = ".tmp"
#: Seconds a lock-free temporary file must have been left untouched to count as stale (it
#: covers the instant between a writer creating its file and taking its lock).
STALE_AFTER = 5.0


def _new_file_mode():
    """0o666 minus the process umask, read without changing it where the OS allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _kind(mode):
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def _destination(path):
    """The real file to replace: ``path`` with symbolic links followed; refuses anything that
    exists and is not a regular file."""
    target = os.path.realpath(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror}", path) from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"refusing to write {path!r}: it is a {_kind(st.st_mode)}, not a "
                         "regular file")
    return target


def clean_stale_temporaries(folder, now=None):
    """Delete the temporary files of killed writers in ``folder``; return their names.

    A file counts as stale when its name is ``.fmlearn-*.tmp``, it is a regular file, no
    process holds its lock, and it is older than :data:`STALE_AFTER` seconds. Errors (a file
    that vanished, no permission) are ignored: cleaning is best effort.
    """
    now = time.time() if now is None else now
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        if not fnmatch.fnmatchcase(name, f"{TEMP_PREFIX}*{TEMP_SUFFIX}"):
            continue
        full = os.path.join(folder, name)
        try:
            fd = os.open(full, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or now - st.st_mtime < STALE_AFTER:
                continue
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # a live writer holds it
            os.unlink(full)
            removed.append(name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def _fsync_folder(folder):
    try:  # make the rename itself durable; not every platform allows fsync on a folder
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


@contextlib.contextmanager
def atomic_write(path):
    """Open a temporary file next to ``path`` for binary writing; rename it over ``path`` on
    success, delete it on any error (see the module docstring for the guarantees).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> with atomic_write(path) as f:
    ...     _ = f.write(b"complete")
    >>> open(path, "rb").read(), os.listdir(os.path.dirname(path))
    (b'complete', ['out.txt'])
    """
    path = os.fspath(path)
    target = _destination(path)
    folder = os.path.dirname(target)
    clean_stale_temporaries(folder)
    try:
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=folder)
    except OSError as exc:
        raise type(exc)(exc.errno, f"cannot write {path}: {exc.strerror}", path) from None
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held until the file is renamed or removed
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
            os.chmod(tmp, _new_file_mode())  # mkstemp creates 0o600
            os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename in (tmp, target, None) and exc.errno:
            raise type(exc)(exc.errno, f"cannot write {path}: {exc.strerror}", path) from None
        raise
    _fsync_folder(folder)
