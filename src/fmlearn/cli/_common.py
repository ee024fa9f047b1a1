"""Helpers shared by the subcommands: user-facing errors, reading svmlight/libFM files, writing
predictions and printing small key/value reports."""

import argparse
import os
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

# Characters written to stdout per flushed block.
_STDOUT_BLOCK = 1 << 16


class CLIError(Exception):
    """An error the user can fix; printed as one line on stderr, exit status 2."""


def note(message):
    """A one-line remark on stderr (stdout carries results only)."""
    print(f"fmlearn: {message}", file=sys.stderr)


def _check_readable(path, what):
    if not os.path.exists(path):
        raise CLIError(f"{what} file not found: {path}")
    if os.path.isdir(path):
        raise CLIError(f"{what} path is a directory, not a file: {path}")


def number_type(kind, low, strict=False):
    """argparse type: a finite ``kind`` (int or float) >= ``low`` (> ``low`` if ``strict``)."""
    what = "an integer" if kind is int else "a finite number"
    bound = f"{'>' if strict else '>='} {low}"

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not (value > low if strict else value >= low) or value == float("inf"):
            raise argparse.ArgumentTypeError(f"expected {what} {bound}, got {text!r}")
        return value

    return parse


positive_int = number_type(int, 1)
nonneg_int = number_type(int, 0)
nonneg_float = number_type(float, 0.0)
positive_float = number_type(float, 0.0, strict=True)


def init_stdev_type(text):
    """``--init-stdev``: ``auto`` (the estimators' default, derived from the data) or a
    number >= 0."""
    return "auto" if text == "auto" else nonneg_float(text)


def add_command(sub, name, summary, description, examples):
    """Register the subcommand ``name`` on ``sub``: its one-line ``summary`` (in ``fmlearn
    --help``), a ``description`` and an epilog of ``examples``, both printed as written."""
    return sub.add_parser(name, help=summary, description=description,
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          epilog="examples:\n" + examples)


def add_max_features(parser):
    """The ``--max-features`` option of the commands that read svmlight/libFM files."""
    parser.add_argument(
        "--max-features", type=positive_int, default=None, metavar="D",
        help="largest number of features the files may use: a feature index >= D is refused "
             "with its line. Without it, an index far beyond the rest of the file (100x the "
             "next largest, >= 65536 features) is refused as a likely typo; give D to accept "
             "such a file")


def read_svmlight(path, what="data", n_features=None, max_features=None):
    """Read an svmlight/libFM file as (CSR float64 X, float64 y) with
    :func:`fmlearn.datasets.load_svmlight`.

    Feature indices are used as written (libFM's convention): index ``j`` is column ``j``, so a
    1-based file simply leaves column 0 empty. The loader's "auto" detection is not used
    because it can shift a prediction file by one column relative to its training file.
    ``n_features`` widens ``X`` to a model's width and refuses files that use a larger index;
    ``max_features`` is the reader's bound on the width the file may imply (``--max-features``).
    """
    from fmlearn.datasets import load_svmlight

    _check_readable(path, what)
    try:
        X, y = load_svmlight(path, zero_based=True, dtype=np.float64,
                             max_features=max_features)
    except ValueError as exc:  # the message names the file and the offending line
        raise CLIError(str(exc)) from None
    except OSError as exc:
        raise CLIError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if X.shape[0] == 0:
        raise CLIError(f"{path}: no data rows")
    if n_features is not None:
        X = widen(X, n_features, path)
    return X, y


def widen(X, n_features, path):
    """``X`` with exactly ``n_features`` columns (appending empty ones); refuses wider data."""
    if X.shape[1] > n_features:
        raise CLIError(
            f"{path}: feature count mismatch: the file uses feature index {X.shape[1] - 1} but "
            f"the model has {n_features} features (indices 0..{n_features - 1})")
    if X.shape[1] < n_features:
        X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
    return X


def format_label(value):
    """A class label as text: integral floats read from svmlight files print as integers."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def write_values(path, values, labels=False):
    """Write one value per line to ``path`` (``-`` or None: stdout).

    Floats are written in the shortest form that reads back to the same double; class labels
    (``labels=True``) as :func:`format_label` prints them.
    """
    if not labels:
        text = "\n".join(map(repr, values.astype(np.float64).tolist()))
    else:
        text = "\n".join(format_label(v) for v in values)
    if len(values):
        text += "\n"
    if path in (None, "-"):
        # In blocks, each flushed: a reader that leaves early (``| head``) makes the next
        # block fail with BrokenPipeError, which main() turns into exit status 141. One big
        # write can end without an error once part of it reached the pipe.
        for start in range(0, len(text), _STDOUT_BLOCK):
            sys.stdout.write(text[start:start + _STDOUT_BLOCK])
            sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc.strerror or exc}") from None


def print_pairs(pairs, file=None):
    """Print ``(name, value)`` pairs as an aligned two-column report."""
    if not pairs:
        return
    width = max(len(name) for name, _ in pairs)
    for name, value in pairs:
        if isinstance(value, float):
            value = f"{value:.6g}"
        print(f"{name.ljust(width)}  {value}", file=file or sys.stdout)


def compile_kernels(est, X, y, with_eval_set=False):
    """Seconds spent fitting and predicting with a throw-away copy of ``est`` (one iteration on
    a few rows of ``X``, with an ``eval_set`` when the real fit has one): numba compiles the
    kernels on a cold cache, or loads them from the cache, here rather than inside the timed
    fit, so that the fit time is learning only. ``est`` itself is not touched."""
    from sklearn.base import clone

    t0 = time.perf_counter()
    rows = list(range(min(64, X.shape[0])))
    labels = np.unique(y)
    if labels.shape[0] == 2:  # a classifier needs both labels: add the first row of each
        rows += [int(np.flatnonzero(y == c)[0]) for c in labels]
    Xs, ys = X[rows], y[rows]
    twin = clone(est).set_params(n_iter=1, verbose=0)
    with warnings.catch_warnings():  # one iteration on a few rows warns of nothing real
        warnings.simplefilter("ignore")
        try:
            twin.fit(Xs, ys, eval_set=(Xs, ys) if with_eval_set else None)
            twin.predict(Xs)
        except (ValueError, FloatingPointError):  # the real fit reports problems with the data
            pass
    return time.perf_counter() - t0
