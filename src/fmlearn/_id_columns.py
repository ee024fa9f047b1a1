"""Detect dense input columns that look like ids (user or item numbers given as numbers).

An FM reads a numeric column as one feature whose value multiplies a weight and a factor
vector, so a column of user ids 1..943 learns one slope over the ids, which means nothing
(MovieLens-100K: test RMSE 2.44 against 0.93 one-hot). :func:`id_like_columns` finds such
columns; ``_base`` calls it once, where a dense ``X`` is validated for a new fit, and warns
with :class:`fmlearn.exceptions.IdColumnWarning`.
"""

import re

import numpy as np

#: An id column has more distinct values than this ...
MIN_DISTINCT = 200
#: ... and they fill at least this fraction of the integers between their min and max.
MIN_FILL = 0.5
#: Rows inspected (evenly spaced through X): the test's cost is O(MAX_ROWS * n_features).
MAX_ROWS = 20000


def id_like_columns(X):
    """Columns of the dense 2-D array ``X`` that look like ids: integer-valued, with more than
    :data:`MIN_DISTINCT` distinct values that fill at least :data:`MIN_FILL` of their range.

    Ids are numbered consecutively, so they fill their range (MovieLens users 1..943 all
    occur); quantities that are whole numbers either have few values (ages, hours a week,
    counts, ratings: under 200) or spread over a wide range (sampling weights, amounts,
    timestamps: a small fraction of it). At most :data:`MAX_ROWS` evenly spaced rows are
    looked at, so the cost stays bounded on any X.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float

    Returns
    -------
    columns : list of (int, int)
        ``(column, n_distinct)`` for each id-like column.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn._id_columns import id_like_columns
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.integers(1, 944, 20000), rng.normal(size=20000),
    ...                      rng.integers(17, 91, 20000)]).astype(float)
    >>> id_like_columns(X)
    [(0, 943)]
    """
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] <= MIN_DISTINCT or X.dtype.kind not in "fiu":
        return []
    step = max(1, -(-X.shape[0] // MAX_ROWS))
    S = X[::step]
    with np.errstate(invalid="ignore"):
        whole = np.all(S == np.round(S), axis=0) if S.dtype.kind == "f" else np.ones(
            S.shape[1], dtype=bool)
    out = []
    for j in np.flatnonzero(whole):
        values = np.unique(S[:, j])
        if values.shape[0] <= MIN_DISTINCT:
            continue
        span = float(values[-1]) - float(values[0]) + 1.0
        if values.shape[0] >= MIN_FILL * span:
            out.append((int(j), int(values.shape[0])))
    return out


def warn_id_columns(X, estimator_name, stacklevel=4):
    """Warn :class:`~fmlearn.exceptions.IdColumnWarning` naming the id-like columns of X."""
    found = id_like_columns(X)
    if not found:
        return
    import warnings

    from .exceptions import IdColumnWarning

    cols = ", ".join(f"{j} ({n} distinct values)" for j, n in found)
    types = ", ".join(f"{j}: 'categorical'" for j, _ in found)
    warnings.warn(
        f"{estimator_name}: column(s) {cols} of X hold whole numbers that fill their range, "
        "like user or item ids; an FM reads each as one number, not as categories, and "
        "learns nothing from them. One-hot encode them, e.g. "
        f"fmlearn.encoders.TabularEncoder(column_types={{{types}}}). If the "
        "column is a quantity, ignore this warning (warnings.filterwarnings('ignore', "
        "category=fmlearn.exceptions.IdColumnWarning)).",
        IdColumnWarning, stacklevel=stacklevel)


#: Words of a column name (camelCase, snake_case, kebab-case, spaces): "userId" -> user, Id.
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def id_like_name(name):
    """Whether a column name reads like an id: one of its words (camelCase, ``_``, ``-`` or
    space separated) is "id", "ids" or ends with "id" ("user_id", "userId", "ID", "schoolid",
    "item id")."""
    if not isinstance(name, str):
        return False
    return any(w.lower() == "ids" or w.lower().endswith("id") for w in _WORDS.findall(name))


def id_like_table_columns(names, values):
    """Numeric table columns that look like ids, whatever their number of distinct values:
    ``(name, n_distinct)`` for each column of ``values`` (float, shape (n, len(names))) that
    holds whole numbers with at least 3 distinct values and whose name reads like an id
    (:func:`id_like_name`), or that is id-like by :func:`id_like_columns`'s rule (more than
    :data:`MIN_DISTINCT` distinct values filling half their range; unnamed columns)."""
    values = np.asarray(values, dtype=np.float64)
    out = []
    by_values = {j for j, _ in id_like_columns(values)}
    step = max(1, -(-values.shape[0] // MAX_ROWS))
    for j, name in enumerate(names):
        col = values[::step, j]
        if j in by_values:
            out.append((name, int(np.unique(col).shape[0])))
            continue
        if not id_like_name(name) or not np.all(col == np.round(col)):
            continue
        n_distinct = int(np.unique(col).shape[0])
        if n_distinct >= 3:  # two values: one-hot of one of them, the same model
            out.append((name, n_distinct))
    return out


def warn_table_id_columns(names, values, stacklevel=3):
    """Warn :class:`~fmlearn.exceptions.IdColumnWarning` naming the table's id-like numeric
    columns (:func:`id_like_table_columns`) and how to declare them."""
    found = id_like_table_columns(names, values)
    if not found:
        return
    import warnings

    from .exceptions import IdColumnWarning

    cols = ", ".join(f"{n!r} ({k} distinct whole numbers)" for n, k in found)
    cat = ", ".join(f"{n!r}: 'categorical'" for n, _ in found)
    num = ", ".join(f"{n!r}: 'numeric'" for n, _ in found)
    warnings.warn(
        f"TabularEncoder: column(s) {cols} look like ids but were inferred numeric; an FM "
        "reads an id as one number (one slope over the ids), not as categories. Declare them: "
        f"column_types={{{cat}}} (one-hot), or column_types={{{num}}} if they are quantities "
        "(which also silences this warning).",
        IdColumnWarning, stacklevel=stacklevel)
