"""The binary chunk cache of :func:`fmlearn.fit_stream`: the parsed chunks of a text file kept
on disk between the epochs of one call.

A text file is parsed chunk by chunk on every epoch of a streamed fit, which costs about half
as much again as learning from the rows (``benchmarks/bench_ffm.py scale``: a 1,000,000-row
libffm file of 20 fields, k=4, quiet machine, alternated: 3.5 CPU s an epoch parsing the text,
3.0 reading this cache, 2.7 in memory). LIBFFM writes its text to a binary cache on its first
epoch and reads that cache on later epochs (Juan et al. 2016, libffm ``ffm.cpp``);
:class:`ChunkCache` does
the same for one :func:`fmlearn.fit_stream` call: the first epoch writes each parsed chunk's
arrays (CSR ``indptr``, ``indices``, ``data`` and the targets) to one file, atomically (a
temporary name, then ``os.replace``), in a private temporary folder; the later epochs read
the chunks back from it, in the same order, with the text offsets the checkpoints use. The
chunks read back are the chunks parsed (same arrays, same dtypes), so the fit is the same, bit
for bit. Each file's size and CRC-32 are kept in memory and checked when it is read: a
truncated or altered file is refused with ``ValueError`` naming it. The folder is removed
when the call ends, normally or not. Memory holds one chunk (plus the one being read ahead),
as when the text is read; the disk holds the parsed file once (8 bytes per non-zero in
float32, 12 in float64, plus 12 per row).
"""

import os
import shutil
import tempfile
import warnings
import zlib

import numpy as np
import scipy.sparse as sp

_PREFIX = "fmlearn-stream-cache-"


class ChunkCache:
    """Parsed chunks of one file source on disk, in a folder made in ``directory`` (None: the
    system's temporary folder). :meth:`chunks` wraps an epoch's ``reopen(start)``: the first
    epoch read from the start records its chunks, later epochs read the records."""

    def __init__(self, directory=None):
        if directory is not None:
            directory = os.fspath(directory)
            if not os.path.isdir(directory):
                raise ValueError(f"cache folder not found: {directory!r}")
        self.folder = tempfile.mkdtemp(prefix=_PREFIX, dir=directory)
        self.entries = []  # (path, begin, end, n_rows, width, layout, size, crc)
        self.complete = False
        self.broken = False

    # -- writing --------------------------------------------------------------------------------
    def chunks(self, reopen, start):
        """The ``(chunk, begin, end)`` items of an epoch starting at text offset ``start``:
        from the cache once complete, else from ``reopen(start)``, recorded when the epoch
        reads the whole file (``start`` 0) and nothing was recorded yet."""
        if self.complete:
            from .datasets._libffm import prefetched

            return prefetched(self._read(start))
        if start == 0 and not self.entries and not self.broken:
            return self._record(reopen(0))
        return reopen(start)

    def _record(self, items):
        for item, begin, end in items:
            if not self.broken:
                self._write(item, begin, end)
            yield item, begin, end
        if not self.broken:
            self.complete = True

    def _write(self, item, begin, end):
        X, y = item[0], item[1]
        if len(item) != 2 or not sp.issparse(X) or X.format != "csr":
            self._give_up("its chunks are not (CSR matrix, targets) pairs")
            return
        parts = [np.ascontiguousarray(a) for a in (X.indptr, X.indices, X.data,
                                                   np.asarray(y))]
        layout = tuple((a.dtype.str, a.shape[0]) for a in parts) + (
            bool(X.has_sorted_indices),)
        path = os.path.join(self.folder, f"chunk-{len(self.entries):06d}.bin")
        crc = 0
        try:
            with open(path + ".tmp", "wb") as fh:
                for a in parts:
                    crc = zlib.crc32(memoryview(a).cast("B"), crc)
                    fh.write(memoryview(a).cast("B"))
            os.replace(path + ".tmp", path)
        except OSError as exc:
            self._give_up(f"writing {path!r} failed ({exc})")
            return
        size = sum(a.nbytes for a in parts)
        self.entries.append((path, begin, end, X.shape[0], X.shape[1], layout, size, crc))

    def _give_up(self, why):
        warnings.warn(f"fit_stream: the binary cache of the parsed chunks is not used ({why}); "
                      "every epoch parses the text", RuntimeWarning, stacklevel=4)
        self.broken = True
        self.entries = []
        self._clear()

    # -- reading --------------------------------------------------------------------------------
    def _read(self, start):
        for path, begin, end, n, width, layout, size, crc in self.entries:
            if begin is not None and begin < start:
                continue
            yield self._load(path, n, width, layout, size, crc), begin, end

    @staticmethod
    def _load(path, n, width, layout, size, crc):
        buf = bytearray(size + 1)  # writable: the kernels' signatures of parsed chunks
        try:
            with open(path, "rb") as fh:
                got = fh.readinto(buf)
        except OSError as exc:
            raise ValueError(f"fit_stream's binary cache file {path!r} cannot be read "
                             f"({exc})") from None
        if got != size or zlib.crc32(memoryview(buf)[:size]) != crc:
            raise ValueError(f"fit_stream's binary cache file {path!r} is corrupt ("
                             f"{got} bytes, expected {size}"
                             + (", checksum differs" if got == size else "")
                             + "): it was changed while the fit ran; fit again (or pass "
                               "cache=False to read the text every epoch)")
        arrays = []
        at = 0
        for code, length in layout[:4]:
            dt = np.dtype(code)
            arrays.append(np.frombuffer(buf, dtype=dt, count=length, offset=at))
            at += dt.itemsize * length
        indptr, indices, data, y = arrays
        X = sp.csr_matrix((data, indices, indptr), shape=(n, width), copy=False)
        if layout[4]:
            X.has_sorted_indices = True
        return X, y

    # -- clean-up -------------------------------------------------------------------------------
    def _clear(self):
        for entry in os.scandir(self.folder):
            try:
                os.unlink(entry.path)
            except OSError:
                pass

    def close(self):
        """Remove the folder and its files."""
        shutil.rmtree(self.folder, ignore_errors=True)
        self.entries = []
        self.complete = False


def make_cache(cache, source, n_epochs):
    """The :class:`ChunkCache` of a :func:`fmlearn.fit_stream` call, or None: ``cache`` True or
    a folder, a file source and more than one epoch to run."""
    if not isinstance(cache, (bool, np.bool_, str, os.PathLike)):
        raise TypeError(f"cache must be True, False or a folder path, got "
                        f"{type(cache).__name__}")
    if cache is False or cache is np.False_ or not isinstance(source, (str, os.PathLike)) \
            or n_epochs < 2:
        return None
    return ChunkCache(None if isinstance(cache, (bool, np.bool_)) else cache)
