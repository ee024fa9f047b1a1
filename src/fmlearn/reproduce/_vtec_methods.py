"""The methods of Lin et al.'s (2019) Table 1 on contrast targets, for
:mod:`fmlearn.reproduce.vtec`.

Each method object has ``fit(window)`` and ``predict(window)`` (the predicted double
differences of the window's test station). What does not depend on a method's
hyper-parameters is computed once per window and kept in ``window.cache`` (the contrasted
encodings C X for the linear models, the target kernel C K C^T for kernel ridge), so that
the tuning, which fits every setting of a grid on the same window, pays for it once; the
results are the same as without the cache.
"""

import inspect
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg

#: Targets used by the kernel baseline per window (exact kernel ridge is cubic in them).
KERNEL_MAX_TARGETS = 1000


def _cached(w, key, compute):
    if key not in w.cache:
        w.cache[key] = compute()
    return w.cache[key]


class LinearContrast:
    """A linear f fitted on the contrasted encodings (exact: C (X w) = (C X) w)."""

    def __init__(self, estimator):
        self.est = estimator

    def fit(self, w):
        # Dense: n_targets x (2m + 8) is small, and scikit-learn's coordinate descent uses the
        # Gram matrix only on dense input; C X and its Gram matrix are shared by every setting.
        A = _cached(w, "CX", lambda: (w.Ctr @ w.Xtr).toarray())
        if "precompute" in self.est.get_params():
            self.est.set_params(precompute=_cached(w, "CX'CX", lambda: A.T @ A))
        self.est.fit(A, w.ytr)
        return self

    def predict(self, w):
        return np.asarray((w.Cte @ w.Xte) @ self.est.coef_).ravel()


def _kernel_system(w, max_targets, random_state):
    """The target kernel C K C^T of a seeded subset of the window's training targets, and the
    matrix P = C_te k(X_te, X_r) C^T giving the test double differences as P alpha."""
    from sklearn.metrics.pairwise import rbf_kernel

    rng = np.random.default_rng([random_state, w.day, w.start])
    n_t = w.ytr.shape[0]
    pick = np.sort(rng.choice(n_t, min(n_t, max_targets), replace=False))
    C = w.Ctr[pick]
    rows = np.unique(C.indices)
    C = C[:, rows]
    Xr = w.Xtr[rows].toarray()
    # gamma = 1 / (d Var(x)), scikit-learn's "scale" rule, from the training rows.
    gamma = 1.0 / (Xr.shape[1] * max(Xr.var(), 1e-12))
    KC = np.asarray(C @ rbf_kernel(Xr, gamma=gamma))
    Kt = np.asarray(C @ KC.T)
    Kte = rbf_kernel(w.Xte.toarray(), Xr, gamma=gamma)
    P = np.asarray(C @ np.asarray(w.Cte @ Kte).T).T
    return pick, Kt, P, gamma


class KernelContrast:
    """Kernel ridge regression on contrasts, RBF kernel: alpha = (C K C^T + lambda I)^-1 y and
    f(x) = k(x, X) C^T alpha, on ``max_targets`` training targets drawn per window (seeded by
    ``random_state`` and the window's day and start)."""

    def __init__(self, alpha, max_targets=KERNEL_MAX_TARGETS, random_state=0):
        self.alpha, self.max_targets, self.random_state = alpha, max_targets, random_state

    def fit(self, w):
        key = ("kernel", self.max_targets, self.random_state)
        pick, Kt, self.P, self.gamma = _cached(
            w, key, lambda: _kernel_system(w, self.max_targets, self.random_state))
        A = Kt.copy()
        A[np.diag_indices_from(A)] += self.alpha
        self.dual_coef_ = scipy.linalg.solve(A, w.ytr[pick], assume_a="pos")
        return self

    def predict(self, w):
        return self.P @ self.dual_coef_


class OutOfRangeWarning(UserWarning):
    """Predicted double differences beyond what the window's training differences support."""


#: A prediction beyond this multiple of the largest training target |y| is flagged.
OUT_OF_RANGE_FACTOR = 2.0


def check_range(pred, y_train, name):
    """Warn (:class:`OutOfRangeWarning`) when predicted contrasts leave the range of the
    training targets by more than :data:`OUT_OF_RANGE_FACTOR`: the training differences give
    no support there (a model that extrapolates in the directions the double differences leave
    free). Returns whether it warned."""
    top = float(np.max(np.abs(y_train))) if y_train.shape[0] else 0.0
    worst = float(np.max(np.abs(pred))) if pred.shape[0] else 0.0
    if worst > OUT_OF_RANGE_FACTOR * top:
        warnings.warn(f"{name}: a predicted double difference of {worst:.3g} TECU is more than "
                      f"{OUT_OF_RANGE_FACTOR:g} times the largest training one ({top:.3g}): "
                      "outside what the training differences support", OutOfRangeWarning,
                      stacklevel=3)
        return True
    return False


class FactorContrast:
    """An estimator with ``fit(X, y, contrasts=C)`` / ``predict_contrasts``, warm-started from
    the previous window of its segment (a cold start gets more sweeps). With ``guard``,
    predictions outside the range the training differences support are replaced by those of
    a more regularised refit of the window (:meth:`_guarded`)."""

    def __init__(self, estimator, cold_passes=3, warm_passes=1, guard=True):
        self.est, self.cold, self.warm = estimator, cold_passes, warm_passes
        self.started, self.guard, self.guard_refits = False, guard, 0

    def fit(self, w):
        d_prev = getattr(self.est, "n_features_in_", None)
        warm = self.started and d_prev == w.Xtr.shape[1]
        # iFM counts iterations in max_iter, the classic FM in n_iter (docs/parameters.md).
        n_iter = "max_iter" if "max_iter" in self.est.get_params() else "n_iter"
        self.est.set_params(warm_start=warm, **{n_iter: self.warm if warm else self.cold})
        self.est.fit(w.Xtr, w.ytr, contrasts=w.Ctr)
        self.started = True
        return self

    def predict(self, w):
        pred = self.est.predict_contrasts(w.Xte, w.Cte)
        self.out_of_range = check_range(pred, w.ytr, type(self.est).__name__)
        if self.out_of_range and self.guard:
            pred = self._guarded(w, pred)
        return pred

    def _guarded(self, w, pred):
        """The online system's answer to an out-of-range prediction (it sees the training
        targets and the test inputs, never the test targets): refit the window cold with 100
        times the regularisation, up to 3 times, until the predictions are back in the range
        the training differences support; the warm-started model of the segment is kept."""
        from sklearn.base import clone

        top = OUT_OF_RANGE_FACTOR * float(np.max(np.abs(w.ytr)))
        p = self.est.get_params()
        n_iter = "max_iter" if "max_iter" in p else "n_iter"
        for k in range(1, 4):
            alt = clone(self.est).set_params(
                warm_start=False, reg_linear=p["reg_linear"] * 100.0 ** k,
                reg_pairwise=p["reg_pairwise"] * 100.0 ** k, **{n_iter: self.cold})
            alt.fit(w.Xtr, w.ytr, contrasts=w.Ctr)
            alt_pred = alt.predict_contrasts(w.Xte, w.Cte)
            self.guard_refits += 1
            if np.max(np.abs(alt_pred)) <= top:
                return alt_pred
        return alt_pred


def _ridge(p):
    from sklearn.linear_model import Ridge

    return LinearContrast(Ridge(alpha=p["reg"], fit_intercept=False))


def _lasso(p):
    from sklearn.linear_model import Lasso

    return LinearContrast(Lasso(alpha=p["reg"], fit_intercept=False, max_iter=5000,
                                precompute=True))


def _elastic(p):
    from sklearn.linear_model import ElasticNet

    return LinearContrast(ElasticNet(alpha=p["reg"], l1_ratio=0.5, fit_intercept=False,
                                     max_iter=5000, precompute=True))


def _kernel(p):
    return KernelContrast(p["reg"], p.get("max_targets", KERNEL_MAX_TARGETS))


def _ifm(p):
    from ..gfm.ifm import IFMRegressor

    return FactorContrast(IFMRegressor(n_factors=p["rank"], solver="als", reg_linear=p["reg"],
                                       reg_pairwise=p["reg"], random_state=0, n_jobs=1))


def _fm(p):
    from ..fm import FMRegressor

    return FactorContrast(FMRegressor(n_factors=p["rank"], solver="als", reg_linear=p["reg"],
                                      reg_pairwise=p["reg"], random_state=0, n_jobs=1),
                          cold_passes=30, warm_passes=5)


def _fm_available():
    from ..fm import FMRegressor

    return "contrasts" in inspect.signature(FMRegressor.fit).parameters


@dataclass(frozen=True)
class Method:
    make: object               # params dict -> object with fit(window) / predict(window)
    ranked: bool = False       # tune the rank too
    available: object = None   # None or a callable telling whether the method can run now


#: Table 1's columns, in the paper's order; adding a method is one entry.
METHODS = {
    "Ridge": Method(_ridge),
    "LASSO": Method(_lasso),
    "ElasticNet": Method(_elastic),
    "Kernel": Method(_kernel),
    "FM": Method(_fm, ranked=True, available=_fm_available),
    "iFM": Method(_ifm, ranked=True),
}
