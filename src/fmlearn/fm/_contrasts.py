"""``FMRegressor.fit(X, y, contrasts=C)``: the classic FM learned from contrast targets.

The estimator side of :mod:`fmlearn.solvers.fm_contrast` (Lin et al. 2019, §4.2; docs/vtec.md):
validation (the same as for GFM/IFM: :func:`fmlearn._contrasts.check_contrasts`, one weight per
target), the held bias when C's rows all sum to zero, the dispatch to the ALS, MCMC or SGD
solver, and the fitted attributes. Kept apart from :mod:`fmlearn.fm` so that the classic FM's
module stays the plain estimator; it imports no estimator module.
"""

import numpy as np
from sklearn.utils.validation import check_array, validate_data

from .._base import FLOAT_DTYPES, check_sample_weight, progress
from .._contrasts import PredictContrastsMixin, bias_identifiable, check_contrasts
from .._data import check_sparse_structure, to_csr
from .._plan import DataSummary, RunContext
from .._threads import n_threads
from ..exceptions import DivergenceError
from ._history import FitRecorder
from ._plan import CONTRAST_ATTRIBUTES, ClassicFMPlan


class ClassicFMContrastMixin(PredictContrastsMixin):
    """``fit(..., contrasts=C)`` and ``predict_contrasts`` for :class:`fmlearn.FMRegressor`.

    After a fit on contrasts, ``contrasts_fitted_`` is True, ``intercept_fitted_`` tells
    whether w0 was learned (False when every row of C sums to zero: w0 then keeps its
    starting value, 0 or the warm-started one), and predictions are not clipped: the targets'
    range is not a range of f. ``y_range_`` records the targets' range.

    Examples
    --------
    Differences of consecutive rows, f(x_i) - f(x_{i+1}) (each row of C sums to zero, so
    w0 is held):

    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from fmlearn import FMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 5))
    >>> f = X @ np.arange(5.0) + X[:, 0] * X[:, 1]
    >>> C = (sp.eye(299, 300) - sp.eye(299, 300, k=1)).tocsr()
    >>> m = FMRegressor(2, solver="als", n_iter=50, random_state=0).fit(X, C @ f, contrasts=C)
    >>> t = C @ f
    >>> bool(np.linalg.norm(m.predict_contrasts(X, C) - t) < 1e-6 * np.linalg.norm(t))
    True
    >>> m.intercept_fitted_
    False
    """

    def _clip_range(self):
        if getattr(self, "contrasts_fitted_", False):
            return -np.inf, np.inf
        return super()._clip_range()

    def _forget_contrasts(self):
        """A plain fit: drop what a previous fit on contrasts recorded."""
        for name in CONTRAST_ATTRIBUTES:
            self.__dict__.pop(name, None)

    def _rows_after_contrasts(self):
        """partial_fit on rows of f continues a model fitted on contrasts: from then on it is
        a model of rows, clipped to the range of the rows' targets (not widened by the
        contrasts' range)."""
        if getattr(self, "contrasts_fitted_", False):
            self._forget_contrasts()
            self.__dict__.pop("y_range_", None)

    def _validate_contrasts(self, X, y, sample_weight, contrasts, reset):
        """(X canonical CSR, C, y, sw) without zero-weight targets; raises ValueError naming
        the problem (shapes, NaN, a target referencing no row, all weights zero)."""
        check_sparse_structure(X)
        X = validate_data(self, X, reset=reset, accept_sparse=["csr", "csc"],
                          dtype=list(FLOAT_DTYPES), ensure_min_samples=1)
        if hasattr(X, "nnz") and X.nnz and not np.all(np.isfinite(X.data)):
            raise ValueError("Input X contains NaN or infinity.")
        y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D (one value per target), got shape {y.shape}")
        C = check_contrasts(contrasts, X.shape[0], y.shape[0])
        sw = check_sample_weight(sample_weight, y.shape[0])
        keep = np.flatnonzero(sw > 0)
        if keep.shape[0] < y.shape[0]:
            C, y, sw = C[keep], y[keep], sw[keep]
        dtype = X.dtype if reset else np.dtype(self.dtype_)
        return to_csr(X, dtype), C, y, sw

    def _fit_contrasts(self, X, y, sample_weight, eval_set, contrasts, callback=None):
        from ..solvers.fm_contrast import (
            als_contrast_solver,
            contrast_data,
            mcmc_contrast_solver,
            sgd_contrast_solver,
        )

        context = RunContext(callback, may_stop=True)
        if self.early_stopping is True:
            raise ValueError(f"{type(self).__name__}: early_stopping is not used with "
                             "contrasts (there are no validation rows of f); stop with the "
                             "callback, which receives the training RMSE of the targets")
        if eval_set is not None:
            raise ValueError(f"{type(self).__name__}: eval_set is not used with contrasts "
                             "(its targets are values of f, not contrasts); score held-out "
                             "contrasts with predict_contrasts")
        X, C, y, sw = self._validate_contrasts(X, y, sample_weight, contrasts, reset=True)
        bias = bias_identifiable(C)
        data = contrast_data(X, C, y, sw, bias)
        # Each row weighs sum_t s_t |C_tr| in the initial scale: identity contrasts give the
        # plain fit's weights, and a row no contrast uses changes nothing.
        row_weight = np.asarray(abs(C).T @ sw, dtype=np.float64).ravel()
        plan = ClassicFMPlan.build(self, DataSummary.of_rows(X, y, row_weight),
                                   mode="contrasts", context=context)
        bar = progress(self.verbose, self.n_iter, f"{type(self).__name__}[{plan.solver}]")
        recorder = FitRecorder(plan, bar, contrasts=True)
        record = recorder.contrast_callback(data)
        state, chain, t = plan.state, None, None
        with bar, n_threads(self.n_jobs):
            if plan.solver == "sgd":
                state, t, n_done, info = sgd_contrast_solver(
                    data, state, plan.t, plan.sgd, plan.seed,
                    lambda epoch: record(epoch, state=state))
            elif plan.solver == "als":
                state, n_done, info = als_contrast_solver(data, state, plan.als, record)
            else:
                chain = plan.chain
                state, n_done, info = mcmc_contrast_solver(data, state, chain, plan.mcmc,
                                                           plan.seed, record)
        if info["diverged"]:
            raise DivergenceError(info["diverged"] + "; the estimator keeps its previous state")
        plan.commit(self, state, n_done, chain=chain, t=t, history=recorder.history)
        self.contrasts_fitted_ = True
        self.intercept_fitted_ = bool(bias)
        return self
