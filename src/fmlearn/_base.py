"""Shared estimator plumbing: input validation, label encoding, fitted checks, progress bars,
prediction dispatch, failure atomicity and save hooks.

Every public estimator derives from :class:`BaseFM` and one of :class:`FMRegressorMixin` /
:class:`FMClassifierMixin`. A model family implements ``_raw_predict(X)`` on validated input
(dense C-contiguous ndarray or canonical CSR in the model dtype) and returns float64 scores;
this module turns them into ``predict`` / ``decision_function`` / ``predict_proba``, in row
chunks of bounded size (:meth:`BaseFM._scores`), and refuses scores that overflowed.

Every sparse input passes :func:`fmlearn._data.check_sparse_structure` here, before SciPy or a
kernel indexes with it. :func:`failure_atomic` wraps the batch estimators' ``fit`` and
``partial_fit``: a call that raises leaves the estimator exactly as it was.
"""

import contextlib
import copy
import functools
import numbers

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, ndtr
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, is_classifier
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from ._data import canonical_csr_or_none, check_sparse_structure, to_csr
from ._id_columns import warn_id_columns
from ._registry import register
from ._renamed import accept_renamed_init, translate
from .exceptions import DivergenceError

FLOAT_DTYPES = (np.float64, np.float32)

#: Stored values (dense entries, or non-zeros of sparse input) per prediction chunk: a chunk's
#: CSR copy and the kernels' per-row buffers stay near 100 MB whatever the number of rows.
PREDICT_CHUNK_VALUES = 1 << 22


def _snapshot(state):
    """A copy of an estimator's ``__dict__`` that later in-place changes cannot reach: arrays
    copied, lists / dicts / sets deep-copied; constructor parameters (no trailing ``_``) and
    other objects are kept as the same objects (a user's ``RandomState`` stays theirs)."""
    out = {}
    for name, value in state.items():
        if isinstance(value, np.ndarray):
            value = value.copy()
        elif isinstance(value, (list, dict, set)) and name.endswith("_"):
            value = copy.deepcopy(value)
        out[name] = value
    return out


def _non_finite_attribute(est):
    """Name of a learned float array or float scalar of ``est`` that is not finite, or None."""
    for name, value in vars(est).items():
        if not name.endswith("_") or name.startswith("_") or name == "history_":
            continue
        if isinstance(value, np.ndarray) and value.dtype.kind in "fc":
            if not np.all(np.isfinite(value)):
                return name
        elif isinstance(value, (float, np.floating)) and not np.isfinite(value):
            return name
    return None


# Errors a solver's arithmetic can end in (besides DivergenceError): an overflow that made a
# matrix non-finite shows up as LinAlgError ("Eigenvalues did not converge"), ARPACK's no
# convergence, a division by a zero that an underflow produced.
_NUMERIC_ERRORS = (np.linalg.LinAlgError, ArithmeticError)


def _arpack_error():
    from scipy.sparse.linalg import ArpackError

    return ArpackError


def failure_atomic(method):
    """Decorator of ``fit`` / ``partial_fit``: a call that raises leaves ``self`` as it was.

    The estimator's ``__dict__`` is copied before the call (:func:`_snapshot`, O(model)) and put
    back exactly on any exception, ``KeyboardInterrupt`` included: attributes the call added
    are removed, changed ones get their previous values. A call that returns is checked too:
    a learned array or scalar that is NaN or infinite (an overflow the solver did not catch)
    raises :class:`~fmlearn.exceptions.DivergenceError` and restores the previous state. A
    numerical error from inside a solver (``LinAlgError`` from an eigen-solver fed an
    overflowed matrix, ``ZeroDivisionError``, ARPACK's no convergence) becomes a
    ``DivergenceError`` naming it.

    For the batch estimators, whose ``fit`` costs far more than a copy of the model. The
    online estimators' ``partial_fit`` (one row costs O(nnz k)) keeps its own transaction.
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        saved = _snapshot(self.__dict__)
        try:
            try:
                result = method(self, *args, **kwargs)
            except DivergenceError:
                raise
            except (_NUMERIC_ERRORS + (_arpack_error(),)) as exc:
                raise DivergenceError(
                    f"{type(self).__name__}.{method.__name__} failed inside the solver: "
                    f"{type(exc).__name__}: {exc}. This happens when the data or a parameter "
                    "drives the iterates past the float64 range (values above ~1e154 square "
                    "to infinity); rescale the features or the targets. The estimator keeps "
                    "its previous state") from exc
            bad = _non_finite_attribute(self)
            if bad is not None:
                raise DivergenceError(
                    f"{type(self).__name__}.{method.__name__} produced a non-finite {bad} "
                    "(an overflow in the solver); rescale the features or the targets. The "
                    "estimator keeps its previous state")
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        return result

    return wrapper


def store_params(est, params):
    """The whole body of an estimator's ``__init__``: ``store_params(self, locals())`` stores
    each argument under its own name, unchanged (scikit-learn's convention: no logic, no
    validation in ``__init__``)."""
    for name, value in params.items():
        if name not in ("self", "__class__"):
            setattr(est, name, value)


def float_array(value, name, ndim, layout):
    """``value`` as a float64 array of ``ndim`` dimensions; else a ValueError naming ``name``
    and the expected ``layout`` (e.g. ``"1-D"``)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from None
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {layout}, got an array of shape {arr.shape}")
    return arr


def check_sample_weight(sample_weight, n_samples):
    """Validate ``sample_weight`` and return it as a float64 array (ones when None)."""
    if sample_weight is None:
        return np.ones(n_samples, dtype=np.float64)
    if isinstance(sample_weight, numbers.Number):
        sample_weight = np.full(n_samples, sample_weight, dtype=np.float64)
    sw = float_array(sample_weight, "sample_weight", 1, "1-D")
    if sw.shape[0] != n_samples:
        raise ValueError(
            f"sample_weight has {sw.shape[0]} entries but X has {n_samples} samples"
        )
    if not np.all(np.isfinite(sw)):
        raise ValueError("sample_weight contains NaN or infinity")
    if np.any(sw < 0):
        raise ValueError("sample_weight must be non-negative")
    if sw.sum() <= 0:
        raise ValueError("sample_weight sums to zero: there is nothing to fit")
    return sw


def _weights(sample_weight, n_samples, unit_none):
    """:func:`check_sample_weight`, or None for no ``sample_weight`` when ``unit_none`` (a
    caller that carries unit weights as None: no n ones to allocate and fault in)."""
    if unit_none and sample_weight is None:
        return None
    return check_sample_weight(sample_weight, n_samples)


def progress(verbose, total, desc):
    """A tqdm progress bar when ``verbose`` is truthy, else a silent stand-in."""
    if verbose:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, leave=True)
    return _NoProgress()



#: The messages of numpy / scikit-learn when X holds text (a category such as 'Oslo').
_STRING_MESSAGES = ("could not convert string to float",
                    "Unable to convert array of bytes/strings")


@contextlib.contextmanager
def strings_point_to_the_encoder(name):
    """Turn numpy's "could not convert string to float: 'Oslo'" (X holds text: a categorical
    column given as is) into an error that names the fix, :class:`fmlearn.encoders.
    TabularEncoder`."""
    try:
        yield
    except ValueError as exc:
        if not any(m in str(exc) for m in _STRING_MESSAGES):
            raise
        raise ValueError(
            f"{name}: X holds text ({exc}); an FM needs numbers. Encode categorical columns "
            "first with fmlearn.encoders.TabularEncoder (one-hot, or hashed), e.g. "
            f"make_pipeline(TabularEncoder(), {name}()).") from exc

class _NoProgress:
    def update(self, n=1):
        pass

    def set_postfix(self, *args, **kwargs):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class BaseFM(BaseEstimator):
    """Base class of every fmlearn estimator (not for direct use)."""

    #: Old parameter names accepted until fmlearn 0.3 with a FutureWarning: {old: new} or
    #: {old: Renamed(new, learners)} (:mod:`fmlearn._renamed`).
    _renamed_params = {}

    def __init_subclass__(cls, **kwargs):
        # io.load finds a class by the name stored in a model file through this registry.
        super().__init_subclass__(**kwargs)
        register(cls)
        if cls._renamed_params and not getattr(cls.__init__, "_renamed_wrapper", False):
            cls.__init__ = accept_renamed_init(cls, cls.__init__)

    def set_params(self, **params):
        """As scikit-learn's, also taking the old names of renamed parameters (with a
        ``FutureWarning``; :mod:`fmlearn._renamed`)."""
        table = type(self)._renamed_params
        if any(k in table for k in params):
            params = translate(f"{type(self).__name__}.set_params()", table, params,
                               learner=params.get("learner", getattr(self, "learner", None)))
        return super().set_params(**params)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    # -- input validation -------------------------------------------------------------------
    def _validate_X_y(self, X, y, *, reset, y_numeric, accept_sparse=("csr", "csc")):
        check_sparse_structure(X)
        with strings_point_to_the_encoder(type(self).__name__):
            X, y = validate_data(
                self,
                X,
                y,
                reset=reset,
                accept_sparse=list(accept_sparse),
                dtype=list(FLOAT_DTYPES),
                y_numeric=y_numeric,
                ensure_min_samples=1,
            )
        if sp.issparse(X) and X.nnz and not np.all(np.isfinite(X.data)):
            raise ValueError("Input X contains NaN or infinity.")
        if reset and not sp.issparse(X):
            warn_id_columns(X, type(self).__name__)
        return X, y

    def _validate_X_predict(self, X, accept_sparse=("csr", "csc")):
        """Validate ``X`` at predict time and cast it to the model dtype."""
        check_is_fitted(self)
        check_sparse_structure(X)
        with strings_point_to_the_encoder(type(self).__name__):
            X = validate_data(
                self, X, reset=False, accept_sparse=list(accept_sparse),
                dtype=list(FLOAT_DTYPES)
            )
        dtype = self._model_dtype()
        if sp.issparse(X):
            return to_csr(X, dtype)
        return np.ascontiguousarray(X, dtype=dtype)

    def _model_dtype(self):
        return np.dtype(getattr(self, "dtype_", "float64"))

    def _validate_train_fast(self, X, y, sample_weight):
        """``_validate_train(X, y, sample_weight, reset=False)`` of a fitted estimator for the
        streaming case -- a canonical CSR batch in the model dtype, numeric targets or known
        labels -- in O(nnz + n) with no copy of ``X``
        (:func:`~fmlearn._data.canonical_csr_or_none`); ``None`` when the input is of another
        kind or anything is off, so that the general validation runs and raises its usual
        error."""
        if not hasattr(self, "n_features_in_") or hasattr(self, "feature_names_in_"):
            return None
        X = canonical_csr_or_none(X, self.n_features_in_, self._model_dtype())
        if X is None:
            return None
        y = self._fast_targets(y, X.shape[0])
        if y is None:
            return None
        return X, y, check_sample_weight(sample_weight, X.shape[0])

    def _validate_eval_set(self, eval_set):
        """``(X_val, y_val)`` validated like training data (``y_val`` encoded to {-1, +1} for a
        classifier, float64), or None."""
        if eval_set is None:
            return None
        if hasattr(eval_set, "resolve_eval_set"):  # fmlearn.pipeline: X_val through the steps
            eval_set = eval_set.resolve_eval_set()
        try:
            X_val, y_val = eval_set
        except (TypeError, ValueError):
            raise ValueError("eval_set must be a pair (X_val, y_val)") from None
        X_val, y_val = self._validate_X_y(X_val, y_val, reset=False,
                                          y_numeric=not is_classifier(self))
        if is_classifier(self):
            y_val = self._encode_y(y_val, reset=False)
        return X_val, np.asarray(y_val, dtype=np.float64)

    def _metric(self, pred, y, sw=None):
        """Weighted RMSE of the (clipped) predictions, or error rate of the margins."""
        if is_classifier(self):
            return float(np.average(np.sign(pred) != y, weights=sw))
        lo, hi = self._clip_range()
        return float(np.sqrt(np.average((np.clip(pred, lo, hi) - y) ** 2, weights=sw)))

    def _clip_range(self):
        return -np.inf, np.inf

    def _raw_predict(self, X):  # pragma: no cover - abstract
        raise NotImplementedError

    def _scores(self, X):
        """Validated ``X`` -> float64 scores of ``_raw_predict``, computed in row chunks of
        about :data:`PREDICT_CHUNK_VALUES` stored values (bounded memory on any number of
        rows); a score that is not finite (the input is finite, so an overflow) raises
        ``ValueError`` instead of becoming a NaN prediction or class."""
        X = self._validate_X_predict(X)
        n = X.shape[0]
        stored = getattr(X, "nnz", None)  # sparse, or relational (fmlearn.RelationData)
        stored = n * X.shape[1] if stored is None else stored
        rows = max(1, int(PREDICT_CHUNK_VALUES // max(1.0, stored / max(n, 1))))
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is raised below
            if n <= rows:
                out = np.asarray(self._raw_predict(X), dtype=np.float64)
            else:
                out = None  # (n,) scores, or (n, C): one column per class
                for a in range(0, n, rows):
                    part = self._raw_predict(X[a:a + rows])
                    if out is None:
                        out = np.empty((n,) + np.shape(part)[1:], dtype=np.float64)
                    out[a:a + rows] = part
        finite = np.isfinite(out)
        if not finite.all():
            i = int(np.flatnonzero(~finite.reshape(n, -1).all(axis=1))[0])
            row = X[i].toarray() if hasattr(X, "toarray") else X[i]
            big = float(np.max(np.abs(row))) if row.size else 0.0
            raise ValueError(
                f"{type(self).__name__}: the score of row {i} overflows float64 "
                f"({out[i]}; the row's largest |x| is {big:.3g}); rescale the features (for "
                "example with sklearn.preprocessing.MaxAbsScaler) or check the model")
        return out

    # -- persistence ------------------------------------------------------------------------
    def save(self, path):
        """Write the fitted model to ``path`` (see :mod:`fmlearn.io` for the format).

        The file is written to a temporary name and renamed, so an interrupted save never
        replaces a good file with a broken one.
        """
        from .io import save_model

        save_model(self, path)
        return path

    def _check_loaded_state(self):
        """Hook: raise ``ValueError`` if loaded attributes are inconsistent (shapes, dtypes)."""


class FMRegressorMixin(RegressorMixin):
    """Regression front: ``predict`` returns the model's raw score, clipped to the range of the
    training targets when the estimator has ``clip_predictions=True`` (libFM's behaviour)."""

    def _clip_range(self):
        if getattr(self, "clip_predictions", False) and hasattr(self, "y_range_"):
            return self.y_range_[0], self.y_range_[1]
        return -np.inf, np.inf

    def _update_clip_range(self, y, extend):
        """Record the training target range (widened by the new ``y`` when ``extend``)."""
        lo, hi = float(np.min(y)), float(np.max(y))
        if extend and hasattr(self, "y_range_"):
            lo, hi = min(lo, self.y_range_[0]), max(hi, self.y_range_[1])
        self.y_range_ = [lo, hi]

    def _fast_targets(self, y, n):
        """Float64 targets for :meth:`BaseFM._validate_train_fast`, or None."""
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != n or y.dtype.kind not in "iuf":
            return None
        y = y.astype(np.float64)
        return y if np.isfinite(y).all() else None

    def _validate_train(self, X, y, sample_weight, reset=True, unit_none=False):
        X, y = self._validate_X_y(X, y, reset=reset, y_numeric=True)
        y = np.asarray(y, dtype=np.float64)
        sw = _weights(sample_weight, X.shape[0], unit_none)
        return X, y, sw

    def predict(self, X):
        """Predicted targets, shape (n_samples,)."""
        return self._scores(X)


class FMClassifierMixin(ClassifierMixin):
    """Binary classification front: any two labels; scores are margins of the label
    ``classes_[1]``; ``predict_proba`` applies the model's link (sigmoid or probit)."""

    # Link from the margin to P(classes_[1]); a model family may override it ("probit").
    _link = "logistic"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _update_clip_range(self, y, extend):
        pass

    def _encode_y(self, y, reset, classes=None):
        check_classification_targets(y)
        y = np.asarray(y)
        if reset:
            y_type = type_of_target(y, input_name="y", raise_unknown=True)
            labels = np.unique(y) if classes is None else np.unique(np.asarray(classes))
            if labels.shape[0] > 2 or y_type not in ("binary",):
                raise ValueError(
                    "Only binary classification is supported. The type of the target is "
                    f"{y_type} with {labels.shape[0]} classes. For more classes wrap "
                    f"{type(self).__name__} in sklearn.multiclass.OneVsRestClassifier, or "
                    "use fmlearn.FMClassifier, which takes any number of classes."
                )
            if labels.shape[0] < 2:
                raise ValueError(
                    f"A classifier needs samples of two classes; y has only one class "
                    f"({labels[0]!r})."
                )
            self.classes_ = labels
        unknown = np.setdiff1d(np.unique(y), self.classes_)
        if unknown.shape[0]:
            raise ValueError(
                f"y contains labels {unknown.tolist()} not seen in the first call "
                f"(classes_ = {self.classes_.tolist()})"
            )
        return np.where(y == self.classes_[1], 1.0, -1.0)

    def _fast_targets(self, y, n):
        """Labels of ``classes_`` as -1 / +1 for :meth:`BaseFM._validate_train_fast`, or
        None."""
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != n or not np.isin(y, self.classes_).all():
            return None
        return np.where(y == self.classes_[1], 1.0, -1.0)

    def _validate_train(self, X, y, sample_weight, reset=True, classes=None, unit_none=False):
        X, y = self._validate_X_y(X, y, reset=reset, y_numeric=False)
        y = self._encode_y(y, reset=reset, classes=classes)
        sw = _weights(sample_weight, X.shape[0], unit_none)
        return X, y, sw

    def decision_function(self, X):
        """Margin of ``classes_[1]``: positive means ``classes_[1]``, shape (n_samples,)."""
        return self._scores(X)

    def predict_proba(self, X):
        """Class probabilities, shape (n_samples, 2), columns ordered as ``classes_``."""
        return self._proba_of_margins(self.decision_function(X))

    def _proba_of_margins(self, s):
        """The two columns of ``predict_proba`` of the margins ``s`` (the model's link)."""
        p = ndtr(s) if self._link == "probit" else expit(s)
        return np.column_stack([1.0 - p, p])

    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))

    def predict(self, X):
        """Predicted labels (values of ``classes_``)."""
        s = self.decision_function(X)
        return self.classes_[(s > 0).astype(np.intp)]
