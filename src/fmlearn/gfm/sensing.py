"""Rank-one matrix sensing, one pass (Lin and Ye 2016, §2.1): the special cases of the generalized
FM.

* :class:`SymmetricRankOneSensing`: y_i = x_i^T M* x_i (w* = 0), M* symmetric of rank k. The
  operator is biased (E[x^T M x] = tr M), so the step is gFM's with its shift (Lin and Ye 2016,
  Algorithm 1).
* :class:`PhaseRetrieval`: k = 1 and M* = x* x*^T, so y_i = (x_i^T x*)^2; recovers x* up to sign.
* :class:`AsymmetricRankOneSensing` (inductive matrix completion): y_i = u_i^T M* v_i with
  independent u_i, v_i; the operator is unbiased (E[u u^T M v v^T] = M), no shift is needed,
  and the step alternates between the left and right factors.

All three read each mini-batch once, keep O(k d) memory and never form M*. The theory assumes
isotropic (standard Gaussian) measurement vectors; no standardisation is applied, since an
affine change of x would add a linear term that the sensing model does not have.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._base import BaseFM, FMRegressorMixin, failure_atomic, progress, store_params
from .._docs import fill_doc
from ..exceptions import DivergenceError
from ..linalg import LowRankOperator, low_rank_eigh
from ..solvers.asym_sensing import AsymState, asym_predict, asym_step_rows
from ..solvers.one_pass import Batch, OnePassSettings, auto_batch_size, one_pass_solver
from ._one_pass import ONE_PASS_CONSTRAINTS, OnePassMixin, train_rows

__all__ = ["AsymmetricRankOneSensing", "PhaseRetrieval", "SymmetricRankOneSensing"]

_COMMON_CONSTRAINTS = {"safeguard": ["boolean"], **ONE_PASS_CONSTRAINTS}


class _SensingTags:
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A pure quadratic form (no linear term, no intercept) cannot fit arbitrary targets.
        tags.regressor_tags.poor_score = True
        return tags


@fill_doc
class SymmetricRankOneSensing(_SensingTags, OnePassMixin, FMRegressorMixin, BaseFM):
    """Symmetric rank-one matrix sensing y = x^T M x, one pass over mini-batches.

    Model::

        f(x) = x^T M x,     M = (U V^T + V U^T) / 2,   rank(M) <= 2k

    Each mini-batch gives one step of Lin and Ye 2016, Algorithm 1 with w = 0:
    ``U <- QR((H1 - h2/2 I + M) U)``, ``V <- (H1 - h2/2 I + M) U`` with H1 = A'(r)/(2n) and
    h2 = mean(r); the first batch initialises U with the top-k eigenvectors of H1 - h2/2 I.
    With standard Gaussian x and n >~ c k d rows per batch the error decreases geometrically
    (Lin and Ye 2016, Theorem 1).

    Parameters
    ----------
    n_factors : int, default=5
    batch_size : int or "auto", default="auto"
        Rows per batch in ``fit`` ("auto": 10 k d).
    max_iter : int or "auto", default="auto"
    tol : float or None, default=1e-4
        Most passes and their stopping tolerance; see :class:`fmlearn.GFMRegressor`.
    safeguard : bool, default=True
        Halve a step that would increase its own batch's loss. Sensing models cannot be
        standardised (centring x would add a linear term the model does not have), so on
        designs far from isotropic (e.g. features with a large mean) the plain step explodes;
        the safeguard makes such fits stall instead. On isotropic designs at the theory's batch
        sizes the step decreases the batch loss and the safeguard does not change the result.
    %(one_pass_run)s

    Attributes
    ----------
    U_, V_ : ndarrays of shape (n_features, k)
    M_ : LowRankOperator
    n_batches_, n_iter_, batch_size_, history_ :
        As in :class:`fmlearn.GFMRegressor` (``history_["recovery_error"]`` is
        ||M - M*||_2 / ||M*||_2 when ``truth`` is given).

    Examples
    --------
    >>> from fmlearn.sensing import SymmetricRankOneSensing
    >>> from fmlearn.datasets import make_symmetric_sensing
    >>> X, y, truth = make_symmetric_sensing(24000, 30, 2, random_state=0)
    >>> s = SymmetricRankOneSensing(2, batch_size=2000, random_state=0).fit(X, y, truth=truth)
    >>> bool(s.history_["recovery_error"][-1] < 1e-6)
    True
    """

    # 0.1 name: until 0.3
    _renamed_params = {"n_passes": "max_iter"}

    _fit_linear = False
    _parameter_constraints = {
        "n_factors": [Interval(numbers.Integral, 1, None, closed="left")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "tol": [Interval(numbers.Real, 0, None, closed="left"), None],
        **_COMMON_CONSTRAINTS,
    }

    def __init__(self, n_factors=5, *, batch_size="auto", max_iter="auto", tol=1e-4,
                 safeguard=True, init="auto", warm_start=False, random_state=None,
                 n_jobs=None, verbose=0):
        store_params(self, locals())

    def _correction(self):
        return "shift"

    def _stall_remedy(self):
        return ("the one-pass sensing theory assumes Gaussian measurement vectors (Lin and Ye "
                "2016, §2.1): keep safeguard=True and use more rows per batch")

    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, *, truth=None, eval_set=None):
        """Fit over X cut into mini-batches; ``truth`` is a (w, M) pair or a planted model."""
        return self._fit_one_pass(X, y, sample_weight, truth, eval_set)

    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, sample_weight=None, *, truth=None):
        """One step on the batch (X, y); the first call initialises from it."""
        return self._partial_fit_one_pass(X, y, sample_weight, truth)


class PhaseRetrieval(SymmetricRankOneSensing):
    """Phase retrieval y = (x^T s)^2, one pass: symmetric sensing with k = 1 and M = s s^T.

    The signal is read off the fitted M as ``signal_ = sqrt(max(lambda_1, 0)) u_1`` (its top
    eigenpair); it is determined up to a global sign.

    Parameters
    ----------
    batch_size, max_iter, tol, init, warm_start, random_state, n_jobs, verbose :
        As in :class:`SymmetricRankOneSensing`.

    Attributes
    ----------
    signal_ : ndarray of shape (n_features,)
    U_, V_, M_, n_batches_, n_iter_, batch_size_, history_ :
        As in :class:`SymmetricRankOneSensing` (k = 1).

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn.sensing import PhaseRetrieval
    >>> from fmlearn.datasets import make_phase_retrieval
    >>> X, y, truth = make_phase_retrieval(20000, 50, random_state=0)
    >>> p = PhaseRetrieval(batch_size=1000, random_state=0).fit(X, y)
    >>> s = truth.signal
    >>> err = min(np.linalg.norm(p.signal_ - s), np.linalg.norm(p.signal_ + s))
    >>> bool(err < 1e-6)
    True
    """

    _parameter_constraints = {
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "tol": [Interval(numbers.Real, 0, None, closed="left"), None],
        **_COMMON_CONSTRAINTS,
    }
    n_factors = 1  # fixed: M* = s s^T has rank one (a class constant, not a parameter)

    def __init__(self, *, batch_size="auto", max_iter="auto", tol=1e-4, safeguard=True,
                 init="auto", warm_start=False, random_state=None, n_jobs=None, verbose=0):
        store_params(self, locals())

    @property
    def signal_(self):
        """The recovered signal (up to sign), shape (n_features,)."""
        vals, vecs = low_rank_eigh(self.M_)
        return np.sqrt(max(float(vals[0]), 0.0)) * vecs[:, 0]


@fill_doc
class AsymmetricRankOneSensing(_SensingTags, FMRegressorMixin, BaseFM):
    """Asymmetric rank-one sensing (inductive matrix completion) y = u^T M v, one pass.

    ``X = [u | v]``: the first ``n_left`` columns of each row are u (d1 entries), the others v
    (d2 entries). Model::

        f(u, v) = u^T M v,     M = U V^T  (d1 x d2, rank k),  U^T U = I

    With independent isotropic u and v the sensing operator is unbiased, E[u u^T M v v^T] = M
    (Lin and Ye 2016, §2.1), so with E = (1/n) sum_i r_i u_i v_i^T + U V^T each batch gives the
    alternating power step ``U <- QR(E Vbar)`` (Vbar an orthonormal basis of V), ``V <- E^T U``; the
    first batch initialises U with the top-k left singular vectors of E (randomized SVD above
    :data:`fmlearn.linalg.DENSE_MAX_DIM`).

    Parameters
    ----------
    n_factors : int, default=5
    n_left : int or None, default=None
        Number of u columns (None: half of the features, rounded down).
    batch_size : int or "auto", default="auto"
        Rows per batch in ``fit`` ("auto": 10 k (d1 + d2)); each batch is read once.
    safeguard : bool, default=True
        Halve a step that would increase its own batch's loss (see
        :class:`SymmetricRankOneSensing`).
    %(one_pass_run)s

    Attributes
    ----------
    U_ : ndarray of shape (d1, k), orthonormal columns
    V_ : ndarray of shape (d2, k)
    M_ : LowRankOperator of shape (d1, d2)
    n_left_ : int
    n_batches_, n_iter_, batch_size_, history_ : as in :class:`SymmetricRankOneSensing`.

    Examples
    --------
    >>> from fmlearn.sensing import AsymmetricRankOneSensing
    >>> from fmlearn.datasets import make_asymmetric_sensing
    >>> X, y, truth = make_asymmetric_sensing(40000, 30, 20, 2, random_state=0)
    >>> a = AsymmetricRankOneSensing(2, n_left=30, batch_size=2000, random_state=0)
    >>> bool(a.fit(X, y, truth=truth).history_["recovery_error"][-1] < 1e-6)
    True
    """

    _parameter_constraints = {
        "n_factors": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_left": [Interval(numbers.Integral, 1, None, closed="left"), None],
        **_COMMON_CONSTRAINTS,
    }

    def __init__(self, n_factors=5, *, n_left=None, batch_size="auto", safeguard=True,
                 init="auto", warm_start=False, random_state=None, n_jobs=None, verbose=0):
        store_params(self, locals())

    # -- helpers ------------------------------------------------------------------------------
    def _split(self, d):
        d1 = d // 2 if self.n_left is None else self.n_left
        if d < 2 or not 1 <= d1 < d:
            raise ValueError(f"AsymmetricRankOneSensing needs X = [u | v] with at least one "
                             f"column on each side; got n_features={d} and n_left={self.n_left}")
        return d1

    def _k(self, d1, d2):
        return min(self.n_factors, d1, d2)

    def resolve_batch_size(self, n_features):
        """Rows per batch that ``fit`` uses on data of ``n_features = d1 + d2`` columns:
        ``batch_size``, "auto" resolved by :func:`fmlearn.solvers.one_pass.auto_batch_size`."""
        if self.batch_size != "auto":
            return int(self.batch_size)
        d1 = self._split(n_features)
        return auto_batch_size(self._k(d1, n_features - d1), n_features)

    def _settings(self, rs):
        return OnePassSettings(n_factors=self.n_factors, init=self.init, random_state=rs,
                               safeguard=self.safeguard, n_jobs=self.n_jobs)

    def _prepare(self, X):
        if sp.issparse(X):
            X = X.tocsc()
            d1 = self.n_left_
            return X[:, :d1].tocsr(), X[:, d1:].tocsr()
        X = np.asarray(X)
        d1 = self.n_left_
        return np.ascontiguousarray(X[:, :d1]), np.ascontiguousarray(X[:, d1:])

    def _state(self):
        if not hasattr(self, "U_"):
            return None
        return AsymState(self.U_.copy(), self.V_.copy(), int(self.n_batches_),
                         float(self.y_scale_), float(self.ref_norm_))

    def _store(self, state):
        self.U_, self.V_ = state.U, state.V
        self.n_batches_ = int(state.t)
        self.y_scale_ = float(state.y_scale)
        self.ref_norm_ = float(state.ref_norm)

    def _new_state(self, d1, d2, dtype):
        k = self._k(d1, d2)
        return AsymState(np.zeros((d1, k), dtype), np.zeros((d2, k), dtype))

    def _run(self, batches, state, truth, history, bar):
        settings = self._settings(check_random_state(self.random_state))

        def record(t, st, info):
            history["rmse"].append(info["rmse"])
            if truth is not None:
                from ..diagnostics import recovery_error

                history["recovery_error"].append(
                    recovery_error(None, LowRankOperator(st.U, st.V), None, truth))
            bar.update(1)

        split = (self._prepare(Xb) + (yb, swb) for Xb, yb, swb in batches)
        state, n_done, info = one_pass_solver(split, state, settings, record,
                                              step=asym_step_rows)
        if info["diverged"]:
            raise DivergenceError(
                f"AsymmetricRankOneSensing diverged: {info['diverged']}; use larger batches "
                "or fewer n_factors. The estimator keeps its previous state")
        return state, n_done

    def _truth(self, truth):
        if truth is None:
            return None
        M = getattr(truth, "M", truth)
        if getattr(M, "shape", None) != (self.n_left_, self.n_features_in_ - self.n_left_):
            raise ValueError(f"truth M has shape {getattr(M, 'shape', None)}, expected "
                             f"({self.n_left_}, {self.n_features_in_ - self.n_left_})")
        return M

    # -- API ------------------------------------------------------------------------------------
    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, *, truth=None):
        """Fit over X = [u | v] cut into mini-batches; ``truth`` is M* or a planted model."""
        X, y, sw = train_rows(self, X, y, sample_weight, reset=True)
        d = X.shape[1]
        self.n_left_ = self._split(d)
        self.dtype_ = np.dtype(X.dtype).name
        truth = self._truth(truth)
        state = self._state() if self.warm_start else None
        if state is None or state.U.shape[0] != self.n_left_:
            state = self._new_state(self.n_left_, d - self.n_left_, X.dtype)
        n = X.shape[0]
        n_b = max(1, n // self.resolve_batch_size(d))
        bounds = np.linspace(0, n, n_b + 1).round().astype(np.int64)
        self.batch_size_ = int(np.max(np.diff(bounds)))
        history = {"rmse": []}
        if truth is not None:
            history["recovery_error"] = []
        X = X.tocsr() if sp.issparse(X) else X

        def batches():
            for a, b in zip(bounds[:-1], bounds[1:], strict=False):
                yield X[a:b], y[a:b], sw[a:b]

        with progress(self.verbose, n_b, type(self).__name__) as bar:
            state, n_done = self._run(batches(), state, truth, history, bar)
        self.history_ = history
        self.n_iter_ = n_done
        self._store(state)
        return self

    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, sample_weight=None, *, truth=None):
        """One step on the batch X = [u | v]; the first call initialises from it."""
        first = not hasattr(self, "U_")
        X, y, sw = train_rows(self, X, y, sample_weight, reset=first)
        d = X.shape[1]
        if first:
            self.n_left_ = self._split(d)
            self.dtype_ = np.dtype(X.dtype).name
            state = self._new_state(self.n_left_, d - self.n_left_, X.dtype)
            self.history_ = {"rmse": []}
        else:
            state = self._state()
        X = X.astype(self.dtype_, copy=False)
        truth = self._truth(truth)
        if truth is not None:
            self.history_.setdefault("recovery_error", [])
        state, n_done = self._run([(X, y, sw)], state, truth, self.history_,
                                  progress(0, 1, ""))
        self.batch_size_ = int(X.shape[0])
        self.n_iter_ = getattr(self, "n_iter_", 0) + n_done
        self._store(state)
        return self

    def _raw_predict(self, X):
        Xu, Xv = self._prepare(X)
        return asym_predict(Batch(Xu, n_jobs=self.n_jobs), Batch(Xv, n_jobs=self.n_jobs),
                            self._state())

    @property
    def M_(self):
        """M = U V^T as a :class:`fmlearn.linalg.LowRankOperator` (d1 x d2)."""
        check_is_fitted(self)
        return LowRankOperator(self.U_, self.V_)

    def _check_loaded_state(self):
        d = int(self.n_features_in_)
        d1 = int(self.n_left_)
        k = self._k(d1, d - d1)
        if self.U_.shape != (d1, k) or self.V_.shape != (d - d1, k):
            raise ValueError(f"U_ {self.U_.shape} / V_ {self.V_.shape} do not match n_left_={d1},"
                             f" n_features_in_={d}, n_factors={k}")
        if not (np.all(np.isfinite(self.U_)) and np.all(np.isfinite(self.V_))):
            raise ValueError("model parameters contain NaN or infinity")
