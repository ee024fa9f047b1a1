"""libffm text files (LIBFFM's ``label field:feature:value ...``), whole and in chunks.

One sample per line: a label, then tokens ``field:feature:value`` with zero-based field and
feature indices (Juan et al. 2016; the format of LIBFFM and xLearn). The reader returns a CSR
matrix, the labels and the **feature-to-field map** (``fields[j]`` is feature j's field), the
``fields=`` of :class:`fmlearn.FFMClassifier`. A feature belongs to one field: a file that puts
a feature in two fields is refused, naming both lines. Blank lines and text after ``#`` are
skipped; ``.gz`` and ``.bz2`` files are decompressed on the fly (chosen by the extension).

**Hashing** (``hash_buckets=B``): feature ids of unbounded vocabularies (raw ids, hashes of
strings) are mapped to ``field * B + h(id) mod B``, B columns per field, so the width is
``n_fields * B`` whatever the ids; ids that collide in a row have their values summed.

Errors (a malformed token, a missing field, an empty part, a NaN, a feature in two fields, a
feature or field beyond the given map) raise ``ValueError`` naming the file and the line, as
:func:`fmlearn.datasets.load_svmlight` does. The scanning is compiled (``._libffm_text``).
"""

import bz2
import gzip
import math
import os
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._files import atomic_write
from ._svmlight_errors import OUTLIER_FACTOR, OUTLIER_MIN_WIDTH, _shown
from ._svmlight_lines import _compression, _open_binary

__all__ = ["LibffmInfo", "hashed_fields", "iter_libffm", "load_libffm", "load_libffm_files",
           "save_libffm", "scan_libffm"]

_MAX_FEATURES = np.iinfo(np.int32).max
DEFAULT_CHUNK = 64 * 2**20
# bytes read from the file at a time when a whole file is loaded
_LOAD_BLOCK = 16 * 2**20
_DEFERRED = 4096


def _check_path(path):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"libffm file not found: {os.fspath(path)!r}")
    return os.fspath(path)


def _positive_int(name, value, upper=_MAX_FEATURES):
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a positive int or None, got {value!r}")
    if not 1 <= value < upper:
        raise ValueError(f"{name} must be in [1, {upper - 1}], got {value}")
    return int(value)


def hashed_fields(n_fields, hash_buckets):
    """The feature-to-field map of hashed libffm data: ``hash_buckets`` columns per field,
    field after field (``np.repeat(np.arange(n_fields), hash_buckets)``).

    Examples
    --------
    >>> from fmlearn.datasets import hashed_fields
    >>> hashed_fields(2, 3).tolist()
    [0, 0, 0, 1, 1, 1]
    """
    n_fields = _positive_int("n_fields", n_fields)
    hash_buckets = _positive_int("hash_buckets", hash_buckets)
    if n_fields * hash_buckets >= _MAX_FEATURES:
        raise ValueError(f"n_fields * hash_buckets = {n_fields * hash_buckets} columns exceed "
                         "the int32 index range of the kernels")
    return np.repeat(np.arange(n_fields, dtype=np.int32), hash_buckets)


def check_field_map(fields, what="fields", unknown=False):
    """``fields`` as an int32 array of field ids >= 0 (and -1, a feature of unknown field, with
    ``unknown``); ``ValueError`` naming the problem."""
    arr = np.asarray(fields)
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise ValueError(f"{what} must be a non-empty 1-D array of field ids (one per "
                         f"feature), got shape {arr.shape}")
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{what} must hold integer field ids, got dtype {arr.dtype}")
    low = -1 if unknown else 0
    if arr.min() < low or arr.max() >= _MAX_FEATURES:
        bad = int(np.flatnonzero((arr < low) | (arr >= _MAX_FEATURES))[0])
        raise ValueError(f"{what}[{bad}] = {int(arr[bad])} is not a valid field id (ids are "
                         "0, 1, 2, ...)")
    return arr.astype(np.int32)


# -- blocks of whole lines ------------------------------------------------------------------
def _blocks(path, size, start=0):
    """Yield ``(begin, bytes)``: blocks of whole lines of the (decompressed) file from byte
    ``start`` (a line start), ``begin`` their offset. A block is the lines that end within
    ``size`` bytes of its begin (or, for a longer line, that line), so its extent depends on
    its begin only: a read resumed at a block's begin cuts the same blocks as an
    uninterrupted one (``fit_stream``'s checkpoints). Line numbers are counted only when a
    message needs one (:func:`_line_at`)."""
    with _open_binary(path) as f:
        if start:
            if _compression(path) is None:
                f.seek(start)
            else:
                left = start
                while left:
                    chunk = f.read(min(left, 1 << 24))
                    if not chunk:
                        break
                    left -= len(chunk)
        begin = start
        carry = b""
        while True:
            # read into a fresh buffer after the carried-over line start: no copy of the data
            buf = bytearray(max(size, len(carry)))
            buf[:len(carry)] = carry
            with memoryview(buf) as view:
                got = len(carry) + (f.readinto(view[len(carry):]) or 0)
            if got == 0:
                return
            eof = got < len(buf)
            cut = buf.rfind(b"\n", 0, min(size, got)) + 1
            if cut == 0:  # no line ends within size bytes: the block is the first line
                del buf[got:]
                end = buf.find(b"\n")
                while end < 0 and not eof:
                    more = f.read(size)
                    eof = len(more) < size
                    buf += more
                    end = buf.find(b"\n")
                got = len(buf)
                cut = end + 1 if end >= 0 else got
            yield begin, memoryview(buf)[:cut]
            begin += cut
            carry = bytes(buf[cut:got])
            if eof and not carry:
                return


def _line_at(path, offset):
    """The 1-based number of the line starting at byte ``offset`` of the (decompressed)
    file: one more than the line ends before it (read again: only for an error message)."""
    line = 1
    with _open_binary(path) as f:
        left = offset
        while left:
            chunk = f.read(min(left, 1 << 24))
            if not chunk:
                break
            line += chunk.count(b"\n")
            left -= len(chunk)
    return line


class _Error(Exception):
    """A problem found in a block: its message and the byte offset of its line."""

    def __init__(self, message, offset):
        super().__init__(message)
        self.offset = offset


def _fail(path, begin, block, offset, message):
    no = _line_at(path, begin + offset)
    block = bytes(block)
    end = block.find(b"\n", offset)
    line = block[offset:end if end >= 0 else len(block)]
    return ValueError(f"libffm file {path!r}, line {no}: {message} (the line reads "
                      f"{_shown(line)!r})")


def _line_of_row(path, row):
    """``(line number, line)`` of data row ``row`` (0-based) of the file, or (None, b"")."""
    i = -1
    first = 1
    for _, block in _blocks(path, 1 << 22):
        lines = bytes(block).split(b"\n")
        for no, line in enumerate(lines, start=first):
            if line.split(b"#", 1)[0].split():
                i += 1
                if i == row:
                    return no, line
        first += len(lines) - 1
    return None, b""


class _Parser:
    """The state of one read: the feature-to-field map (given, growing or hashed), the width,
    the rows read so far, and the conversion of a block to ``(X, y)``."""

    def __init__(self, path, *, fields=None, n_features=None, hash_buckets=None,
                 n_fields=None, dtype=np.float64, max_features=None):
        self.path = path
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float64, np.float32):
            raise ValueError(f"dtype must be float64 or float32, got {self.dtype}")
        self.hash_buckets = _positive_int("hash_buckets", hash_buckets)
        self.n_fields = _positive_int("n_fields", n_fields)
        self.max_features = _positive_int("max_features", max_features)
        self.rows = 0
        self.width_given = None
        self.earlier = None  # the file an inherited map comes from (load_libffm_files)
        if self.hash_buckets is not None:
            if fields is not None:
                raise ValueError("give either fields or hash_buckets: hashed data have the "
                                 "map hashed_fields(n_fields, hash_buckets)")
            self.fixed = True
            self.fmap = None if self.n_fields is None else hashed_fields(self.n_fields,
                                                                          self.hash_buckets)
        elif fields is not None:
            self.fixed = True
            self.fmap = check_field_map(fields, unknown=True).astype(np.int64)
            if n_features is not None and int(n_features) != self.fmap.shape[0]:
                raise ValueError(f"n_features={n_features} differs from len(fields)="
                                 f"{self.fmap.shape[0]}")
            if self.n_fields is not None and int(self.fmap.max()) >= self.n_fields:
                raise ValueError(f"fields uses field {int(self.fmap.max())}, beyond "
                                 f"n_fields={self.n_fields}")
        else:
            self.fixed = False
            n_features = _positive_int("n_features", n_features)
            self.width_given = n_features
            self.fmap = np.full(n_features if n_features else 1024, -1, np.int64)
            self.first_row = np.full(self.fmap.shape[0], -1, np.int64)
        if self.fixed:
            self.first_row = np.zeros(1 if self.fmap is None else self.fmap.shape[0], np.int64)

    # -- one block ----------------------------------------------------------------------------
    def _parse(self, block):
        from ._libffm_text import FULL, MESSAGES, OK, parse_block, parsed_buffers

        buf = np.frombuffer(block, dtype=np.uint8)
        out = parsed_buffers(buf)
        deferred = np.empty((_DEFERRED, 3), np.int64)
        while True:
            rows, nnz, nd, code, line, a, b = parse_block(buf, out, deferred)
            if code != FULL:
                break
            deferred = np.empty((out.field.shape[0] + out.y.shape[0], 3), np.int64)
        if code != OK:
            token = bytes(block[a:b]).decode("utf-8", errors="replace")
            raise _Error(MESSAGES[code].format(token=token), line)
        for e, a, b in deferred[:nd]:
            text = bytes(block[a:b]).decode("utf-8", errors="replace")
            row = -1 - e if e < 0 else int(np.searchsorted(out.indptr[1:rows + 1], e,
                                                            side="right"))
            try:
                value = float(text)
            except ValueError:
                what = "label" if e < 0 else "value"
                raise _Error(f"{what} {text!r} is not a number", out.line_start[row]) from None
            if not math.isfinite(value):
                raise _Error(f"a value is NaN or infinite ({text!r}); fmlearn needs finite "
                             "numbers", out.line_start[row])
            if e < 0:
                out.y[row] = value
            else:
                out.value[e] = value
        return out, rows, nnz

    def _row_of(self, out, rows, e):
        return int(np.searchsorted(out.indptr[1:rows + 1], e, side="right"))

    def block(self, begin, block):
        """``(X, y)`` of one block of whole lines starting at byte ``begin`` of the file (X of
        the width known so far when the map is not fixed: the caller widens); raises
        ``ValueError`` naming the file and line."""
        try:
            return self._block(block)
        except _Error as exc:
            raise _fail(self.path, begin, block, int(exc.offset), str(exc)) from None

    def _block(self, block):
        from ._libffm_text import assign_fields, check_fields, hashed_columns, sort_rows

        out, rows, nnz = self._parse(block)
        field, feature = out.field[:nnz], out.feature[:nnz]
        if self.hash_buckets is not None:
            if self.n_fields is None:
                raise ValueError("hashing needs n_fields")
            cols = np.empty(nnz, np.int64)
            bad = hashed_columns(field, feature, nnz, self.n_fields, self.hash_buckets, cols)
            if bad >= 0:
                raise _Error(f"field {int(field[bad])} is beyond n_fields={self.n_fields}",
                             out.line_start[self._row_of(out, rows, bad)])
            width = self.n_fields * self.hash_buckets
        else:
            if not self.fixed and nnz:
                top = int(feature.max())
                if top >= self.fmap.shape[0]:
                    if self.width_given is not None:
                        e = int(np.argmax(feature))
                        raise _Error(f"feature {top} is beyond n_features={self.width_given}",
                                     out.line_start[self._row_of(out, rows, e)])
                    if top >= _MAX_FEATURES - 1:
                        e = int(np.argmax(feature))
                        raise _Error(f"feature index {top} exceeds the int32 range of the "
                                     "kernels (use hash_buckets)",
                                     out.line_start[self._row_of(out, rows, e)])
                    size = max(top + 1, 2 * self.fmap.shape[0])
                    self.fmap = np.concatenate([self.fmap, np.full(size - self.fmap.shape[0],
                                                                   -1, np.int64)])
                    self.first_row = np.concatenate([self.first_row, np.full(
                        size - self.first_row.shape[0], -1, np.int64)])
            if self.fixed:  # a given map: one pass, the row found only for a message
                code, e = check_fields(field, feature, nnz, self.fmap)
            else:
                code, e = assign_fields(field, feature, nnz, self.fmap, self.first_row,
                                        out.indptr, self.rows, self.fixed)
            if code:
                row = self._row_of(out, rows, e)
                j, f = int(feature[e]), int(field[e])
                if code == 1:
                    msg = (f"feature {j} is beyond the {self.fmap.shape[0]} features of the "
                           "field map")
                else:
                    have = int(self.fmap[j])
                    if self.fixed:
                        msg = (f"feature {j} is in field {f} here but in field {have} in the "
                               "given map (a feature belongs to one field)")
                    elif self.first_row[j] < 0:
                        msg = (f"feature {j} is in field {f} here but in field {have} in "
                               f"{self.earlier!r} (a feature belongs to one field)")
                    else:
                        no, _ = _line_of_row(self.path, int(self.first_row[j]))
                        msg = (f"feature {j} is in field {f} here but in field {have} on "
                               f"line {no} (a feature belongs to one field)")
                raise _Error(msg, out.line_start[row])
            if self.n_fields is not None and nnz and int(field.max()) >= self.n_fields:
                e = int(np.argmax(field))
                raise _Error(f"field {int(field[e])} is beyond n_fields={self.n_fields}",
                             out.line_start[self._row_of(out, rows, e)])
            cols = feature  # the block's own buffer: sorted in place
            width = self.fmap.shape[0]
        values = out.value[:nnz]
        indptr = out.indptr[:rows + 1]
        nnz, bad = sort_rows(indptr, cols, values, rows, self.hash_buckets is not None)
        if bad >= 0:
            raise _Error("a feature appears twice on the line", out.line_start[bad])
        cols, values = cols[:nnz], values[:nnz]
        keep = values != 0
        if not keep.all():  # explicit zeros: dropped, as fmlearn._data.to_csr does
            kept = np.concatenate([[0], np.cumsum(keep)])
            indptr = kept[indptr].astype(np.int64)
            cols, values = cols[keep], values[keep]
        self.rows += rows
        X = sp.csr_matrix((values.astype(self.dtype), cols.astype(np.int32), indptr.copy()),
                          shape=(rows, width))
        return X, out.y[:rows].copy()

    # -- the map at the end -----------------------------------------------------------------
    def final_fields(self, width=None):
        """The feature-to-field map after the file (``width`` features): features never
        seen go to field 0; a field id that no feature uses is refused."""
        if self.fixed:
            return self.fmap.astype(np.int32)
        fmap = self.fmap[:width] if width is not None else self.fmap
        seen = fmap >= 0
        if not seen.any():
            return np.zeros(fmap.shape[0], np.int32)
        used = np.unique(fmap[seen])
        n_fields = int(used[-1]) + 1 if self.n_fields is None else self.n_fields
        missing = np.setdiff1d(np.arange(n_fields), used)
        if missing.shape[0]:
            raise ValueError(f"libffm file {self.path!r}: field {int(missing[0])} has no "
                             f"feature (fields {used.tolist()[:10]}"
                             f"{'...' if used.shape[0] > 10 else ''} occur): fields must be "
                             "numbered 0, 1, ... without gaps (or pass n_fields and fields)")
        return np.where(seen, fmap, 0).astype(np.int32)

    def check_width(self, width):
        """The outlier rule of the svmlight reader: a largest feature far beyond the next one
        (likely a typo that would build a model of that many features) is refused unless
        ``max_features`` allows it."""
        if self.fixed or self.width_given is not None:
            return
        seen = np.flatnonzero(self.fmap[:width] >= 0)
        if seen.shape[0] == 0:
            return
        largest = int(seen[-1])
        if self.max_features is not None:
            if largest + 1 <= self.max_features:
                return
            why = f"more than max_features={self.max_features}"
        else:
            ref = max(1, int(seen[-2]) if seen.shape[0] > 1 else 0)
            if largest + 1 < OUTLIER_MIN_WIDTH or largest <= OUTLIER_FACTOR * ref:
                return
            why = (f"{largest // ref}x the next largest feature {ref}; pass max_features "
                   "(or n_features, or hash_buckets) to accept it")
        no, line = _line_of_row(self.path, int(self.first_row[largest]))
        raise ValueError(f"libffm file {self.path!r}, line {no}: feature {largest} would make "
                         f"a model of {largest + 1} features, {why} (the line reads "
                         f"{_shown(line)!r})")


def _widen(X, width):
    if X.shape[1] == width:
        return X
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], width))


def _read_all(parser, path, block_size):
    Xs, ys = [], []
    try:
        for begin, block in _blocks(path, block_size):
            X, y = parser.block(begin, block)
            Xs.append(X)
            ys.append(y)
    except (OSError, EOFError) as exc:
        raise ValueError(f"cannot read {path!r}: the {_compression(path) or 'file'} stream is "
                         f"corrupt or truncated ({exc})") from None
    return Xs, ys


def _width_of(parser, Xs):
    if parser.fixed or parser.hash_buckets is not None:
        return parser.fmap.shape[0] if parser.fmap is not None else max(
            (X.shape[1] for X in Xs), default=1)
    if parser.width_given is not None:
        return parser.width_given
    seen = np.flatnonzero(parser.fmap >= 0)
    return int(seen[-1]) + 1 if seen.shape[0] else 1


def _hash_fields(path, n_fields):
    """n_fields of a hashed read: given, else found by a pass over the file (the largest
    field + 1; raw feature ids are not collected, they may be any integers)."""
    if n_fields is not None:
        return n_fields
    parser = _Parser(path)
    top = -1
    try:
        for begin, block in _blocks(path, _LOAD_BLOCK):
            try:
                out, _, nnz = parser._parse(block)
            except _Error as exc:
                raise _fail(path, begin, block, int(exc.offset), str(exc)) from None
            if nnz:
                top = max(top, int(out.field[:nnz].max()))
    except (OSError, EOFError) as exc:
        raise ValueError(f"cannot read {path!r}: corrupt or truncated file ({exc})") from None
    if top < 0:
        raise ValueError(f"libffm file {path!r} has no feature: cannot find its n_fields")
    return top + 1


def load_libffm(path, *, fields=None, n_features=None, hash_buckets=None, n_fields=None,
                dtype=np.float64, max_features=None):
    """Load a whole libffm file: the CSR matrix, the labels and the feature-to-field map.

    Parameters
    ----------
    path : str or os.PathLike
        File to read (``.gz`` / ``.bz2`` decompressed on the fly).
    fields : array-like of int, optional
        A known feature-to-field map (a fitted model's ``known_fields_``, or the map of the
        training file): ``X`` then has ``len(fields)`` columns, and a feature beyond it or in
        another field is refused; an entry -1 (a feature the model never saw) accepts any
        field. None: the map is read from the file.
    n_features : int, optional
        Width of ``X`` when the map is read from the file (None: the largest feature + 1).
    hash_buckets : int, optional
        The hashing trick: column ``field * hash_buckets + hash(feature) % hash_buckets``
        (feature ids may then be any integers below 2^62). The map is
        :func:`hashed_fields` ``(n_fields, hash_buckets)``.
    n_fields : int, optional
        Number of fields; with ``hash_buckets`` None finds it with a first pass over the file.
    dtype : {np.float64, np.float32}, default=np.float64
        dtype of ``X`` (float32 halves memory; the FFM then learns in float32, as LIBFFM).
    max_features : int, optional
        Largest width the file may imply when the map is read from it. Without it, a largest
        feature more than 100 times the next largest one (implying at least 65,536 features)
        is refused as a likely typo, as by :func:`~fmlearn.datasets.load_svmlight`.

    Returns
    -------
    X : scipy.sparse CSR matrix of shape (n_samples, n_features)
        Indices sorted, no explicit zeros.
    y : ndarray of shape (n_samples,), float64
        The labels as written (LIBFFM reads ``label > 0`` as a click; fmlearn's classifiers
        take any two labels).
    fields : ndarray of shape (n_features,), int32
        ``fields[j]`` is feature j's field. Features that do not occur are put in field 0.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        A malformed line (a token without a field, an empty part, junk, a NaN), a feature in
        two fields, a field with no feature, a feature repeated on a line (without
        hashing), a feature or field beyond ``fields`` / ``n_features`` / ``n_fields``: the
        message names the file and the line. A corrupt compressed file.

    Examples
    --------
    >>> import os, tempfile
    >>> from fmlearn.datasets import load_libffm
    >>> path = os.path.join(tempfile.mkdtemp(), "train.ffm")
    >>> with open(path, "w") as f:
    ...     _ = f.write("1 0:0:1 1:3:1\\n0 0:1:1 1:2:0.5\\n")
    >>> X, y, fields = load_libffm(path)
    >>> X.toarray().tolist(), y.tolist(), fields.tolist()
    ([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.5, 0.0]], [1.0, 0.0], [0, 0, 1, 1])
    """
    path = _check_path(path)
    if hash_buckets is not None:
        n_fields = _hash_fields(path, _positive_int("n_fields", n_fields))
    parser = _Parser(path, fields=fields, n_features=n_features, hash_buckets=hash_buckets,
                     n_fields=n_fields, dtype=dtype, max_features=max_features)
    Xs, ys = _read_all(parser, path, _LOAD_BLOCK)
    width = _width_of(parser, Xs)
    parser.check_width(width)
    fmap = parser.final_fields(width)
    if Xs:
        X = sp.vstack([_widen(X, width) for X in Xs], format="csr")
        y = np.concatenate(ys)
    else:
        X = sp.csr_matrix((0, width), dtype=parser.dtype)
        y = np.zeros(0)
    X.indices = X.indices.astype(np.int32, copy=False)
    return X, y, fmap


def load_libffm_files(paths, *, fields=None, hash_buckets=None, n_fields=None,
                      dtype=np.float64, max_features=None):
    """Load several libffm files (training, validation, test) with one width and one
    feature-to-field map: a feature must be in the same field in every file.

    Returns ``[X_1, y_1, X_2, y_2, ..., fields]`` (as scikit-learn's
    ``load_svmlight_files``); see :func:`load_libffm` for the arguments.

    Examples
    --------
    >>> import os, tempfile
    >>> from fmlearn.datasets import load_libffm_files
    >>> d = tempfile.mkdtemp()
    >>> for name, text in (("tr.ffm", "1 0:0:1 1:2:1\\n"), ("te.ffm", "0 0:1:1 1:3:1\\n")):
    ...     with open(os.path.join(d, name), "w") as f:
    ...         _ = f.write(text)
    >>> X_tr, y_tr, X_te, y_te, fields = load_libffm_files(
    ...     [os.path.join(d, "tr.ffm"), os.path.join(d, "te.ffm")])
    >>> X_tr.shape, X_te.shape, fields.tolist()
    ((1, 4), (1, 4), [0, 0, 1, 1])
    """
    if isinstance(paths, (str, os.PathLike)):
        raise TypeError("paths must be a list of paths (use load_libffm for one file)")
    paths = [_check_path(p) for p in paths]
    if not paths:
        raise ValueError("paths is empty")
    if hash_buckets is not None and n_fields is None:
        n_fields = max(_hash_fields(p, None) for p in paths)
    parsers, parts = [], []
    for path in paths:
        parser = _Parser(path, fields=fields, hash_buckets=hash_buckets, n_fields=n_fields,
                         dtype=dtype, max_features=max_features)
        if parsers and not parser.fixed:
            # one map for all files: this file continues the previous one's
            parser.fmap = parsers[-1].fmap
            parser.first_row = np.full(parser.fmap.shape[0], -1, np.int64)
            parser.earlier = parsers[-1].path
        parts.append(_read_all(parser, path, _LOAD_BLOCK))
        parsers.append(parser)
    last = parsers[-1]
    width = max(_width_of(p, xs) for p, (xs, _) in zip(parsers, parts, strict=True))
    for p in parsers:
        p.check_width(width)
    fmap = last.final_fields(width) if not last.fixed else last.fmap.astype(np.int32)
    out = []
    for (Xs, ys), p in zip(parts, parsers, strict=True):
        if Xs:
            X = sp.vstack([_widen(X, width) for X in Xs], format="csr")
            y = np.concatenate(ys)
        else:
            X, y = sp.csr_matrix((0, width), dtype=p.dtype), np.zeros(0)
        X.indices = X.indices.astype(np.int32, copy=False)
        out += [X, y]
    return out + [fmap]


class LibffmInfo(NamedTuple):
    """What a pass over a libffm file finds (:func:`scan_libffm`)."""

    n_rows: int
    n_features: int
    n_fields: int
    fields: np.ndarray  # (n_features,) int32, or None for a hashed scan
    labels: np.ndarray  # the distinct labels


def scan_libffm(path, *, chunk_size_bytes=DEFAULT_CHUNK, max_features=None):
    """One pass over a libffm file (or several, with one map), checking every line: the rows,
    width, fields, feature-to-field map and labels, in the memory of one chunk (for
    streaming: the map a model needs before its first batch).

    Examples
    --------
    >>> import os, tempfile
    >>> from fmlearn.datasets import scan_libffm
    >>> path = os.path.join(tempfile.mkdtemp(), "a.ffm")
    >>> with open(path, "w") as f:
    ...     _ = f.write("1 0:0:1 1:3:1\\n-1 0:1:1 1:2:1\\n")
    >>> info = scan_libffm(path)
    >>> info.n_rows, info.n_features, info.n_fields, info.fields.tolist(), info.labels.tolist()
    (2, 4, 2, [0, 0, 1, 1], [-1.0, 1.0])
    """
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    paths = [_check_path(p) for p in paths]
    chunk = _positive_int("chunk_size_bytes", chunk_size_bytes, 1 << 62)
    labels = set()
    rows = 0
    parser = None
    for p in paths:
        previous = parser
        parser = _Parser(p, max_features=max_features)
        if previous is not None:  # one map for all files
            parser.fmap = previous.fmap
            parser.first_row = np.full(parser.fmap.shape[0], -1, np.int64)
            parser.earlier = previous.path
        try:
            for begin, block in _blocks(p, chunk):
                _, y = parser.block(begin, block)
                labels.update(np.unique(y).tolist())
        except (OSError, EOFError) as exc:
            raise ValueError(f"cannot read {p!r}: corrupt or truncated file ({exc})") from None
        rows += parser.rows
    width = _width_of(parser, [])
    parser.check_width(width)
    fmap = parser.final_fields(width)
    n_fields = int(fmap.max()) + 1 if fmap.shape[0] else 0
    return LibffmInfo(rows, width, n_fields, fmap, np.array(sorted(labels)))


def iter_libffm(path, chunk_size_bytes=DEFAULT_CHUNK, *, fields=None, hash_buckets=None,
                n_fields=None, dtype=np.float64, max_features=None):
    """Read a libffm file in chunks of rows, for out-of-core learning
    (:func:`fmlearn.fit_stream`); one chunk in memory at a time.

    Every chunk has the same width and the chunks, stacked, equal :func:`load_libffm` of the
    file. Without ``fields`` or ``hash_buckets`` the map is found by a first pass
    (:func:`scan_libffm`); pass it (``fields=info.fields``) to read the file once.

    Parameters
    ----------
    path : str or os.PathLike
    chunk_size_bytes : int, default=64 MiB
        Bytes of (decompressed) text per chunk, cut at line ends.
    fields, hash_buckets, n_fields, dtype, max_features :
        As in :func:`load_libffm`.

    Yields
    ------
    X : CSR matrix of shape (n_chunk_samples, n_features)
    y : ndarray of shape (n_chunk_samples,)

    Examples
    --------
    >>> import os, tempfile
    >>> from fmlearn.datasets import iter_libffm
    >>> path = os.path.join(tempfile.mkdtemp(), "a.ffm")
    >>> with open(path, "w") as f:
    ...     _ = f.write("".join(f"{i % 2} 0:{i % 5}:1 1:{5 + i % 3}:1\\n" for i in range(100)))
    >>> [X.shape for X, y in iter_libffm(path, chunk_size_bytes=500)][:2]
    [(35, 8), (35, 8)]
    """
    path = _check_path(path)
    chunk = _positive_int("chunk_size_bytes", chunk_size_bytes, 1 << 62)
    opts = dict(fields=fields, hash_buckets=hash_buckets, n_fields=n_fields, dtype=dtype,
                max_features=max_features)
    _Parser(path, **{**opts, "n_fields": n_fields or (1 if hash_buckets else None)})  # checks
    return _iter(path, chunk, opts)


def _iter(path, chunk, opts):
    for X, y, _, _ in iter_positioned(path, chunk, **opts):
        yield X, y


def prefetched(items):
    """Yield the items of the iterator ``items``, each next one computed in a background
    thread while the caller works on the current one (at most one item ahead). The libffm
    parser and the FFM's epoch kernel release the GIL, so on two cores a streamed epoch
    parses its next chunk while it learns from this one; the items and their order are those
    of ``items``, an exception raised there is raised here, and closing this generator stops
    the thread."""
    import queue
    import threading

    q = queue.Queue(maxsize=1)
    stop = threading.Event()

    def put(message):
        while not stop.is_set():
            try:
                q.put(message, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work():
        try:
            for item in items:
                if not put(("item", item)):
                    return
            put(("done", None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            put(("error", exc))

    thread = threading.Thread(target=work, name="fmlearn-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "done":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


def iter_positioned(path, chunk, start=0, *, fields=None, hash_buckets=None, n_fields=None,
                    dtype=np.float64, max_features=None, prefetch=False):
    """The chunks of :func:`iter_libffm` as ``(X, y, begin, end)``, ``begin`` / ``end`` the
    byte range of the (decompressed) text they come from; ``start`` (a chunk's ``begin`` of
    an earlier read with the same ``chunk``) resumes there (:func:`fmlearn.fit_stream`'s
    checkpoints). With ``prefetch`` the next chunk is read and parsed in a background thread
    (:func:`prefetched`; one more chunk in memory)."""
    if prefetch:
        yield from prefetched(iter_positioned(
            path, chunk, start, fields=fields, hash_buckets=hash_buckets, n_fields=n_fields,
            dtype=dtype, max_features=max_features))
        return
    if hash_buckets is not None:
        n_fields = _hash_fields(path, n_fields)
    elif fields is None:
        fields = scan_libffm(path, chunk_size_bytes=chunk, max_features=max_features).fields
    parser = _Parser(path, fields=fields, hash_buckets=hash_buckets, n_fields=n_fields,
                     dtype=dtype)
    try:
        for begin, block in _blocks(path, chunk, start):
            X, y = parser.block(begin, block)
            if X.shape[0]:
                yield X, y, begin, begin + len(block)
    except (OSError, EOFError) as exc:
        raise ValueError(f"cannot read {path!r}: corrupt or truncated file ({exc})") from None


# -- writing --------------------------------------------------------------------------------
def _number_text(values):
    """(-1 or row in a text table) per value and the table: whole numbers below 2^53 are
    written as integers by the kernel, others as Python's shortest round-trip repr."""
    values = np.asarray(values, dtype=np.float64)
    whole = (values == np.floor(values)) & (np.abs(values) < 2.0**53) & ~(
        (values == 0) & np.signbit(values))
    index = np.full(values.shape[0], -1, np.int64)
    other = np.flatnonzero(~whole)
    index[other] = np.arange(other.shape[0])
    texts = [repr(float(v)).encode("ascii") for v in values[other]]
    return index, texts


def save_libffm(X, y, fields, path, chunk_rows=100_000):
    """Write ``(X, y)`` with the feature-to-field map ``fields`` as a libffm text file.

    Compressed by the extension (``.gz``, ``.bz2``) and written atomically (a temporary file
    renamed over ``path``). Whole numbers are written as integers, other values in Python's
    shortest form that reads back to the same double, so :func:`load_libffm` returns the same
    data (float32 values exactly, as float64).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from fmlearn.datasets import load_libffm, save_libffm
    >>> path = os.path.join(tempfile.mkdtemp(), "a.ffm.gz")
    >>> save_libffm(np.array([[1.0, 0.0, 0.25], [0.0, 2.0, 0.0]]), [1, 0], [0, 0, 1], path)
    >>> X, y, fields = load_libffm(path)
    >>> X.toarray().tolist(), y.tolist(), fields.tolist()
    ([[1.0, 0.0, 0.25], [0.0, 2.0, 0.0]], [1.0, 0.0], [0, 0, 1])
    """
    from .._data import check_sparse_structure
    from ._libffm_text import format_rows

    check_sparse_structure(X)
    X = sp.csr_matrix(X)
    X.sum_duplicates()
    X.eliminate_zeros()
    y = np.asarray(y, dtype=np.float64).ravel()
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} entries but X has {X.shape[0]} rows")
    fmap = check_field_map(fields)
    if fmap.shape[0] != X.shape[1]:
        raise ValueError(f"fields has {fmap.shape[0]} entries but X has {X.shape[1]} columns")
    if X.nnz and not np.all(np.isfinite(X.data)) or not np.all(np.isfinite(y)):
        raise ValueError("X or y contains NaN or infinity")
    kind = _compression(path)
    with atomic_write(os.fspath(path)) as raw:
        if kind == "gzip":
            out = gzip.GzipFile(fileobj=raw, mode="wb", filename="")
        elif kind == "bz2":
            out = bz2.BZ2File(raw, "wb")
        else:
            out = raw
        try:
            for a in range(0, X.shape[0], chunk_rows):
                part = X[a:a + chunk_rows]
                yi, ytexts = _number_text(y[a:a + chunk_rows])
                vi, vtexts = _number_text(part.data)
                texts = ytexts + vtexts
                vi[vi >= 0] += len(ytexts)
                width = max([len(t) for t in texts], default=1)
                table = np.zeros((max(1, len(texts)), width), np.uint8)
                for r, t in enumerate(texts):
                    table[r, :len(t)] = np.frombuffer(t, np.uint8)
                ids = part.indices.astype(np.int64)
                num = max(width, 21)  # a number: its text, or up to 20 digits and a sign
                size = part.shape[0] * (num + 1) + part.nnz * (3 + 2 * 20 + num)
                buf = np.empty(size, np.uint8)
                n = format_rows(part.indptr.astype(np.int64), ids, part.data.astype(np.float64),
                                y[a:a + chunk_rows], fmap.astype(np.int64), vi, yi, table, buf)
                out.write(buf[:n].tobytes())
        finally:
            if out is not raw:
                out.close()
