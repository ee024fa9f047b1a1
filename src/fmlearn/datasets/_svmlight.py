"""svmlight / libFM text files, whole and in chunks, on top of scikit-learn's parser.

libFM's text format is the svmlight format: one sample per line, ``y idx:val idx:val ...``,
``#`` starts a comment. Parsing is scikit-learn's (:func:`sklearn.datasets.load_svmlight_file`,
which also opens ``.gz`` / ``.bz2`` files and reads byte ranges with ``offset`` / ``length``);
this module adds out-of-core chunks of a consistent width, error messages that name the file
and the offending line, and compressed / atomic writing.
"""

import bz2
import gzip
import os

import numpy as np
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from .._files import atomic_write
from ._svmlight_errors import (
    _PARSE_ERRORS,
    _STREAM_ERRORS,
    _check_finite,
    _check_width,
    _malformed,
)
from ._svmlight_lines import _compression, _is_data_line, _line_blocks, _parse

# Largest feature count the kernels accept (int32 indices); used as a provisional width when
# the true width is unknown and scikit-learn insists on one (offset/length reads).
_MAX_FEATURES = np.iinfo(np.int32).max


def _check_path(path):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"svmlight/libFM file not found: {os.fspath(path)!r}")
    return os.fspath(path)


def _check_zero_based(zero_based):
    if zero_based == "auto" or isinstance(zero_based, (bool, np.bool_)):
        return zero_based if zero_based == "auto" else bool(zero_based)
    raise ValueError(f"zero_based must be True, False or 'auto', got {zero_based!r}")


def _check_width_argument(name, value):
    """``n_features`` / ``max_features``: None or an int in [1, _MAX_FEATURES)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a positive int or None, got {value!r}")
    if not 1 <= value < _MAX_FEATURES:
        raise ValueError(f"{name} must be in [1, {_MAX_FEATURES - 1}], got {value}")
    return int(value)


def _top_two(indices):
    """The largest and the second largest distinct values of an index array (None if absent)."""
    if indices.shape[0] == 0:
        return None, None
    top = int(indices.max())
    rest = indices[indices != top]
    return top, (int(rest.max()) if rest.shape[0] else None)


def _merge_top(a, b):
    vals = sorted({v for v in (*a, *b) if v is not None}, reverse=True)
    return (vals + [None, None])[:2]


def load_svmlight(path, n_features=None, dtype=np.float64, zero_based="auto",
                  max_features=None):
    """Load a whole svmlight / libFM file into a CSR matrix and a target vector.

    Each line is one sample ``y idx:val idx:val ...`` (indices increasing; ``#`` starts a
    comment; an optional ``qid:...`` is ignored). This is libFM's text format. ``.gz`` and
    ``.bz2`` files are decompressed on the fly (chosen by the extension). Parsing is done by
    :func:`sklearn.datasets.load_svmlight_file`.

    Parameters
    ----------
    path : str or os.PathLike
        File to read.
    n_features : int, default=None
        Number of columns of ``X``. Pass the same value for a training and a test file so that
        they have the same width; ``None`` infers it from the largest index in the file.
    dtype : {np.float64, np.float32}, default=np.float64
        dtype of ``X``.
    zero_based : bool or "auto", default="auto"
        Whether indices start at 0 (libFM) or 1 (SVMlight, LIBSVM). ``"auto"`` treats the file
        as one-based when no index 0 occurs in it (scikit-learn's rule): with ``"auto"`` a
        zero-based file that happens to lack feature 0 is read shifted by one column, so pass
        the value explicitly when you know it.
    max_features : int, default=None
        Largest width the file may imply when ``n_features`` is None. Without it, a largest
        feature index more than 100 times the next largest one (and implying at least 65,536
        features) is refused as a likely typo: one such index would otherwise build a model
        of that many features (gigabytes) without a word.

    Returns
    -------
    X : scipy.sparse CSR matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), float64

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If a line is malformed, holds a NaN or infinite value, or uses a feature index beyond
        ``max_features`` or far beyond the rest of the file (the message names the file, the
        line number and the line), if the file has an index ``>= n_features``, or if a
        compressed file is corrupt.

    See Also
    --------
    iter_svmlight : the same file in chunks of bounded memory.
    save_svmlight : write ``(X, y)`` in this format.

    Examples
    --------
    >>> import os, tempfile
    >>> from fmlearn.datasets import load_svmlight
    >>> path = os.path.join(tempfile.mkdtemp(), "train.libfm")
    >>> with open(path, "w") as f:
    ...     _ = f.write("5 0:1 3:1\\n3 1:1 2:0.5\\n")
    >>> X, y = load_svmlight(path, zero_based=True)
    >>> X.shape, y.tolist()
    ((2, 4), [5.0, 3.0])
    """
    path = _check_path(path)
    zero_based = _check_zero_based(zero_based)
    n_features = _check_width_argument("n_features", n_features)
    max_features = _check_width_argument("max_features", max_features)
    try:
        X, y = load_svmlight_file(path, n_features=n_features, dtype=dtype, zero_based=zero_based)
    except _PARSE_ERRORS + _STREAM_ERRORS as exc:
        # With "auto" the file's base is unknown here; the most permissive base finds syntax
        # errors (an index too large for n_features is reported without a line number).
        zb = True if zero_based == "auto" else zero_based
        nf = None if zero_based == "auto" else n_features
        raise _malformed(path, exc, zb, nf, dtype) from None
    _check_finite(path, X, y)
    if n_features is None:
        _check_width(path, *_top_two(X.indices), max_features)
    return _narrow_indices(X), y


def _narrow_indices(X):
    """``X`` with int32 ``indices`` and ``indptr`` where they fit (scikit-learn's parser
    returns int64): the index dtypes the estimators' kernels take, so a fit reads the rows in
    place instead of narrowing a copy of them; 12 bytes per non-zero and 4 per row less
    (8,000,000 one-hot rows: 384 MB read instead of 576, 192 MB less)."""
    if X.indices.dtype != np.int32 and max(X.shape) < _MAX_FEATURES:
        X.indices = X.indices.astype(np.int32)
    if X.indptr.dtype != np.int32 and X.nnz < _MAX_FEATURES:
        X.indptr = X.indptr.astype(np.int32)
    return X


def _index_range(path, dtype, block_size, top_two=False):
    """(smallest, largest) raw feature index in the file, or None when it has no feature;
    with ``top_two``, (smallest, largest, second largest distinct)."""
    lo, top = None, (None, None)
    for _, block in _line_blocks(path, block_size):
        X, _ = _parse(block, True, None, dtype)
        if X.nnz:
            bmin = int(X.indices.min())
            lo = bmin if lo is None else min(lo, bmin)
            top = _merge_top(top, _top_two(X.indices))
    if lo is None:
        return None
    return (lo, top[0], top[1]) if top_two else (lo, top[0])


def iter_svmlight(
    path, chunk_size_bytes=64 * 2**20, n_features=None, dtype=np.float64, zero_based="auto",
    max_features=None,
):
    """Read a svmlight / libFM file in chunks of rows, for out-of-core (streaming) learning.

    Every chunk has the same number of columns, and the chunks, concatenated in order, equal
    :func:`load_svmlight` of the whole file (same rows, same order, same width). Only one
    chunk is held in memory at a time.

    How the file is cut:

    * Plain files are read with scikit-learn's ``offset`` / ``length`` arguments. With
      ``s_i`` the first line start at or after byte ``i * chunk_size_bytes``, chunk ``i``
      holds the lines that start in ``[s_i, s_{i+1})``. The ranges are aligned to line starts
      here (one seek per chunk) because scikit-learn's own rule, "skip the line holding byte
      ``offset``, stop after the line crossing ``offset + length``", reads a line twice when a
      range falls inside a single line (a chunk smaller than a line).
    * ``.gz`` and ``.bz2`` files cannot be cut that way: seeking in a compressed stream means
      decompressing it from the start, which would make the whole read quadratic. They are
      decompressed once, sequentially, and cut after the last line end of every
      ``chunk_size_bytes`` of decompressed data; ``chunk_size_bytes`` then counts
      decompressed bytes.

    Chunks with no row (a range inside one long line) are skipped.

    Parameters
    ----------
    path : str or os.PathLike
        File to read.
    chunk_size_bytes : int, default=64 MiB
        Approximate size of one chunk in bytes of text. A chunk of text takes roughly 1.5
        to 3 times that in memory once parsed.
    n_features : int, default=None
        Width of every chunk. ``None`` finds it with one extra pass over the file (so does
        ``zero_based="auto"``): pass both to read the file only once.
    dtype : {np.float64, np.float32}, default=np.float64
        dtype of the chunks.
    zero_based : bool or "auto", default="auto"
        As in :func:`load_svmlight`, but decided once for the whole file (a per-chunk guess
        could differ between chunks).
    max_features : int, default=None
        As in :func:`load_svmlight` (checked in the width pass, before the first chunk).

    Yields
    ------
    X : scipy.sparse CSR matrix of shape (n_chunk_samples, n_features)
    y : ndarray of shape (n_chunk_samples,), float64

    Raises
    ------
    ValueError
        As :func:`load_svmlight`: a malformed line, a NaN or infinite value, an outlying
        feature index (named by file and line number), an index ``>= n_features``, a corrupt
        compressed file.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from fmlearn.datasets import iter_svmlight, save_svmlight
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((1000, 5)) * (rng.random((1000, 5)) < 0.4)
    >>> path = os.path.join(tempfile.mkdtemp(), "data.libfm")
    >>> save_svmlight(X, np.arange(1000.0), path)
    >>> sizes = [Xc.shape for Xc, yc in iter_svmlight(path, chunk_size_bytes=8192,
    ...                                                 n_features=5, zero_based=True)]
    >>> sum(n for n, _ in sizes), {d for _, d in sizes}
    (1000, {5})
    """
    path = _check_path(path)
    zero_based = _check_zero_based(zero_based)
    n_features = _check_width_argument("n_features", n_features)
    if isinstance(chunk_size_bytes, (bool, np.bool_)) or not isinstance(
        chunk_size_bytes, (int, np.integer)
    ):
        raise TypeError(f"chunk_size_bytes must be an int, got {chunk_size_bytes!r}")
    if chunk_size_bytes < 1:
        raise ValueError(f"chunk_size_bytes must be >= 1, got {chunk_size_bytes}")
    chunk_size_bytes = int(chunk_size_bytes)
    max_features = _check_width_argument("max_features", max_features)
    return _iter_svmlight(path, chunk_size_bytes, n_features, dtype, zero_based, max_features)


def _line_ranges(path, chunk):
    """``(offset, length)`` arguments of scikit-learn's loader, one pair per chunk.

    Chunk ``i`` holds the lines starting in ``[s_i, s_{i+1})``, where ``s_{i+1}`` is the end
    of the first data line that starts after byte ``(i + 1) * chunk - 1``. Two quirks of
    scikit-learn's ``offset``/``length`` reader fix the rest:

    * it skips the line holding byte ``offset``, so ``offset = s_i - 1`` (the newline that
      ends the previous chunk is what gets skipped) and ``offset = 0`` for the first chunk;
    * it tests ``position > offset + length`` only after a data line, so after a comment or
      blank line it reads on into the next chunk. Every chunk therefore ends with a data line
      (the line ending at ``s_{i+1}``), and ``offset + length = s_{i+1} - 1`` stops exactly
      there. The last chunk reads to the end (``length = -1``).
    """
    size = os.path.getsize(path)
    starts = [0]
    with open(path, "rb") as f:
        for b in range(chunk, size, chunk):
            if b <= starts[-1]:
                continue
            f.seek(b - 1)
            f.readline()  # the rest of the line holding byte b - 1
            while True:
                line = f.readline()
                if not line or _is_data_line(line):
                    break
            s = f.tell()
            if not line or s >= size:
                break
            starts.append(s)
    ranges = []
    for i, s in enumerate(starts):
        offset = max(s - 1, 0)
        length = starts[i + 1] - 1 - offset if i + 1 < len(starts) else -1
        ranges.append((offset, length))
    return ranges


def _iter_svmlight(path, chunk, n_features, dtype, zero_based, max_features):
    # A generator apart from the checks above, so that bad arguments fail at the call.
    for X, y, _, _ in _iter_positioned(path, chunk, n_features, dtype, zero_based,
                                       max_features):
        yield X, y


def _iter_positioned(path, chunk, n_features, dtype, zero_based, max_features, start=0):
    """The chunks of :func:`iter_svmlight` as ``(X, y, begin, end)``: the byte range of the
    file (of the decompressed stream for ``.gz`` / ``.bz2``) the chunk's lines come from,
    ``end`` being where the next chunk begins. ``start``, the ``begin`` (or the last ``end``)
    of a chunk of an earlier read with the same ``chunk``, skips the chunks before it without
    parsing them (for a resumed stream, :func:`fmlearn.stream.fit_stream`); any other value
    is refused."""
    if n_features is None or zero_based == "auto":
        try:
            # Blocks of 1 to 16 MiB: no more memory than asked for, few parser calls.
            rng = _index_range(path, dtype, min(max(chunk, 1 << 20), 1 << 24), top_two=True)
        except _PARSE_ERRORS + _STREAM_ERRORS as exc:
            zb = True if zero_based == "auto" else zero_based
            raise _malformed(path, exc, zb, None, dtype) from None
        if zero_based == "auto":
            # scikit-learn's rule for a whole file: one-based unless index 0 occurs.
            zero_based = not (rng is not None and rng[0] > 0)
        width = 1 if rng is None else rng[1] + (1 if zero_based else 0)
        if n_features is None:
            if rng is not None:
                shift = 0 if zero_based else 1
                _check_width(path, rng[1] - shift,
                             None if rng[2] is None else rng[2] - shift, max_features)
            n_features = width
        elif n_features < width:
            raise ValueError(
                f"n_features={n_features} is too small for {path!r}: it has feature index "
                f"{rng[1]} ({'zero' if zero_based else 'one'}-based), which needs "
                f"n_features >= {width}"
            )

    def fail(exc):
        return _malformed(path, exc, zero_based, n_features, dtype)

    rows = 0
    if _compression(path) is None:
        size = os.path.getsize(path)
        ranges = _line_ranges(path, chunk)
        begins = [0] + [offset + 1 for offset, _ in ranges[1:]]
        ends = begins[1:] + [size]
        _check_start(path, start, begins + [size])
        for (offset, length), begin, end in zip(ranges, begins, ends, strict=True):
            if begin < start:
                continue
            try:
                X, y = load_svmlight_file(
                    path,
                    n_features=n_features,
                    dtype=dtype,
                    zero_based=zero_based,
                    offset=offset,
                    length=length,
                )
            except _PARSE_ERRORS as exc:
                raise fail(exc) from None
            _check_finite(path, X, y, rows)
            rows += X.shape[0]
            if X.shape[0]:
                yield X, y, begin, end
    else:
        blocks = _line_blocks(path, chunk)
        end = 0
        while True:
            begin = end
            try:
                _, block = next(blocks)
                end = begin + len(block)
                if end <= start:  # decompressed (it must be) but not parsed
                    continue
                _check_start(path, start, (begin,))
                X, y = _parse(block, zero_based, n_features, dtype)
            except StopIteration:
                _check_start(path, start, (0, begin))
                return
            except _PARSE_ERRORS + _STREAM_ERRORS as exc:
                raise fail(exc) from None
            _check_finite(path, X, y, rows)
            rows += X.shape[0]
            if X.shape[0]:
                yield X, y, begin, end
            start = 0


def _check_start(path, start, boundaries):
    if start and start not in boundaries:
        raise ValueError(f"{path!r}: byte offset {start} is not where a chunk begins (was the "
                         "file or chunk_size_bytes changed since the offset was recorded?)")


def save_svmlight(X, y, path, zero_based=True, comment=None):
    """Write ``(X, y)`` as a svmlight / libFM text file.

    A thin wrapper of :func:`sklearn.datasets.dump_svmlight_file` that compresses by the
    extension (``.gz``, ``.bz2``, like the loaders) and writes atomically: the data go to a
    temporary file in the same folder which is then renamed over ``path``, so an interrupted
    write never leaves a truncated file behind. scikit-learn writes values with 16 significant
    digits: numbers that have at most 16 (integers, one-hot data, decimals that came from a text
    file) come back exactly, other float64 values within a relative 1e-15.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    path : str or os.PathLike
    zero_based : bool, default=True
        Write indices from 0 (libFM's convention) or from 1 (SVMlight / LIBSVM).
    comment : str, default=None
        Written as ``#`` lines at the top of the file.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from fmlearn.datasets import load_svmlight, save_svmlight
    >>> path = os.path.join(tempfile.mkdtemp(), "a.libfm.bz2")
    >>> save_svmlight(np.array([[0.0, 2.5], [1.0, 0.0]]), [1.0, -1.0], path)
    >>> X, y = load_svmlight(path, n_features=2, zero_based=True)
    >>> X.toarray().tolist(), y.tolist()
    ([[0.0, 2.5], [1.0, 0.0]], [1.0, -1.0])
    """
    kind = _compression(path)
    with atomic_write(path) as raw:
        if kind == "gzip":
            with gzip.GzipFile(fileobj=raw, mode="wb", filename="") as out:
                dump_svmlight_file(X, y, out, zero_based=zero_based, comment=comment)
        elif kind == "bz2":
            with bz2.BZ2File(raw, "wb") as out:
                dump_svmlight_file(X, y, out, zero_based=zero_based, comment=comment)
        else:
            dump_svmlight_file(X, y, raw, zero_based=zero_based, comment=comment)
