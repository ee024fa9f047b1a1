"""Atomic file writing shared by the dataset writers (svmlight files, downloaded archives)."""

import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_write(path):
    """Open a temporary file next to ``path`` for binary writing; rename it over ``path`` on
    success, delete it on any error.

    A reader never sees a half-written ``path``: it holds the old content until the new one
    is complete and flushed to disk.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="-" + os.path.basename(path), dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
