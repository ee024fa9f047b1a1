"""Contrast targets: learning f from sums y_g = sum_i C[g, i] f(x_i) of its values.

Lin et al. 2019 (§4.2) never observes f: each target is a double difference of f at four pierce
points, a row of C with entries +1, -1, -1, +1. Any estimator whose model is
f(x) = b + <w, x> + x^T M x can learn from such targets when its solver takes every parameter
block linearly into every target. This module holds what they share: validating C
(:func:`check_contrasts`), deciding whether the intercept b is identifiable
(:func:`bias_identifiable`: not when every row of C sums to zero, since C (f + c) = C f), and
the estimator glue for the batch solvers of :mod:`fmlearn.solvers.contrast_ls`
(:class:`ContrastALSMixin`) and ``predict_contrasts`` (:class:`PredictContrastsMixin`). It
imports no estimator module; the classic FM's glue is :mod:`fmlearn.fm._contrasts`.
"""

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state
from sklearn.utils.validation import _num_samples, check_array, check_is_fitted, validate_data

from ._base import FLOAT_DTYPES, check_sample_weight, float_array
from ._data import to_csr
from ._threads import blas_single_thread
from .exceptions import ConvergenceWarning, DivergenceError

__all__ = ["check_contrasts", "bias_identifiable", "apply_contrasts", "PredictContrastsMixin",
           "ContrastALSMixin"]

#: A row sum below this (relative to the row's absolute sum) counts as zero.
ZERO_SUM_RTOL = 1e-12
#: solver="auto", max_iter="auto", warm start from a model of the same shape: the online
#: protocol's refit tracks a slowly moving target, so at most this many ALS sweeps.
WARM_AUTO_SWEEPS = 3


def check_contrasts(C, n_rows, n_targets=None):
    """Validate a contrast matrix and return it as canonical float64 CSR.

    Parameters
    ----------
    C : sparse matrix or array-like of shape (n_targets, n_rows)
    n_rows : int
        Rows of X that C combines.
    n_targets : int, optional
        Number of targets expected (the length of y).

    Raises
    ------
    ValueError
        Wrong shape, no targets, NaN or infinite coefficients, or a target that references no
        row (a row of C without a non-zero entry: its target would carry no information).
    """
    if C is None:
        raise ValueError("contrasts is None")
    if not sp.issparse(C):
        C = float_array(C, "contrasts", 2, "a 2-D (n_targets, n_rows) matrix")
    if C.shape[0] == 0:
        raise ValueError("contrasts has no rows: there are no targets to fit")
    if C.shape[1] != n_rows:
        raise ValueError(f"contrasts has {C.shape[1]} columns but X has {n_rows} rows; "
                         "contrasts must be (n_targets, n_rows)")
    if n_targets is not None and C.shape[0] != n_targets:
        raise ValueError(f"contrasts has {C.shape[0]} rows (targets) but y has {n_targets} "
                         "entries")
    C = to_csr(sp.csr_matrix(C), np.float64)
    if not np.all(np.isfinite(C.data)):
        raise ValueError("contrasts contains NaN or infinity")
    C.eliminate_zeros()
    empty = np.flatnonzero(np.diff(C.indptr) == 0)
    if empty.shape[0]:
        raise ValueError(f"{empty.shape[0]} target(s) of contrasts reference no row (all-zero "
                         f"rows of C, e.g. target {int(empty[0])})")
    return C


def bias_identifiable(C):
    """False when every row of C sums to zero: then C (f + c) = C f and b cannot be learned."""
    if C is None:
        return True
    sums = np.abs(np.asarray(C.sum(axis=1)).ravel())
    scale = np.asarray(abs(C).sum(axis=1)).ravel()
    return bool(np.any(sums > ZERO_SUM_RTOL * scale))


def apply_contrasts(C, f):
    """C f for a validated C (CSR) and the per-row values f."""
    return np.asarray(C @ f).ravel()


class PredictContrastsMixin:
    """``predict_contrasts(X, C)``: C f for every estimator that fits contrasts."""

    def predict_contrasts(self, X, contrasts):
        """C f: the contrasts of the model's values on the rows of X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_rows, n_features)
        contrasts : sparse matrix of shape (n_targets, n_rows)

        Returns
        -------
        ndarray of shape (n_targets,)

        Raises
        ------
        ValueError
            Bad X or contrasts, or a contrast that overflows float64 (finite scores of the rows
            whose combination does not fit in float64), as ``predict`` raises on a score that
            overflows.
        """
        check_is_fitted(self)
        C = check_contrasts(contrasts, _num_samples(X))
        f = self._scores(X)  # raises on a score that overflows
        with np.errstate(over="ignore", invalid="ignore"):
            out = apply_contrasts(C, f)
        bad = np.flatnonzero(~np.isfinite(out))
        if bad.shape[0]:
            g = int(bad[0])
            row = C[g]
            raise ValueError(
                f"{type(self).__name__}: contrast {g} overflows float64 ({out[g]}; it combines "
                f"{row.nnz} rows with coefficients up to {float(np.max(np.abs(row.data))):.3g} "
                f"and scores up to {float(np.max(np.abs(f[row.indices]))):.3g}); rescale the "
                "contrasts or the features, or check the model")
        return out


class ContrastALSMixin(PredictContrastsMixin):
    """``fit(..., contrasts=C)`` through :func:`fmlearn.solvers.contrast_ls.contrast_ls` and
    ``predict_contrasts`` for the models of :class:`fmlearn.gfm._one_pass.OnePassMixin` (GFM, iFM).

    The fitted state is stored in the one-pass attributes (``working_*``, ``mean_`` = 0,
    ``scale_``), so ``predict``, ``w_``, ``U_``, ``V_``, ``M_`` and saving work unchanged.
    """

    def _resolve_solver(self, contrasts):
        solver = getattr(self, "solver", "auto")
        if solver == "auto":
            return "lm" if contrasts is not None else "one_pass"
        if contrasts is not None and solver not in ("als", "lm"):
            raise ValueError(
                f"{type(self).__name__}(solver={solver!r}) cannot fit contrasts: the one-pass "
                "moment solvers estimate M from E[y x x^T] under the law of the rows x, and a "
                "contrast of f is not f of any row. Use solver='lm', 'als' or 'auto'.")
        return solver

    def _auto_schedule(self, contrasts, warm):
        """(method, most iterations) of a batch fit. solver="auto" on contrasts: ALS when
        warm-starting from a model of the same shape (with max_iter="auto": at most
        ``WARM_AUTO_SWEEPS`` sweeps, the online protocol's refit), LM on a cold start (ALS
        with no penalty, the default, can land far from the LM fit on the vTEC windows).
        max_iter="auto" is otherwise at most 100."""
        auto_iter = self.max_iter == "auto"
        if warm and getattr(self, "solver", "auto") == "auto" and contrasts is not None:
            return "als", WARM_AUTO_SWEEPS if auto_iter else int(self.max_iter)
        return self._resolve_solver(contrasts), 100 if auto_iter else int(self.max_iter)

    def _fit_als(self, X, y, sample_weight, contrasts, truth=None, eval_set=None):
        if truth is not None or eval_set is not None:
            raise ValueError(f"{type(self).__name__}: truth and eval_set are recorded per batch "
                             "by the one-pass solvers only; solver='als'/'lm' records the "
                             "objective and the RMSE of the targets in history_")
        saved = dict(self.__dict__)
        try:
            return self._fit_als_unsafe(X, y, sample_weight, contrasts)
        except BaseException:
            # A call that fails changes nothing (validate_data sets n_features_in_ early).
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise

    def _fit_als_unsafe(self, X, y, sample_weight, contrasts):
        from .solvers.contrast_ls import (
            ContrastData,
            ContrastSettings,
            ContrastState,
            contrast_ls,
        )
        from .solvers.one_pass import OnePassState

        warm = bool(self.warm_start) and hasattr(self, "working_U_")
        X = validate_data(self, X, reset=True, accept_sparse=["csr", "csc"],
                          dtype=list(FLOAT_DTYPES), ensure_min_samples=1)
        if sp.issparse(X) and X.nnz and not np.all(np.isfinite(X.data)):
            raise ValueError("Input X contains NaN or infinity.")
        y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D, got shape {y.shape}")
        n, d = X.shape
        if contrasts is None:
            if y.shape[0] != n:
                raise ValueError(f"y has {y.shape[0]} entries but X has {n} rows")
            C = None
        else:
            C = check_contrasts(contrasts, n, y.shape[0])
        sw = check_sample_weight(sample_weight, y.shape[0])
        keep = np.flatnonzero(sw > 0)
        if keep.shape[0] < y.shape[0]:
            y, sw = y[keep], sw[keep]
            if C is None:
                X = X[keep]
            else:
                C = C[keep]
        dtype = np.dtype(X.dtype)
        X = to_csr(X, np.float64) if sp.issparse(X) else np.ascontiguousarray(X, np.float64)
        k = min(self.n_factors, d)

        # Working coordinates z = x / s (a diagonal scaling keeps iFM's diagonal zero and needs
        # no centring, so sparse X stays sparse); warm start maps the old model into them.
        prev = None
        if warm and self.working_U_.shape == (d, k):
            prev = (self.w_, self.U_, self.V_, self.intercept_)
        if prev is not None and not np.any(self.mean_):
            s = self.scale_.astype(np.float64)
        elif self._uses_standardize():
            sq = np.asarray(X.multiply(X).mean(axis=0)).ravel() if sp.issparse(X) \
                else np.mean(X * X, axis=0)
            s = np.sqrt(sq)
            s[~(s > 0)] = 1.0
        else:
            s = np.ones(d)
        Xz = X @ sp.diags(1.0 / s) if sp.issparse(X) else X / s
        Xz = to_csr(Xz, np.float64) if sp.issparse(Xz) else Xz
        fit_b = self._uses_intercept() and bias_identifiable(C)
        if prev is not None:
            w, U, V, b = prev
            state = ContrastState(w * s, U * s[:, None], V * s[:, None], float(b))
        else:
            rs = check_random_state(self.random_state)
            U0 = np.linalg.qr(rs.standard_normal((d, k)))[0] if k else np.zeros((d, 0))
            state = ContrastState(np.zeros(d), U0, np.zeros((d, k)), 0.0)
        if not self._uses_intercept():
            state.b = 0.0
        auto = self.max_iter == "auto"
        method, max_iter = self._auto_schedule(contrasts, prev is not None)
        settings = ContrastSettings(
            zero_diagonal=self._zero_diagonal(), fit_intercept=fit_b,
            reg_linear=float(self.reg_linear), reg_pairwise=float(self.reg_pairwise),
            method=method, max_iter=max_iter, tol=float(self.tol), exact_iter=not auto)
        data = ContrastData(Xz, C, y, sw)
        # Small dense matrices every iteration: BLAS threads only add synchronisation here
        # (the thread policy of fmlearn._threads).
        try:
            with blas_single_thread():
                new, n_iter, info = contrast_ls(data, state, settings)
        except (ValueError, FloatingPointError, ZeroDivisionError,
                np.linalg.LinAlgError) as exc:
            # The data were validated above: what fails inside the solver is numerical (e.g.
            # C with entries near 1e300 overflows C^T C and scipy refuses the infinite
            # system), which the reliability guide promises as a DivergenceError.
            raise DivergenceError(f"{type(self).__name__}(solver={settings.method!r}) failed "
                                  f"numerically ({type(exc).__name__}: {exc}); the estimator "
                                  "keeps its previous state") from exc
        if info["diverged"]:
            raise DivergenceError(f"{type(self).__name__}(solver={settings.method!r}) diverged: "
                                  f"{info['diverged']}; the estimator keeps its previous state")
        tracking = prev is not None and max_iter == WARM_AUTO_SWEEPS and auto
        if auto and not info["converged"] and not tracking:
            warnings.warn(f"{type(self).__name__}(solver={settings.method!r}): the objective still "
                          f"decreased "
                          f"by more than tol={self.tol} (relative) after {n_iter} iterations",
                          ConvergenceWarning, stacklevel=3)
        # Commit only now: a failed call above leaves the estimator as it was.
        self.dtype_ = dtype.name
        self.n_features_in_ = d
        t = int(getattr(self, "n_batches_", 0)) if prev is not None else 0
        cast = lambda a: np.asarray(a, dtype=dtype)  # noqa: E731
        self._store_state(OnePassState(
            cast(new.w), cast(new.U), cast(new.V), float(new.b), t + n_iter,
            np.zeros(d, dtype), cast(s), None, float(np.sqrt(np.mean(y * y))),
            float(np.linalg.norm(new.w) + np.linalg.norm(new.U) * np.linalg.norm(new.V)),
            None, 0.5))
        self.n_iter_ = n_iter
        self.n_passes_ = n_iter
        self.batch_size_ = n
        self.intercept_fitted_ = bool(fit_b)
        self.history_ = {"rmse": list(info["rmse"]), "objective": list(info["objective"])}
        return self
