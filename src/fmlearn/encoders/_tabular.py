"""Raw tabular data -> FM features: one-hot categorical columns, numeric passthrough, hashing.

:class:`TabularEncoder` takes a pandas DataFrame, a list of dicts or a 2-D array, decides per
column whether it is categorical (one-hot, scikit-learn's ``OneHotEncoder``), numeric (its
value, optionally standardised with ``StandardScaler``) or hashed (``FeatureHasher`` into a
fixed number of buckets), and returns CSR features together with the feature groups it made
(one group per input column), ready for the classic FM's ``groups=``.
"""

import numbers
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.feature_extraction import FeatureHasher
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._id_columns import warn_table_id_columns

_TYPES = ("categorical", "numeric", "hashed")
_UNKNOWN = "<unknown>"
#: Output columns of one hashed column at most: FeatureHasher's own bound (its 32-bit hash).
MAX_HASH_BUCKETS = np.iinfo(np.int32).max
#: Output columns in all at most: the column indices of the FM kernels are int32.
MAX_FEATURES_OUT = np.iinfo(np.int32).max - 1


def _is_missing(v):
    return v is None or (isinstance(v, (float, np.floating)) and np.isnan(v)) or (
        type(v).__name__ in ("NAType", "NaTType"))


def _table(X):
    """``(keys, columns, by_name)``: the column keys (names or integer positions), one 1-D
    array per column, and whether columns are addressed by name (DataFrame, dicts)."""
    if hasattr(X, "columns") and hasattr(X, "iloc"):  # pandas DataFrame
        keys = list(X.columns)
        cols = []
        for j in range(len(keys)):
            col = X.iloc[:, j]
            kind = getattr(col.dtype, "kind", "O")
            cols.append(col.to_numpy(dtype=object if kind not in "iufmM" else None))
        return keys, cols, True
    if isinstance(X, (list, tuple)) and X and all(isinstance(r, Mapping) for r in X):
        keys = list(dict.fromkeys(k for row in X for k in row))
        cols = [np.array([row.get(k) for row in X], dtype=object) for k in keys]
        return keys, cols, True
    if sp.issparse(X):
        raise TypeError("TabularEncoder does not accept sparse input (a sparse matrix is "
                        "already encoded): give it a DataFrame, a list of dicts or a 2-D array")
    if isinstance(X, Mapping) or isinstance(X, str):
        raise TypeError("TabularEncoder expects a pandas DataFrame, a list of dicts or a 2-D "
                        f"array, got {type(X).__name__}")
    arr = np.asarray(X)
    if arr.dtype.kind == "c":
        raise ValueError("Complex data not supported: TabularEncoder takes real numbers and "
                         "categories")
    if arr.dtype.names is not None:
        keys = list(arr.dtype.names)
        return keys, [arr[k] for k in keys], True
    if arr.ndim != 2:
        raise ValueError(f"TabularEncoder expects a 2-D table, got an array of shape "
                         f"{arr.shape}. Reshape your data with X.reshape(-1, 1) for a single "
                         "column or X.reshape(1, -1) for a single row")
    return list(range(arr.shape[1])), [arr[:, j] for j in range(arr.shape[1])], False


def _infer_type(key, col):
    """bool, object, string and category columns are categorical; numbers are numeric."""
    if col.dtype.kind in "mM":
        raise ValueError(f"column {key!r} holds dates or durations: convert them to numbers "
                         "(e.g. seconds) or declare the column in column_types")
    if col.dtype.kind in "iuf":
        return "numeric"
    if col.dtype.kind != "O":
        return "categorical"
    present = [v for v in col if not _is_missing(v)]
    if present and all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
                       for v in present):
        return "numeric"
    return "categorical"


def _check_unique(keys):
    seen, dup = set(), []
    for k in keys:
        if k in seen and k not in dup:
            dup.append(k)
        seen.add(k)
    if dup:
        raise ValueError(f"TabularEncoder: column name(s) {dup} appear more than once; each "
                         "column needs its own name (rename the duplicates)")


def _label(v):
    if _is_missing(v):
        return "nan"
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))  # an id stored as a float (7.0) is the category "7"
    return str(v)


def _as_categories(col):
    """Category labels as strings (a missing value is the category ``"nan"``, a whole float
    its integer), so that one column may mix types, the ids 7, 7.0 and "7" are one category,
    and the feature names read ``column=value``."""
    return np.array([_label(v) for v in col], dtype=object)


class TabularEncoder(TransformerMixin, BaseEstimator):
    """Categorical and numeric columns -> sparse FM features, with one feature group per column.

    Each input column becomes a block of output columns:

    - **categorical** (inferred for object, string, category and bool columns): one-hot, one
      output column per category seen in ``fit`` (scikit-learn's ``OneHotEncoder``); values
      are compared as strings, a missing value (None, NaN) is the category ``"nan"``;
    - **numeric** (inferred for integer and float columns): the value itself, standardised
      to zero mean and unit variance unless ``standardize=False``; missing values are refused;
    - **hashed**: ``n_hash_buckets`` columns, the value's string hashed into one of them
      (scikit-learn's ``FeatureHasher``, signed 32-bit MurmurHash3, no sign flip); for columns
      with too many categories to enumerate. Two categories that share a bucket share their
      weights: with c categories in B buckets about c^2 / (2 B) pairs collide.

    Column names must be unique (a DataFrame with two columns of one name is refused: which
    one would a name address?).

    Integer ids (user, item) are numbers: declare them categorical with ``column_types``
    (an FM given an id as a number learns one slope over the ids, which means nothing).
    ``fit`` warns :class:`~fmlearn.exceptions.IdColumnWarning` on an inferred-numeric column
    of whole numbers whose name reads like an id (``user_id``, ``userId``, ``schoolid``; at
    least 3 values), or with more than 200 distinct values filling half their range,
    whatever its name; a declared type silences it (docs/tabular.md).

    Parameters
    ----------
    column_types : dict or None, default=None
        Column (name, or position for an array) -> ``"categorical"``, ``"numeric"`` or
        ``"hashed"``; overrides the inferred type. Unlisted columns are inferred.
    handle_unknown : {"ignore", "bucket"}, default="ignore"
        A category not seen in ``fit`` (or rarer than ``min_frequency``): "ignore" encodes it
        as all zeros in its column's block; "bucket" sets a shared ``column=<unknown>``
        output column of that block.
    min_frequency : int or None, default=None
        With ``handle_unknown="bucket"``, categories seen fewer times than this in ``fit`` go
        to the bucket too, so that the bucket's weights are learned from the rare
        categories (None: only unseen categories go there). Ignored with "ignore". A column
        in which every category is rarer than this is refused (all its values would go to
        the bucket: a constant feature).
    hash_above : int or None, default=None
        An inferred-categorical column with more distinct values than this in ``fit`` is
        hashed instead of one-hot encoded (None: never).
    n_hash_buckets : int, default=1024
        Output columns of each hashed column, at most 2**31 - 1 (``FeatureHasher``'s bound:
        its hash has 32 bits); the whole output has fewer than 2**31 - 1 columns (the FM
        kernels' column indices are 32-bit).
    standardize : bool, default=True
        Standardise the numeric columns (mean and standard deviation of ``fit``). The default
        was chosen on real tables with numeric columns, the classic FM's defaults behind the
        encoder, 5 splits (``benchmarks/bench_tabular_standardize.py``): standardised columns
        gave the lower test error on scikit-learn's diabetes (RMSE 54.8 against 57.3),
        breast cancer (log-loss 0.141 against 0.144), UCI Abalone (RMSE 2.110 against 2.119)
        and MovieLens-100K as a raw table (user, item, age, release year, timestamp: RMSE
        0.899 against 0.920), the raw values only on scikit-learn's wine (178 rows: log-loss
        0.107 against 0.143). fmlearn 0.2 and
        earlier: False.

    Attributes
    ----------
    columns_ : list
        The input columns, in output order (names, or positions for an array).
    column_types_ : dict
        Column -> the type used.
    groups_ : ndarray of shape (n_features_out_,), int64
        Feature group of each output column: the position of its input column in
        ``columns_``. Pass as ``FMRegressor(groups=enc.groups_)``.
    blocks_ : list of (start, stop)
        Output column range of each input column.
    n_features_in_ : int
    n_features_out_ : int
    onehot_ : OneHotEncoder or None
        The fitted encoder of the categorical columns.
    scaler_ : StandardScaler or None

    Examples
    --------
    >>> from fmlearn.encoders import TabularEncoder
    >>> rows = [{"user": "ann", "item": "x", "age": 31.0},
    ...         {"user": "bob", "item": "y", "age": 45.0},
    ...         {"user": "ann", "item": "y", "age": 31.0}]
    >>> enc = TabularEncoder(standardize=False).fit(rows)
    >>> enc.get_feature_names_out().tolist()
    ['user=ann', 'user=bob', 'item=x', 'item=y', 'age']
    >>> enc.groups_.tolist()
    [0, 0, 1, 1, 2]
    >>> enc.transform([{"user": "bob", "item": "z", "age": 50.0}]).toarray().tolist()
    [[0.0, 1.0, 0.0, 0.0, 50.0]]
    """

    _parameter_constraints = {
        "column_types": [dict, None],
        "handle_unknown": [StrOptions({"ignore", "bucket"})],
        "min_frequency": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "hash_above": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "n_hash_buckets": [Interval(numbers.Integral, 1, MAX_HASH_BUCKETS, closed="both")],
        "standardize": ["boolean"],
    }

    def __init__(self, column_types=None, *, handle_unknown="ignore", min_frequency=None,
                 hash_above=None, n_hash_buckets=1024, standardize=True):
        self.column_types = column_types
        self.handle_unknown = handle_unknown
        self.min_frequency = min_frequency
        self.hash_above = hash_above
        self.n_hash_buckets = n_hash_buckets
        self.standardize = standardize

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        tags.input_tags.dict = True
        return tags

    # -- fit --------------------------------------------------------------------------------
    def _types(self, keys, cols):
        given = dict(self.column_types or {})
        unknown = [k for k in given if k not in keys]
        if unknown:
            raise ValueError(f"column_types names column(s) {unknown} that the data does not "
                             f"have (columns: {keys})")
        bad = {k: t for k, t in given.items() if t not in _TYPES}
        if bad:
            raise ValueError(f"column_types must map columns to one of {list(_TYPES)}, got "
                             f"{bad}")
        types = {}
        for key, col in zip(keys, cols, strict=True):
            kind = given.get(key) or _infer_type(key, col)
            if (key not in given and kind == "categorical" and self.hash_above is not None
                    and np.unique(_as_categories(col)).shape[0] > self.hash_above):
                kind = "hashed"
            types[key] = kind
        return types

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn the column types, the categories and the numeric columns' scale from ``X``."""
        keys, cols, by_name = _table(X)
        _check_unique(keys)
        if not keys:
            raise ValueError(f"Found array with 0 feature(s) (shape={np.shape(X)}) while a "
                             "minimum of 1 is required by TabularEncoder: the table has no "
                             "columns")
        n = cols[0].shape[0]
        if n == 0:
            raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required "
                             "by TabularEncoder: the table has no rows")
        types = self._types(keys, cols)
        cat = [j for j, k in enumerate(keys) if types[k] == "categorical"]
        num = [j for j, k in enumerate(keys) if types[k] == "numeric"]
        onehot = scaler = None
        if cat:
            data = np.column_stack([_as_categories(cols[j]) for j in cat])
            categories = []
            for c in range(len(cat)):
                values, counts = np.unique(data[:, c], return_counts=True)
                if self.handle_unknown == "bucket" and self.min_frequency is not None:
                    values = values[counts >= self.min_frequency]
                    if values.shape[0] == 0:
                        raise ValueError(
                            f"column {keys[cat[c]]!r}: every category is rarer than "
                            f"min_frequency={self.min_frequency} (the most frequent has "
                            f"{int(counts.max())} rows), so all its values would go to the "
                            f"{_UNKNOWN} bucket, a constant feature; lower min_frequency, "
                            "or hash or drop the column")
                categories.append(values.astype(object))
            onehot = OneHotEncoder(categories=categories, handle_unknown="ignore",
                                   dtype=np.float64).fit(data)
        if num:
            values = self._numeric(keys, cols, num)
            inferred = [c for c, j in enumerate(num) if keys[j] not in (self.column_types or {})]
            if inferred:
                warn_table_id_columns([keys[num[c]] for c in inferred], values[:, inferred],
                                      stacklevel=4)
            if self.standardize:
                scaler = StandardScaler().fit(values)
        self.columns_ = keys
        self.column_types_ = types
        self.onehot_ = onehot
        self.scaler_ = scaler
        self.n_features_in_ = len(keys)
        self.named_columns_ = by_name
        sizes = self._block_sizes(keys, types, onehot)
        if sum(sizes) > MAX_FEATURES_OUT:
            raise ValueError(f"the encoding would have {sum(sizes)} output columns, more than "
                             f"the {MAX_FEATURES_OUT} the FM kernels index (32-bit); lower "
                             "n_hash_buckets or hash_above")
        stops = np.cumsum(sizes)
        self.blocks_ = [(int(b - s), int(b)) for b, s in zip(stops, sizes, strict=True)]
        self.n_features_out_ = int(stops[-1])
        self.groups_ = np.repeat(np.arange(len(keys), dtype=np.int64), sizes)
        return self

    def _block_sizes(self, keys, types, onehot):
        """Output columns of each input column: 1 (numeric), ``n_hash_buckets`` (hashed), the
        categories (+ 1 for the bucket) of a one-hot column."""
        sizes, c = [], 0
        for key in keys:
            if types[key] == "numeric":
                sizes.append(1)
            elif types[key] == "hashed":
                sizes.append(int(self.n_hash_buckets))
            else:
                sizes.append(len(onehot.categories_[c]) + (self.handle_unknown == "bucket"))
                c += 1
        return sizes

    def _check_loaded_state(self):
        """The fitted state of a loaded encoder (a pipeline file) must be what ``fit`` could
        have made: types known, the one-hot and scaler parts of the right width, the blocks,
        groups and width derived from them, within the bounds ``fit`` enforces. Raises
        ``ValueError``."""
        keys, types = self.columns_, self.column_types_
        if not isinstance(keys, list) or not keys or not isinstance(types, dict):
            raise ValueError("columns_ must be a non-empty list and column_types_ a dict")
        _check_unique(keys)
        if list(types) != keys or any(t not in _TYPES for t in types.values()):
            raise ValueError(f"column_types_ must give each of columns_ one of {list(_TYPES)}")
        if not isinstance(self.named_columns_, bool) or (
                not self.named_columns_ and keys != list(range(len(keys)))):
            raise ValueError("named_columns_ must be a bool, and positional columns_ 0..n-1")
        if not isinstance(self.n_features_in_, int) or self.n_features_in_ != len(keys):
            raise ValueError("n_features_in_ does not match columns_")
        n_cat = sum(t == "categorical" for t in types.values())
        n_num = sum(t == "numeric" for t in types.values())
        if (self.onehot_ is None) != (n_cat == 0) or (
                self.onehot_ is not None and (not isinstance(self.onehot_, OneHotEncoder)
                                              or len(self.onehot_.categories_) != n_cat)):
            raise ValueError(f"onehot_ must be a fitted OneHotEncoder of the {n_cat} "
                             "categorical columns")
        if self.onehot_ is not None and any(len(c) == 0 for c in self.onehot_.categories_):
            raise ValueError("onehot_ has a column without categories")
        if self.scaler_ is not None and (
                not isinstance(self.scaler_, StandardScaler) or not self.standardize
                or getattr(self.scaler_, "n_features_in_", None) != n_num
                or not np.all(np.isfinite(self.scaler_.mean_))
                or not np.all(np.isfinite(self.scaler_.scale_))
                or not np.all(self.scaler_.scale_ > 0)):
            raise ValueError(f"scaler_ must be a fitted StandardScaler of the {n_num} numeric "
                             "columns with finite means and positive scales")
        if self.scaler_ is None and self.standardize and n_num:
            raise ValueError("standardize=True but scaler_ is None")
        sizes = self._block_sizes(keys, types, self.onehot_)
        if sum(sizes) > MAX_FEATURES_OUT:
            raise ValueError(f"{sum(sizes)} output columns, more than {MAX_FEATURES_OUT}")
        stops = np.cumsum(sizes)
        blocks = [(int(b - s), int(b)) for b, s in zip(stops, sizes, strict=True)]
        if [tuple(b) for b in self.blocks_] != blocks or self.n_features_out_ != int(stops[-1]):
            raise ValueError("blocks_ / n_features_out_ do not match the columns' encodings")
        groups = self.groups_
        if (not isinstance(groups, np.ndarray) or groups.shape != (int(stops[-1]),)
                or not np.array_equal(groups, np.repeat(np.arange(len(keys)), sizes))):
            raise ValueError("groups_ does not match the blocks")

    @staticmethod
    def _numeric(keys, cols, num):
        out = np.empty((cols[0].shape[0], len(num)), dtype=np.float64)
        for c, j in enumerate(num):
            col = cols[j]
            if col.dtype.kind == "O" and any(_is_missing(v) for v in col):
                raise ValueError(f"numeric column {keys[j]!r} has missing values: impute them "
                                 "(sklearn.impute.SimpleImputer) or declare the column "
                                 "categorical in column_types")
            try:
                out[:, c] = np.asarray(col, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"column {keys[j]!r} is declared numeric but holds values "
                                 "that are not numbers") from None
            if not np.all(np.isfinite(out[:, c])):
                raise ValueError(f"numeric column {keys[j]!r} contains NaN or infinity: "
                                 "impute the missing values or declare the column "
                                 "categorical in column_types")
        return out

    # -- transform --------------------------------------------------------------------------
    def _columns_for_transform(self, X):
        keys, cols, by_name = _table(X)
        _check_unique(keys)
        if not self.named_columns_:
            if by_name or len(keys) != self.n_features_in_:
                raise ValueError(f"X has {len(keys)} features, but TabularEncoder is "
                                 f"expecting {self.n_features_in_} features as input")
            return cols
        if not by_name:
            raise ValueError("TabularEncoder was fitted on named columns (a DataFrame or "
                             "dicts); transform needs named columns too")
        where = dict(zip(keys, cols, strict=True))
        n = cols[0].shape[0] if cols else 0
        missing = [k for k in self.columns_ if k not in where]
        if missing and not isinstance(X, (list, tuple)):
            raise ValueError(f"X lacks the column(s) {missing} seen in fit")
        # a dict row without a key has a missing value there
        return [where.get(k, np.full(n, None, dtype=object)) for k in self.columns_]

    def transform(self, X):
        """CSR features of shape (n_samples, n_features_out_), float64."""
        check_is_fitted(self, "groups_")
        cols = self._columns_for_transform(X)
        keys, types = self.columns_, self.column_types_
        n = cols[0].shape[0]
        cat = [j for j, k in enumerate(keys) if types[k] == "categorical"]
        num = [j for j, k in enumerate(keys) if types[k] == "numeric"]
        blocks = [None] * len(keys)
        if cat:
            onehot = self.onehot_.transform(
                np.column_stack([_as_categories(cols[j]) for j in cat])).tocsc()
            start = 0
            for c, j in enumerate(cat):
                size = len(self.onehot_.categories_[c])
                block = onehot[:, start:start + size]
                start += size
                if self.handle_unknown == "bucket":
                    unknown = (block.getnnz(axis=1) == 0).astype(np.float64)
                    block = sp.hstack([block, sp.csc_matrix(unknown[:, None])])
                blocks[j] = block
        if num:
            values = self._numeric(keys, cols, num)
            if self.scaler_ is not None:
                values = self.scaler_.transform(values)
            for c, j in enumerate(num):
                blocks[j] = sp.csc_matrix(values[:, c:c + 1])
        hasher = FeatureHasher(n_features=int(self.n_hash_buckets), input_type="string",
                               alternate_sign=False)
        for j, key in enumerate(keys):
            if types[key] == "hashed":
                blocks[j] = hasher.transform([[v] for v in _as_categories(cols[j])])
        out = sp.hstack(blocks, format="csr", dtype=np.float64) if n else sp.csr_matrix(
            (0, self.n_features_out_), dtype=np.float64)
        out.sum_duplicates()
        out.eliminate_zeros()
        return out

    def get_feature_names_out(self, input_features=None):
        """``column=category`` for one-hot columns (``column=<unknown>`` for the bucket),
        ``column`` for numeric ones, ``column=hash_<b>`` for hash buckets."""
        check_is_fitted(self, "groups_")
        names, cat = [], 0
        for key in self.columns_:
            kind = self.column_types_[key]
            if kind == "numeric":
                names.append(str(key))
            elif kind == "hashed":
                names.extend(f"{key}=hash_{b}" for b in range(int(self.n_hash_buckets)))
            else:
                names.extend(f"{key}={v}" for v in self.onehot_.categories_[cat])
                if self.handle_unknown == "bucket":
                    names.append(f"{key}={_UNKNOWN}")
                cat += 1
        return np.array(names, dtype=object)
