"""Improved factorization machine (iFM, Lin et al. 2019, §3.3) trained by the one-pass scheme.

    f(x) = b + <w, x> + x^T M x,     M = (U V^T + V U^T)/2 - diag(U V^T)

iFM keeps the classic FM's zero diagonal but drops its PSD constraint (U and V decoupled).
With diag(M) = 0 the self-interaction terms that make the generalized FM depend on the third
and fourth moments of the features disappear (Lin et al. 2019, Eq. 11), so no moment estimation is
needed and the sampling complexity is O(k d) whatever the feature law (Lin et al. 2019, §3.3).
"""


from sklearn.utils._param_validation import StrOptions

from .._base import BaseFM, FMRegressorMixin
from .._contrasts import ContrastALSMixin
from .._docs import fill_doc
from ._one_pass import OnePassFMMixin

__all__ = ["IFMRegressor"]


@fill_doc
class IFMRegressor(ContrastALSMixin, OnePassFMMixin, FMRegressorMixin, BaseFM):
    """Improved factorization machine (zero-diagonal, sign-indefinite) trained one pass.

    Model::

        f(x) = b + <w, x> + sum_{j != l} M_jl x_j x_l,   M = (U V^T + V U^T)/2 - diag(U V^T)

    Each mini-batch is read once and gives one step of Lin and Ye's (2016) alternating scheme with
    the diagonal removed (Lin et al. 2019, §3.3 "trained by the same scheme"): with residuals r and
    H1 = A'(r)/(2n), the block power step uses the operator ``offdiag(H1) + sym(U V^T)``. Its
    off-diagonal part estimates M*; its diagonal is filled with the current diag(U V^T), so that
    the operator tends to the low-rank matrix whose off-diagonal part is M* (an imputation of the
    unobservable diagonal; this construction is ours, the seed gives no algorithm for iFM). The
    linear term uses w <- w + X^T r / n, which is unbiased here because diag(M) = 0 removes the
    kappa o diag(dM) term (Lin et al. 2019, Lemma 5); the intercept uses b <- b + mean(r).

    When to use it: features that are not Gaussian (skewed, heavy-tailed, binary such as one-hot
    encodings), where the generalized FM's diagonal is poorly identifiable (small tau, see
    :func:`fmlearn.diagnostics.moment_invertibility`); labels with interactions of both signs,
    which the classic FM's PSD constraint cannot fit (Lin et al. 2019, Fig. 1). When not: if the
    self-interactions x_j^2 matter, use :class:`fmlearn.GFMRegressor`. A target M* = sym(U* V*^T)
    has rank up to 2k: give the iFM ``n_factors = 2k``.

    Not provided: a classifier. The one-pass step is a power iteration on a moment estimate of
    M* - M that relies on the residual being linear in the parameter errors (squared loss);
    with a logistic link the expected A'(r) is not an affine function of M* - M, and neither
    seed analyses that case, so a classifier head would have no guarantee to inherit.

    Parameters
    ----------
    n_factors : int, default=5
    solver : {"auto", "one_pass", "als", "lm"}, default="auto"
        "auto": "one_pass" for ordinary targets; with ``contrasts``, "lm" or "als" as in
        :class:`fmlearn.GFMRegressor` (a warm-started refit: at most 3 ALS sweeps). "als"
        and "lm" are the batch solvers of :mod:`fmlearn.solvers.contrast_ls` (see
        :class:`fmlearn.GFMRegressor`).
    batch_size : int or "auto", default="auto"
        Rows per mini-batch in ``fit`` ("auto": 10 k d); see :class:`fmlearn.GFMRegressor`.
    max_iter : int or "auto", default="auto"
        Most passes over the batches in ``fit``; see :class:`fmlearn.GFMRegressor`.
    tol : float or None, default=1e-4
        Stopping tolerance of the passes (None: run all ``max_iter`` passes).
    early_stopping, validation_fraction, n_iter_no_change : default=False, 0.1, 2
        Early stopping of ``fit``'s passes (the one-pass solvers): after each pass the
        validation rows (the ``eval_set`` of :meth:`fit`, else ``validation_fraction`` of the
        rows, not trained on) are scored (mean squared error, ``history_["val_loss"]``); the
        passes stop after ``n_iter_no_change`` passes without a decrease and the best pass's
        model is kept (``best_iteration_``). ``tol`` keeps its own meaning (both rules
        apply). See docs/early-stopping.md.
    safeguard : bool or "auto", default="auto"
        Halve a step that would increase its batch's loss also on fresh batches (see
        :class:`fmlearn.GFMRegressor`).
    fit_intercept : bool, default=True
    standardize : bool, default=True
        Fit on features standardised with the first batch's mean and standard deviation (an
        exact reparametrisation; a diagonal scaling keeps the diagonal of M zero).
    %(one_pass_run)s
    reg_linear, reg_pairwise : float, default=0.0
        solver="als" or "lm": ridge penalties on w and on (U, V) (working coordinates), added to
        the weighted sum of squared residuals.

    Attributes
    ----------
    w_, U_, V_, M_, intercept_, working_*_, mean_, scale_, n_batches_, n_iter_, batch_size_,
    history_ :
        As in :class:`fmlearn.GFMRegressor`; ``M_`` is zero-diagonal.

    References
    ----------
    M. Lin, S. Qiu, J. Ye et al. Which factorization machine modeling is better: a theoretical
    answer with optimal guarantee. AAAI 2019, §3.3 (Lin et al. 2019).

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import IFMRegressor
    >>> from fmlearn.datasets import make_fm_labels
    >>> X, y, truth = make_fm_labels(30000, 30, 2, kind="mixed_sign", random_state=0)
    >>> m = IFMRegressor(n_factors=4, batch_size=3000, random_state=0).fit(X, y, truth=truth)
    >>> bool(m.history_["recovery_error"][-1] < 1e-2)
    True
    >>> bool(np.allclose(m.M_.diagonal(), 0))
    True
    """

    _parameter_constraints = {
        "solver": [StrOptions({"auto", "one_pass", "als", "lm"})],
        **OnePassFMMixin._parameter_constraints,
    }

    def _correction(self):
        return "zero_diagonal"
