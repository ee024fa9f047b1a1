"""Relational data on the command line: libFM's ``-relation`` (``fmlearn fit --relation``),
libFM's binary data files as training and test data, and ``fmlearn convert`` (text to binary
and back).

A relation ``NAME`` is libFM's block structure (Rendle 2013): ``NAME.x`` / ``NAME.xt`` (the
block's rows, binary), ``NAME.train`` / ``NAME.test`` (the block row of each training / test
sample) and optionally ``NAME.groups`` (see :mod:`fmlearn.datasets._libfm_binary`). The data
of TRAIN/TEST are the row-level features; each sample's expanded row is its own features
followed by its row of every relation, in the order given, so that the model is libFM's
(``n_features = width of TRAIN/TEST + the relations' widths``). As in libFM, each relation's
features get groups of their own after the main table's (its ``.groups``, else one group),
which sets their MCMC priors / ALS penalties.
"""

import os

import numpy as np

from ._common import CLIError, read_svmlight, widen

__all__ = ["add_convert_parser", "cmd_convert", "is_binary", "read_data", "relational_inputs"]


def is_binary(path):
    """Whether ``path`` names libFM binary data (``path.y`` with ``path.x`` or ``path.xt``)
    rather than a text file (libFM's own rule: the binary files win when they exist)."""
    return os.path.exists(path + ".y") and (os.path.exists(path + ".x")
                                            or os.path.exists(path + ".xt"))


def read_data(path, what, n_features=None, max_features=None):
    """``(X, y)`` of a data file: libFM's binary data when ``path.x``/``path.xt`` and
    ``path.y`` exist, else svmlight/libFM text (:func:`fmlearn.cli._common.read_svmlight`)."""
    if not is_binary(path):
        return read_svmlight(path, what, n_features=n_features, max_features=max_features)
    from fmlearn.datasets import load_libfm_binary

    try:
        X, y = load_libfm_binary(path)
    except (OSError, ValueError) as exc:
        raise CLIError(str(exc)) from None
    if X.shape[0] == 0:
        raise CLIError(f"{path}: no data rows")
    if max_features is not None and X.shape[1] > max_features:
        raise CLIError(f"{path}: {X.shape[1]} features, more than --max-features {max_features}")
    if n_features is not None:
        X = widen(X, n_features, path)
    return X, y


def parse_names(text):
    names = [t for t in text.split(",") if t]
    if not names:
        raise CLIError("--relation expects one or more relation names, comma-separated")
    return names


def _relations(names, n_rows):
    from fmlearn.datasets import load_libfm_relation

    out = []
    for name in names:
        try:
            out.append(load_libfm_relation(name, n_rows=n_rows))
        except (OSError, ValueError) as exc:
            raise CLIError(str(exc)) from None
    return out


def _groups(main_groups, d_main, relations):
    """libFM's joined groups: the main table's (all 0 without ``-meta``), then each
    relation's own (its ``.groups``, else one group), after all earlier groups."""
    head = (np.zeros(d_main, dtype=np.int64) if main_groups is None
            else np.asarray(main_groups, dtype=np.int64))
    parts = [head]
    nxt = int(head.max()) + 1 if head.size else 1
    for X, _, groups in relations:
        g = np.zeros(X.shape[1], dtype=np.int64) if groups is None else groups
        parts.append(g + nxt)
        nxt += int(g.max()) + 1 if g.size else 1
    return np.concatenate(parts)


def relational_inputs(names, X, X_test, main_groups, train, test):
    """``(X, X_test, groups)`` of a fit with relations ``names``: the row-level data as
    :class:`fmlearn.RelationData` with each relation's block (its ``.train`` / ``.test``
    indices checked against the rows of TRAIN / TEST) and libFM's joined groups."""
    from fmlearn import RelationBlock, RelationData

    n_rows = {"train": X.shape[0]}
    if X_test is not None:
        n_rows["test"] = X_test.shape[0]
    rels = _relations(names, n_rows)
    if main_groups is not None and main_groups.shape[0] != X.shape[1]:
        raise CLIError(f"the groups file has {main_groups.shape[0]} ids but {train} has "
                       f"{X.shape[1]} features (with --relation, one id per feature of the "
                       "main table, as libFM's -meta)")

    def data(M, part):
        return RelationData(M, [RelationBlock(idx[part], B) for B, idx, _ in rels])

    try:
        Xr = data(X, "train")
        Xr_test = data(X_test, "test") if X_test is not None else None
    except ValueError as exc:
        raise CLIError(f"{test if X_test is not None else train}: {exc}") from None
    return Xr, Xr_test, _groups(main_groups, X.shape[1], rels)


def predict_inputs(names, X, path, part):
    """The rows of ``path`` (predict / evaluate) with the relations' ``part`` indices."""
    from fmlearn import RelationBlock, RelationData

    rels = _relations(names, {part: X.shape[0]})
    return RelationData(X, [RelationBlock(idx[part], B) for B, idx, _ in rels])


# -- fmlearn convert ---------------------------------------------------------------------------
def add_convert_parser(sub):
    from ._common import add_command, add_max_features

    p = add_command(
        sub, "convert", "convert data between libFM's text and binary formats",
        "Text (svmlight/libFM) to libFM's binary data -- DST.x, DST.xt, DST.y, what\n"
        "libFM's convert and transpose tools write -- or, when SRC names binary data\n"
        "(SRC.x or SRC.xt, and SRC.y), back to a text file DST.",
        "  fmlearn convert train.libfm train        # train.x, train.xt, train.y\n"
        "  fmlearn convert train train.libfm        # binary back to text\n")
    p.add_argument("src", metavar="SRC")
    p.add_argument("dst", metavar="DST")
    add_max_features(p)
    return p


def cmd_convert(args):
    from fmlearn.datasets import save_libfm_binary, save_svmlight

    if is_binary(args.src):
        X, y = read_data(args.src, "data", max_features=args.max_features)
        save_svmlight(X, y, args.dst)
        print(f"{args.dst}: {X.shape[0]} rows, {X.shape[1]} features (text)")
        return 0
    X, y = read_svmlight(args.src, "data", max_features=args.max_features)
    try:
        save_libfm_binary(args.dst, X, y)
    except OSError as exc:
        raise CLIError(f"cannot write {args.dst}.x/.xt/.y: {exc.strerror or exc}") from None
    print(f"{args.dst}.x, {args.dst}.xt, {args.dst}.y: {X.shape[0]} rows, {X.shape[1]} "
          "features (libFM binary, float32 values)")
    return 0
