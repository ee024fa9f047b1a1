"""The errors of the svmlight / libFM readers (:mod:`._svmlight`), naming file and line.

A parser error, a NaN or infinite value, or an outlying feature index is turned into a
ValueError that names the file, the line number and the line: the line is found by a second,
sequential pass over the file, made only once something is wrong.
"""

import numpy as np

from ._svmlight_lines import _compression, _is_data_line, _line_blocks, _parse

_PARSE_ERRORS = (ValueError, OverflowError)
# A corrupt gzip/bz2 stream surfaces as OSError (BadGzipFile, "Invalid data stream") or EOFError.
_STREAM_ERRORS = (OSError, EOFError)

# Bytes of whole lines handed to the parser at a time when a bad line is searched for.
_SCAN_BLOCK = 1 << 22

#: A file's largest feature index is refused when it is more than this many times the next
#: largest one (a typo such as 134217728 for 13, which would build a model of 2**27 features)
#: and the width it implies is at least :data:`OUTLIER_MIN_WIDTH`.
OUTLIER_FACTOR = 100
OUTLIER_MIN_WIDTH = 1 << 16


def _data_lines(path):
    """Yield ``(line_number, line)`` for the data lines of the file (those that make a row)."""
    for first, block in _line_blocks(path, _SCAN_BLOCK):
        for no, line in enumerate(block.split(b"\n"), start=first):
            if _is_data_line(line):
                yield no, line


def _shown(line):
    text = line.decode("utf-8", errors="replace").rstrip("\r\n")
    return text if len(text) <= 120 else text[:117] + "..."


def _line_of_row(path, row):
    """``(line_number, line)`` of data row ``row`` (0-based) of the file."""
    for i, (no, line) in enumerate(_data_lines(path)):
        if i == row:
            return no, line
    return None, b""


def _line_with_index(path, index):
    """``(line_number, line)`` of the first data line that uses the raw feature ``index``."""
    for no, line in _data_lines(path):
        for token in line.split(b"#", 1)[0].split()[1:]:
            name, _, _ = token.partition(b":")
            if name.isdigit() and int(name) == index:
                return no, line
    return None, b""


def _check_finite(path, X, y, first_row=0):
    """Refuse NaN / infinity in a parsed chunk, naming the file and the line."""
    bad_x = X.nnz and not np.all(np.isfinite(X.data))
    bad_y = not np.all(np.isfinite(y))
    if not (bad_x or bad_y):
        return
    rows = []
    if bad_x:
        p = int(np.flatnonzero(~np.isfinite(X.data))[0])
        rows.append(int(np.searchsorted(X.indptr, p, side="right")) - 1)
    if bad_y:
        rows.append(int(np.flatnonzero(~np.isfinite(y))[0]))
    no, line = _line_of_row(path, first_row + min(rows))
    raise ValueError(f"svmlight/libFM file {path!r}, line {no}: a value is NaN or infinite "
                     f"(the line reads {_shown(line)!r}); fmlearn needs finite numbers")


def _check_width(path, largest, next_largest, max_features):
    """Refuse a largest column beyond ``max_features`` or, without it, far beyond the next
    largest column (see :data:`OUTLIER_FACTOR`); name the line that uses it."""
    if largest is None:
        return
    width = largest + 1
    if max_features is not None:
        if width <= max_features:
            return
        why = f"more than max_features={max_features}"
    else:
        ref = max(1, 0 if next_largest is None else next_largest)
        if width < OUTLIER_MIN_WIDTH or largest <= OUTLIER_FACTOR * ref:
            return
        why = (f"{largest // ref}x the next largest column {ref}; pass max_features (or "
               "n_features) to accept it")
    no, line = _line_with_index(path, largest)  # zero-based file
    if no is None:
        no, line = _line_with_index(path, largest + 1)  # one-based file
    raise ValueError(f"svmlight/libFM file {path!r}, line {no}: a feature index would make a "
                     f"model of {width} features, {why} (the line reads {_shown(line)!r})")


def _find_bad_line(path, zero_based, n_features, dtype):
    """``(line_number, line, message)`` of the first line the parser rejects, or None.

    One sequential pass in blocks of whole lines; inside the first failing block the lines are
    bisected (parser errors are per line: each line is parsed on its own), so the cost is
    about twice the parse of the file, and the memory one block.
    """
    for first, block in _line_blocks(path, _SCAN_BLOCK):
        try:
            _parse(block, zero_based, n_features, dtype)
            continue
        except _PARSE_ERRORS:
            pass
        # Split on b'\n' only, like the parser (bytes.splitlines would also cut at b'\r').
        lines = [line + b"\n" for line in block.split(b"\n")]
        if block.endswith(b"\n"):
            lines.pop()
        else:
            lines[-1] = lines[-1][:-1]
        lo, hi = 0, len(lines)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                _parse(b"".join(lines[lo:mid]), zero_based, n_features, dtype)
                lo = mid
            except _PARSE_ERRORS:
                hi = mid
        try:
            _parse(lines[lo], zero_based, n_features, dtype)
        except _PARSE_ERRORS as exc:
            return first + lo, lines[lo], str(exc)
        return None  # the block fails only as a whole: not a per-line error
    return None


def _malformed(path, exc, zero_based, n_features, dtype):
    """The ValueError to raise for a parser error ``exc`` on ``path``."""
    if isinstance(exc, _STREAM_ERRORS):
        return ValueError(
            f"cannot read {path!r}: the {_compression(path)} stream is corrupt or truncated ({exc})"
        )
    try:
        found = _find_bad_line(path, zero_based, n_features, dtype)
    except _STREAM_ERRORS as exc2:
        return ValueError(f"cannot read {path!r}: corrupt or truncated file ({exc2})")
    if found is None:
        return ValueError(f"cannot load svmlight/libFM file {path!r}: {exc}")
    line_no, line, message = found
    text = _shown(line)
    if message.startswith("n_features"):
        what, hint = "svmlight/libFM file", ""
    else:
        what, hint = "malformed svmlight/libFM file", "expected 'target index:value ...'; "
    return ValueError(f"{what} {path!r}, line {line_no}: {message} ({hint}the line reads {text!r})")
