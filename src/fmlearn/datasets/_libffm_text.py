"""Compiled text kernels of the libffm reader and writer (:mod:`._libffm`).

No maintained library parses LIBFFM's format (``label field:feature:value ...``; scikit-learn's
svmlight parser reads two-part tokens only), so this module scans the bytes itself, a block
of whole lines at a time, at the speed of the file system: the reader must keep up with an
FFM epoch when streaming (``fmlearn.fit_stream``). A number is converted exactly (Clinger's
fast path: at most 19 significant digits and a decimal exponent within +-22, one correctly
rounded multiplication or division by an exact power of ten, as ``strtod`` rounds); any other
number ("1.00000000000000000001", "1e300", "nan") is handed back to Python's ``float`` as a
deferred token, which also decides whether it is junk. A problem stops the scan with a code
and the byte offsets of its line and token; :mod:`._libffm` turns them into a message naming
the file and the line.
"""

from collections import namedtuple

import numpy as np

from ..kernels._jit import njit

OK = 0
NO_FIELD = 1       # a token with one colon (svmlight's index:value)
BAD_TOKEN = 2      # no colon, or more than two
EMPTY_PART = 3     # an empty field, feature or value
BAD_INTEGER = 4    # a field or feature that is not a non-negative integer
TOO_LARGE = 5      # an integer beyond 2^62
FULL = 6           # the deferred-token buffer is full (the caller retries with a larger one)

MESSAGES = {
    NO_FIELD: "token {token!r} has no field: expected 'field:feature:value' (is this a "
              "svmlight/libFM file? read it with fmlearn.datasets.load_svmlight)",
    BAD_TOKEN: "token {token!r} is not 'field:feature:value'",
    EMPTY_PART: "token {token!r} has an empty field, feature or value",
    BAD_INTEGER: "token {token!r}: field and feature must be non-negative integers",
    TOO_LARGE: "token {token!r}: field or feature index too large",
}

# powers of ten exactly representable in float64
_POW10 = np.array([10.0 ** i for i in range(23)])
_LIMIT = 1 << 62

Parsed = namedtuple("Parsed", ["y", "indptr", "field", "feature", "value", "line_start"])
Parsed.__doc__ = """One parsed block: labels (float64), row pointers (int64), per entry its
field and raw feature id (int64) and value (float64), and the byte offset of each row's line
in the block."""


def parsed_buffers(buf):
    """:class:`Parsed` arrays large enough for the block ``buf`` (uint8): rows <= lines,
    and entries <= (bytes - lines) / 6, a token being at least five bytes ("0:1:1") and a
    separator."""
    lines = int(np.count_nonzero(buf == 10))
    rows = lines + 1
    nnz = (buf.shape[0] - lines) // 6 + 1
    return Parsed(np.empty(rows), np.zeros(rows + 1, np.int64), np.empty(nnz, np.int64),
                  np.empty(nnz, np.int64), np.empty(nnz), np.empty(rows, np.int64))


@njit(cache=True, nogil=True)
def _is_space(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@njit(cache=True, nogil=True)
def _ends_token(c):
    """A byte that ends a token: white space, a line end or a comment."""
    return c == 32 or c == 9 or c == 10 or c == 13 or c == 35 or c == 11 or c == 12


@njit(cache=True, nogil=True)
def _scan_number(buf, p, n, pow10):
    """Read a decimal number from ``buf[p:]``; returns ``(ok, value, end)``, ``end`` the
    first byte after it. ``ok`` is False when the exact fast path does not apply (too many
    digits, a large exponent, no digit); the caller then defers the whole token."""
    neg = False
    if p < n and (buf[p] == 43 or buf[p] == 45):  # + -
        neg = buf[p] == 45
        p += 1
    mant = 0
    digits = 0
    seen = 0
    exp10 = 0
    exact = True
    while p < n:
        c = buf[p]
        if c < 48 or c > 57:
            break
        if mant != 0 or c != 48:
            digits += 1
            if digits > 19:
                exact = False
            else:
                mant = mant * 10 + (c - 48)
        seen += 1
        p += 1
    if p < n and buf[p] == 46:  # .
        p += 1
        while p < n:
            c = buf[p]
            if c < 48 or c > 57:
                break
            if mant != 0 or c != 48:
                digits += 1
                if digits > 19:
                    exact = False
                else:
                    mant = mant * 10 + (c - 48)
                    exp10 -= 1
            else:
                exp10 -= 1
            seen += 1
            p += 1
    if seen == 0:
        return False, 0.0, p
    if p < n and (buf[p] == 101 or buf[p] == 69):  # e E
        p += 1
        eneg = False
        if p < n and (buf[p] == 43 or buf[p] == 45):
            eneg = buf[p] == 45
            p += 1
        e = 0
        ed = 0
        while p < n and 48 <= buf[p] <= 57:
            if e < 100000:
                e = e * 10 + (buf[p] - 48)
            ed += 1
            p += 1
        if ed == 0:
            return False, 0.0, p
        exp10 += -e if eneg else e
    if not exact:
        return False, 0.0, p
    if mant == 0:
        return True, -0.0 if neg else 0.0, p
    if mant >= (1 << 53) or exp10 < -22 or exp10 > 22:
        return False, 0.0, p
    v = float(mant)
    v = v * pow10[exp10] if exp10 >= 0 else v / pow10[-exp10]
    return True, -v if neg else v, p


@njit(cache=True, nogil=True)
def _token_end(buf, p, n):
    while p < n and not _ends_token(buf[p]):
        p += 1
    return p


@njit(cache=True, nogil=True)
def _classify(buf, a, b):
    """The problem of the malformed token buf[a:b] (the slow path, once per file); OK when
    only its value is unusual (more digits, letters: for Python's float to judge)."""
    c1 = -1
    c2 = -1
    for p in range(a, b):
        if buf[p] == 58:
            if c1 < 0:
                c1 = p
            elif c2 < 0:
                c2 = p
            else:
                return BAD_TOKEN
    if c1 < 0:
        return BAD_TOKEN
    if c2 < 0:
        return NO_FIELD
    if c1 == a or c2 == c1 + 1 or c2 + 1 == b:
        return EMPTY_PART
    for lo, hi in ((a, c1), (c1 + 1, c2)):
        v = 0
        for p in range(lo, hi):
            if buf[p] < 48 or buf[p] > 57:
                return BAD_INTEGER
            v = v * 10 + (buf[p] - 48)
            if v > _LIMIT:
                return TOO_LARGE
    return OK


@njit(cache=True, nogil=True)
def _bad(buf, a, b):
    """The code of a token whose field or feature did not scan (never OK)."""
    code = _classify(buf, a, b)
    return BAD_INTEGER if code == OK else code


@njit(cache=True, nogil=True)
def parse_block(buf, out, deferred):
    """Scan the whole lines of ``buf`` into ``out`` (:class:`Parsed`) in one pass. Blank lines
    and text after ``#`` are skipped. A number the fast path cannot convert is stored as 0 and
    listed in ``deferred`` as (entry, start, end), entry -1 - row for a label.

    Returns ``(rows, nnz, n_deferred, code, line_start, token_start, token_end)``; ``code``
    is OK or the first problem, found on the line starting at byte ``line_start``.
    """
    n = buf.shape[0]
    pow10 = _POW10
    rows = 0
    nnz = 0
    nd = 0
    p = 0
    while p < n:
        start = p
        while p < n and _is_space(buf[p]):
            p += 1
        if p == n:
            break
        c = buf[p]
        if c == 10 or c == 35:  # blank or comment line
            while p < n and buf[p] != 10:
                p += 1
            p += 1
            continue
        a = p
        ok, v, p = _scan_number(buf, p, n, pow10)
        if not ok or (p < n and not _ends_token(buf[p])):
            p = _token_end(buf, a, n)
            if nd == deferred.shape[0]:
                return rows, nnz, nd, FULL, start, a, p
            deferred[nd, 0] = -1 - rows
            deferred[nd, 1] = a
            deferred[nd, 2] = p
            nd += 1
            v = 0.0
        out.y[rows] = v
        out.line_start[rows] = start
        while True:
            while p < n and _is_space(buf[p]):
                p += 1
            if p == n:
                break
            c = buf[p]
            if c == 10:
                p += 1
                break
            if c == 35:
                while p < n and buf[p] != 10:
                    p += 1
                p += 1
                break
            a = p
            f = 0
            while p < n and 48 <= buf[p] <= 57 and f <= _LIMIT:
                f = f * 10 + (buf[p] - 48)
                p += 1
            if p == a or p == n or buf[p] != 58 or f > _LIMIT:
                b = _token_end(buf, a, n)
                return rows, nnz, nd, _bad(buf, a, b), start, a, b
            p += 1
            q = p
            j = 0
            while p < n and 48 <= buf[p] <= 57 and j <= _LIMIT:
                j = j * 10 + (buf[p] - 48)
                p += 1
            if p == q or p == n or buf[p] != 58 or j > _LIMIT:
                b = _token_end(buf, a, n)
                return rows, nnz, nd, _bad(buf, a, b), start, a, b
            p += 1
            q = p
            if p + 1 < n and buf[p] == 49 and _ends_token(buf[p + 1]):  # the usual "1"
                v = 1.0
                p += 1
            else:
                ok, v, p = _scan_number(buf, p, n, pow10)
                if not ok or (p < n and not _ends_token(buf[p])):
                    p = _token_end(buf, q, n)
                    code = EMPTY_PART if p == q else _classify(buf, a, p)
                    if code != OK:
                        return rows, nnz, nd, code, start, a, p
                    if nd == deferred.shape[0]:
                        return rows, nnz, nd, FULL, start, a, p
                    deferred[nd, 0] = nnz
                    deferred[nd, 1] = q
                    deferred[nd, 2] = p
                    nd += 1
                    v = 0.0
            out.field[nnz] = f
            out.feature[nnz] = j
            out.value[nnz] = v
            nnz += 1
        rows += 1
        out.indptr[rows] = nnz
    return rows, nnz, nd, OK, 0, 0, 0


# -- columns and fields ---------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _mix(j):
    """splitmix64's finaliser of the feature id: a well-spread 64-bit hash."""
    z = np.uint64(j) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def hashed_columns(field, feature, nnz, n_fields, buckets, out):
    """Column ``field * buckets + hash(feature) % buckets`` of each entry into ``out``;
    returns the first entry whose field is ``>= n_fields`` or -1."""
    b = np.uint64(buckets)
    for e in range(nnz):
        f = field[e]
        if f >= n_fields:
            return e
        out[e] = f * buckets + np.int64(_mix(feature[e]) % b)
    return -1


@njit(cache=True, nogil=True)
def assign_fields(field, feature, nnz, fmap, first_row, indptr, row0, fixed):
    """Check every entry's field against the feature-to-field map ``fmap`` (-1: not seen
    yet), recording the fields of new features and the row (``row0`` + the row in this block)
    where each was first seen; with ``fixed`` (a given map) -1 accepts any field. Returns
    ``(code, entry)``: 0 and -1, or 1 (the feature is beyond ``fmap``), 2 (the field differs
    from the feature's field) for the first bad entry."""
    d = fmap.shape[0]
    r = 0
    for e in range(nnz):
        while indptr[r + 1] <= e:
            r += 1
        j = feature[e]
        if j >= d:
            return 1, e
        f = fmap[j]
        if f < 0:
            if fixed:  # a given map's -1: the feature's field is not known, any is accepted
                continue
            fmap[j] = field[e]
            first_row[j] = row0 + r
        elif f != field[e]:
            return 2, e
    return 0, -1


@njit(cache=True, nogil=True)
def check_fields(field, feature, nnz, fmap):
    """:func:`assign_fields` for a given map: ``(code, entry)`` of the first entry beyond the
    map (1) or in another field than the map's (2; -1 in the map accepts any), else (0, -1)."""
    d = fmap.shape[0]
    for e in range(nnz):
        j = feature[e]
        if j >= d:
            return 1, e
        f = fmap[j]
        if f >= 0 and f != field[e]:
            return 2, e
    return 0, -1


@njit(cache=True, nogil=True)
def sort_rows(indptr, cols, values, n_rows, sum_duplicates):
    """Sort each row's entries by column (insertion sort: rows are short) and merge repeated
    columns (their values summed) when ``sum_duplicates``, else stop at the first repeated
    column. Returns ``(nnz, row)``: the new number of entries (rows compacted in place,
    ``indptr`` updated) and -1, or the row holding a repeated column. Rows already sorted
    without repeats (a file written in column order) cost one read-only pass."""
    ordered = True
    for i in range(n_rows):
        for p in range(indptr[i] + 1, indptr[i + 1]):
            if cols[p] <= cols[p - 1]:
                ordered = False
                break
        if not ordered:
            break
    if ordered:
        return indptr[n_rows], -1
    w = 0
    start = indptr[0]
    for i in range(n_rows):
        end = indptr[i + 1]
        for p in range(start + 1, end):
            c = cols[p]
            v = values[p]
            q = p - 1
            while q >= start and cols[q] > c:
                cols[q + 1] = cols[q]
                values[q + 1] = values[q]
                q -= 1
            cols[q + 1] = c
            values[q + 1] = v
        row_start = w
        for p in range(start, end):
            if w > row_start and cols[w - 1] == cols[p]:
                if not sum_duplicates:
                    return w, i
                values[w - 1] += values[p]
            else:
                cols[w] = cols[p]
                values[w] = values[p]
                w += 1
        start = end
        indptr[i + 1] = w
    return w, -1


# -- writing --------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _put_int(out, p, v):
    if v == 0:
        out[p] = 48
        return p + 1
    tmp = np.empty(20, np.uint8)
    n = 0
    while v > 0:
        tmp[n] = 48 + v % 10
        v //= 10
        n += 1
    for t in range(n):
        out[p + t] = tmp[n - 1 - t]
    return p + n


@njit(cache=True, nogil=True)
def _put_number(out, p, v, k, table):
    """Write ``v`` as an integer when it is a whole number below 2^53 in magnitude (``k`` <
    0), else row ``k`` of ``table`` (its text, zero-padded)."""
    if k < 0:
        if v < 0:
            out[p] = 45
            p += 1
        return _put_int(out, p, np.int64(abs(v)))
    for c in range(table.shape[1]):
        ch = table[k, c]
        if ch == 0:
            break
        out[p] = ch
        p += 1
    return p


@njit(cache=True, nogil=True)
def format_rows(indptr, indices, data, y, fields, value_text, y_text, table, out):
    """Write rows as libffm text into ``out`` (uint8, large enough); ``value_text[e]`` /
    ``y_text[i]`` is -1 for a number written as an integer, else its row in ``table``.
    Returns the number of bytes written."""
    p = 0
    for i in range(indptr.shape[0] - 1):
        p = _put_number(out, p, y[i], y_text[i], table)
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            out[p] = 32
            p = _put_int(out, p + 1, fields[j])
            out[p] = 58
            p = _put_int(out, p + 1, j)
            out[p] = 58
            p = _put_number(out, p + 1, data[e], value_text[e], table)
        out[p] = 10
        p += 1
    return p
