"""libFM's binary data files and its block structure ("BS") for relational data.

libFM 1.4 (Rendle 2012, "Factorization Machines with libFM"; the ``-relation`` option of
Rendle 2013, "Scaling factorization machines to relational data") reads, besides its text
format:

* a **sparse matrix** file (libFM's ``convert`` writes ``.x``, ``transpose`` writes ``.xt``):
  a 24-byte header -- ``uint32 id = 2``, ``uint32 float_size = 4``, ``uint64 num_values``,
  ``uint32 num_rows``, ``uint32 num_cols`` -- then per row ``uint32 size`` and ``size`` entries
  ``(uint32 column, float32 value)``; little-endian as written on x86. ``.xt`` holds the
  transpose (one row per feature);
* a **dense vector** (``.y``, the targets): ``uint32 version = 1``, ``uint32 value_size = 4``,
  ``uint32 n``, then ``n`` float32;
* for a relation ``NAME`` (``-relation NAME``): the block's matrix ``NAME.x`` / ``NAME.xt``
  (one row per block row), the block row of every training and test sample ``NAME.train`` /
  ``NAME.test`` (text: one non-negative integer per sample; or binary: a dense vector of
  uint32, ``value_size = 4``) and optionally ``NAME.groups`` (text: the group of each of the
  block's features).

The readers check everything against the file's size before reading it and refuse a
malformed, truncated or crafted file with a ``ValueError`` naming it; they return float64 CSR
matrices and int64 indices. The writers write atomically (:func:`fmlearn._files.atomic_write`).
Values are float32 in these files, as in libFM: a float64 matrix is rounded on the way.
"""

import os

import numpy as np
import scipy.sparse as sp

from .._files import atomic_write

__all__ = ["load_libfm_binary", "load_libfm_matrix", "load_libfm_relation",
           "load_libfm_vector", "read_relation_index", "save_libfm_binary",
           "save_libfm_matrix", "save_libfm_relation"]

MATRIX_ID = 2  # libFM's FMATRIX_EXPECTED_FILE_ID
VECTOR_ID = 1  # libFM's DVECTOR_EXPECTED_FILE_ID
_HEADER = np.dtype([("id", "<u4"), ("float_size", "<u4"), ("num_values", "<u8"),
                    ("num_rows", "<u4"), ("num_cols", "<u4")])
_MAX_U32 = np.iinfo(np.uint32).max


def _read_bytes(path, what):
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} file not found: {path}")
    if not os.path.isfile(path):
        raise ValueError(f"{path}: not a regular file")
    with open(path, "rb") as fh:
        return fh.read()


def load_libfm_matrix(path):
    """A sparse matrix file of libFM (``.x`` or ``.xt``, as ``convert`` / ``transpose`` write
    it) as a float64 CSR matrix with the file's rows and columns.

    Raises ``ValueError`` naming ``path`` when the header is not libFM's (id 2, 4-byte
    floats), the size does not match the header, a row runs past the end, a column index is
    out of range or a value is not finite. Duplicate columns within a row are summed."""
    buf = _read_bytes(path, "libFM matrix")
    if len(buf) < _HEADER.itemsize:
        raise ValueError(f"{path}: too short for a libFM binary matrix ({len(buf)} bytes)")
    h = np.frombuffer(buf, dtype=_HEADER, count=1)[0]
    if int(h["id"]) != MATRIX_ID or int(h["float_size"]) != 4:
        raise ValueError(f"{path}: not a libFM binary matrix (header id {int(h['id'])}, "
                         f"float size {int(h['float_size'])}; expected 2 and 4, as libFM's "
                         "convert and transpose write)")
    n_rows, n_cols, nnz = int(h["num_rows"]), int(h["num_cols"]), int(h["num_values"])
    expected = _HEADER.itemsize + 4 * n_rows + 8 * nnz
    if len(buf) != expected:
        raise ValueError(f"{path}: {len(buf)} bytes, but its header ({n_rows} rows, {nnz} "
                         f"values) needs {expected}: the file is truncated or not libFM's")
    words = np.frombuffer(buf, dtype="<u4", offset=_HEADER.itemsize)
    sizes = np.empty(n_rows, dtype=np.int64)
    starts = np.empty(n_rows, dtype=np.int64)
    view = memoryview(words)  # element access without NumPy scalars: a row costs ~0.1 us
    p = 0
    total = len(words)
    for r in range(n_rows):
        if p >= total:
            raise ValueError(f"{path}: row {r} starts past the end of the file")
        s = view[p]
        starts[r] = p + 1
        sizes[r] = s
        p += 1 + 2 * s
    if p != total or int(sizes.sum()) != nnz:
        raise ValueError(f"{path}: the rows' sizes ({int(sizes.sum())} values) do not match "
                         f"the header ({nnz} values)")
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    pos = np.repeat(starts - 2 * indptr[:-1], sizes) + 2 * np.arange(nnz, dtype=np.int64)
    cols = words[pos].astype(np.int64)
    vals = words[pos + 1].view("<f4").astype(np.float64)
    if nnz and cols.max() >= n_cols:
        bad = int(np.flatnonzero(cols >= n_cols)[0])
        row = int(np.searchsorted(indptr, bad, side="right") - 1)
        raise ValueError(f"{path}: row {row} holds column {int(cols[bad])}, outside the "
                         f"header's {n_cols} columns")
    if not np.all(np.isfinite(vals)):
        raise ValueError(f"{path}: a value is NaN or infinite")
    X = sp.csr_matrix((vals, cols, indptr), shape=(n_rows, n_cols))
    X.sum_duplicates()
    return X


def load_libfm_vector(path, dtype="<f4"):
    """A dense vector file of libFM (``.y``: float32; relation indices: uint32) as float64
    (or int64 for ``dtype="<u4"``); ``ValueError`` naming ``path`` when malformed."""
    buf = _read_bytes(path, "libFM vector")
    item = np.dtype(dtype).itemsize
    if len(buf) < 12:
        raise ValueError(f"{path}: too short for a libFM binary vector ({len(buf)} bytes)")
    version, size, n = (int(v) for v in np.frombuffer(buf, dtype="<u4", count=3))
    if version != VECTOR_ID or size != item:
        raise ValueError(f"{path}: not a libFM binary vector of {item}-byte values (header "
                         f"version {version}, value size {size})")
    if len(buf) != 12 + item * n:
        raise ValueError(f"{path}: {len(buf)} bytes, but its header ({n} values) needs "
                         f"{12 + item * n}: the file is truncated or not libFM's")
    out = np.frombuffer(buf, dtype=dtype, offset=12, count=n)
    if out.dtype.kind == "f":
        out = out.astype(np.float64)
        if not np.all(np.isfinite(out)):
            raise ValueError(f"{path}: a value is NaN or infinite")
        return out
    return out.astype(np.int64)


def _binary_prefix(prefix):
    return os.path.exists(prefix + ".y") and (os.path.exists(prefix + ".x")
                                              or os.path.exists(prefix + ".xt"))


def _samples_matrix(prefix, what):
    """The samples' matrix of ``prefix`` from ``.x`` (else the transpose of ``.xt``); both
    present must agree."""
    X = XT = None
    if os.path.exists(prefix + ".x"):
        X = load_libfm_matrix(prefix + ".x")
    if os.path.exists(prefix + ".xt"):
        XT = load_libfm_matrix(prefix + ".xt")
    if X is None and XT is None:
        raise FileNotFoundError(f"{what}: neither {prefix}.x nor {prefix}.xt exists")
    if X is not None and XT is not None:
        if XT.shape != X.shape[::-1] or XT.nnz != X.nnz or (X != XT.T.tocsr()).nnz:
            raise ValueError(f"{prefix}.x and {prefix}.xt do not hold the same matrix "
                             f"({X.shape} with {X.nnz} values against the transpose of "
                             f"{XT.shape} with {XT.nnz})")
        return X
    return X if X is not None else XT.T.tocsr()


def load_libfm_binary(prefix):
    """The samples ``(X, y)`` of libFM's binary data ``prefix.x`` / ``prefix.xt`` and
    ``prefix.y`` (what ``convert --ifile F --ofilex prefix.x --ofiley prefix.y`` and
    ``transpose --ifile prefix.x --ofile prefix.xt`` write): X float64 CSR, one row per sample.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np, scipy.sparse as sp
    >>> from fmlearn.datasets import load_libfm_binary, save_libfm_binary
    >>> prefix = os.path.join(tempfile.mkdtemp(), "train")
    >>> save_libfm_binary(prefix, sp.csr_matrix([[1.0, 0.0], [0.0, 0.5]]), [3.0, 4.0])
    >>> X, y = load_libfm_binary(prefix)
    >>> X.toarray().tolist(), y.tolist()
    ([[1.0, 0.0], [0.0, 0.5]], [3.0, 4.0])
    """
    prefix = os.fspath(prefix)
    X = _samples_matrix(prefix, "libFM binary data")
    y = load_libfm_vector(prefix + ".y")
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"{prefix}.y holds {y.shape[0]} targets but the matrix has "
                         f"{X.shape[0]} rows")
    return X, y


def read_relation_index(path, n_rows=None):
    """The block row of every sample from a relation's ``NAME.train`` / ``NAME.test``: text
    (one non-negative integer per sample) or libFM's binary vector of uint32, as libFM tells
    them apart (a binary file starts with version 1 and value size 4). With ``n_rows``, the
    file must hold exactly that many (the rows of its data file)."""
    path = os.fspath(path)
    buf = _read_bytes(path, "relation index")
    head = np.frombuffer(buf[:8], dtype="<u4") if len(buf) >= 8 else np.zeros(0)
    if head.shape[0] == 2 and int(head[0]) == VECTOR_ID and int(head[1]) == 4:
        idx = load_libfm_vector(path, "<u4")
    else:
        try:
            text = buf.decode("ascii")
        except UnicodeDecodeError:
            raise ValueError(f"{path}: neither a text file of block indices nor libFM's binary "
                             "vector") from None
        tokens = text.split()
        try:
            idx = np.array([int(t) for t in tokens], dtype=np.int64)
        except ValueError:
            bad = next(t for t in tokens if not t.lstrip("-").isdigit())
            raise ValueError(f"{path}: expected one integer block index per sample, got "
                             f"{bad[:40]!r}") from None
        if idx.size and idx.min() < 0:
            raise ValueError(f"{path}: block indices must be >= 0, got {int(idx.min())}")
    if n_rows is not None and idx.shape[0] != n_rows:
        raise ValueError(f"{path} holds {idx.shape[0]} block indices but its data file has "
                         f"{n_rows} rows (one index per sample)")
    return idx


def _read_groups(path, n_features):
    tokens = _read_bytes(path, "groups").decode("ascii", errors="replace").split()
    try:
        groups = np.array([int(t) for t in tokens], dtype=np.int64)
    except ValueError:
        raise ValueError(f"{path}: expected one integer group id per feature") from None
    if groups.shape[0] != n_features or (groups.size and groups.min() < 0):
        raise ValueError(f"{path}: {groups.shape[0]} group ids for {n_features} features "
                         "(one id >= 0 per feature of the relation)")
    return groups


def load_libfm_relation(name, n_rows=None):
    """A relation of libFM's block structure: ``(X_block, indices, groups)``.

    ``X_block`` (float64 CSR, one row per block row) comes from ``name.x`` (or the transpose
    of ``name.xt``; both present must agree); ``indices`` maps each index file of the
    relation that exists (``"train"``: ``name.train``, ``"test"``: ``name.test``) to its
    block rows (int64), checked against ``X_block``'s rows and, when ``n_rows`` gives the
    expected count per file (e.g. ``{"train": 75000, "test": 25000}``), against it; ``groups``
    the ids of ``name.groups`` (None when absent). Every error names its file."""
    name = os.fspath(name)
    X = _samples_matrix(name, f"relation {name}")
    n_rows = dict(n_rows or {})
    indices = {}
    for part in ("train", "test"):
        path = f"{name}.{part}"
        if not os.path.exists(path):
            if part in n_rows:
                raise FileNotFoundError(f"relation {name}: {path} not found (the block row "
                                        f"of each {part} sample)")
            continue
        idx = read_relation_index(path, n_rows.get(part))
        if idx.size and idx.max() >= X.shape[0]:
            bad = int(np.flatnonzero(idx >= X.shape[0])[0])
            raise ValueError(f"{path}: sample {bad} has block index {int(idx[bad])}, but "
                             f"{name}'s matrix has {X.shape[0]} rows")
        indices[part] = idx
    groups = _read_groups(name + ".groups", X.shape[1]) if os.path.exists(
        name + ".groups") else None
    return X, indices, groups


# -- writing --------------------------------------------------------------------------------
def save_libfm_matrix(path, X):
    """Write ``X`` (rows as they are) as libFM's binary sparse matrix (float32 values)."""
    X = sp.csr_matrix(X)
    X.sum_duplicates()
    X.eliminate_zeros()
    n_rows, n_cols = X.shape
    if max(n_rows, n_cols) > _MAX_U32:
        raise ValueError(f"shape {X.shape} exceeds libFM's 32-bit sizes")
    head = np.zeros(1, dtype=_HEADER)
    head["id"], head["float_size"], head["num_values"] = MATRIX_ID, 4, X.nnz
    head["num_rows"], head["num_cols"] = n_rows, n_cols
    sizes = np.diff(X.indptr).astype("<u4")
    body = np.empty(n_rows + 2 * X.nnz, dtype="<u4")
    starts = np.arange(n_rows) + 2 * X.indptr[:-1]
    body[starts] = sizes
    pos = np.repeat(starts + 1 - 2 * X.indptr[:-1], np.diff(X.indptr)) + 2 * np.arange(X.nnz)
    body[pos] = X.indices.astype("<u4")
    body[pos + 1] = X.data.astype("<f4").view("<u4")
    with atomic_write(path) as fh:
        fh.write(head.tobytes())
        fh.write(body.tobytes())


def _save_vector(path, values, dtype):
    values = np.asarray(values, dtype=dtype)
    with atomic_write(path) as fh:
        fh.write(np.array([VECTOR_ID, 4, values.shape[0]], dtype="<u4").tobytes())
        fh.write(values.tobytes())


def save_libfm_binary(prefix, X, y):
    """Write ``(X, y)`` as libFM's binary data: ``prefix.x``, ``prefix.xt`` (the transpose,
    which libFM's MCMC and ALS read) and ``prefix.y`` -- what ``convert`` then ``transpose``
    make of a text file. Values become float32."""
    prefix = os.fspath(prefix)
    X = sp.csr_matrix(X)
    y = np.asarray(y, dtype=np.float64).ravel()
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} entries but X has {X.shape[0]} rows")
    save_libfm_matrix(prefix + ".x", X)
    save_libfm_matrix(prefix + ".xt", X.T.tocsr())
    _save_vector(prefix + ".y", y, "<f4")


def save_libfm_relation(name, X_block, indices, groups=None):
    """Write a relation for libFM's ``-relation name``: the block's matrix ``name.x`` and
    ``name.xt``, one index file per entry of ``indices`` (e.g. ``{"train": idx_train, "test":
    idx_test}``: ``name.train``, ``name.test``, text, one block row per line) and, with
    ``groups`` (one id per block feature), ``name.groups``.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np, scipy.sparse as sp
    >>> from fmlearn.datasets import load_libfm_relation, save_libfm_relation
    >>> name = os.path.join(tempfile.mkdtemp(), "user")
    >>> save_libfm_relation(name, sp.identity(3, format="csr"), {"train": [0, 2, 2, 1]})
    >>> X, idx, groups = load_libfm_relation(name, n_rows={"train": 4})
    >>> X.shape, idx["train"].tolist(), groups
    ((3, 3), [0, 2, 2, 1], None)
    """
    name = os.fspath(name)
    X = sp.csr_matrix(X_block)
    for part, idx in indices.items():
        idx = np.asarray(idx)
        if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= X.shape[0])):
            raise ValueError(f"indices[{part!r}] must be 1-D block rows in [0, {X.shape[0]})")
    save_libfm_matrix(name + ".x", X)
    save_libfm_matrix(name + ".xt", X.T.tocsr())
    for part, idx in indices.items():
        text = "\n".join(str(int(v)) for v in np.asarray(idx).tolist())
        with atomic_write(f"{name}.{part}") as fh:
            fh.write((text + "\n" if text else "").encode("ascii"))
    if groups is not None:
        groups = np.asarray(groups, dtype=np.int64)
        if groups.shape != (X.shape[1],) or (groups.size and groups.min() < 0):
            raise ValueError(f"groups must hold one id >= 0 per block feature ({X.shape[1]})")
        with atomic_write(name + ".groups") as fh:
            fh.write(("\n".join(str(int(g)) for g in groups) + "\n").encode("ascii"))
