"""Generalized factorization machine trained by the one-pass alternating scheme (Lin and Ye 2016,,
Algorithm 1) or by its moment-eliminating variant for non-Gaussian features (Lin et al. 2019, §3.2).

    f(x) = b + <w, x> + x^T M x,     M = (U V^T + V U^T) / 2     (symmetric, rank <= 2k)

No PSD and no zero-diagonal constraint (Lin and Ye 2016, §2): M may have eigenvalues of both signs,
which the classic FM (M = V V^T minus its diagonal) cannot represent.

The family's package (the generalized FM and its special cases, all fitted by the one-pass
scheme): :class:`GFMRegressor` here, :class:`fmlearn.IFMRegressor` in :mod:`fmlearn.gfm.ifm`,
the rank-one sensing models in :mod:`fmlearn.gfm.sensing` (importable as ``fmlearn.ifm`` and
``fmlearn.sensing``, their former paths); the estimator plumbing shared by every one-pass model
in :mod:`fmlearn.gfm._one_pass` (the one-pass run that ``fit``, ``partial_fit`` and the Dask
backend share), the algorithm in :mod:`fmlearn.solvers.one_pass`.
"""

import warnings

import numpy as np
from sklearn.utils._param_validation import StrOptions

from .._base import BaseFM, FMRegressorMixin
from .._contrasts import ContrastALSMixin
from ..exceptions import SmallBatchWarning
from ._one_pass import OnePassFMMixin

__all__ = ["GFMRegressor", "SmallBatchWarning"]


class GFMRegressor(ContrastALSMixin, OnePassFMMixin, FMRegressorMixin, BaseFM):
    """Generalized factorization machine (gFM) trained one pass over mini-batches.

    Model::

        f(x) = b + <w, x> + x^T M x,      M = (U V^T + V U^T) / 2,   rank(M) <= 2k

    ``solver="one_pass"`` is Lin and Ye 2016, Algorithm 1: each mini-batch of n rows is read once
    and gives one step of a block power iteration on the matrix-free operator
    ``H1 - h2/2 I + M`` (H1 = A'(r)/(2n), h2 = mean residual), a QR, and ``w <- w + X^T r / n``.
    On Gaussian features the error shrinks geometrically when n >~ c k d (Lin and Ye 2016, Theorems
    1, 15; c ~ 2-3 is the edge, c = 10 converges fast). ``solver="moment"`` is Lin et al. 2019,
    Algorithm 1 with its fixes (see :mod:`fmlearn.solvers.moment`): the third and fourth moments of
    every feature, estimated on the first batch, remove the skewness/kurtosis bias that makes the
    plain method diverge on skewed features; it needs the tau-Moment Invertible Property
    (tau = |phi - 1 - kappa^2| > 0, see :func:`fmlearn.diagnostics.moment_invertibility`).

    The theory assumes features with zero mean and unit variance: with ``standardize=True``
    (default) the mean and scale of every feature are estimated on the first batch and the model
    is fitted on z = (x - mean) / scale, implicitly (sparse input stays sparse). The model is an
    exact reparametrisation, so ``w_``, ``U_``, ``V_``, ``M_``, ``intercept_`` are reported in
    the input coordinates.

    Parameters
    ----------
    n_factors : int, default=5
        k, the number of columns of U and V.
    solver : {"auto", "one_pass", "moment", "als", "lm"}, default="auto"
        "auto" is "one_pass" for ordinary targets; with ``contrasts``, "lm" on a cold start
        and "als" when warm-starting from a model of the same shape (then ``max_iter="auto"``
        means at most 3 sweeps: the refit of an online protocol, which tracks a slowly moving
        target; docs/vtec.md).
        "als" and "lm" are the batch solvers of :mod:`fmlearn.solvers.contrast_ls`
        (alternating exact ridge solves over (b, w, V) and (b, w, U), or Levenberg-Marquardt
        on all parameters; the objective never increases); they fit y itself or contrasts of f
        (Lin et al. 2019, §4.2; docs/vtec.md), with ``max_iter`` iterations ("auto": until the
        relative decrease is below ``tol``, at most 100). The one-pass solvers cannot fit
        contrasts (they rely on the law of the rows x, which a contrast breaks).
    batch_size : int or "auto", default="auto"
        Rows per mini-batch in ``fit`` ("auto": 10 k d). ``fit`` cuts X in order into
        ``max(1, n // batch_size)`` batches of about equal size; ``partial_fit`` takes the batch
        it is given. When X has fewer rows than one batch it is used whole (one batch), and a
        :class:`SmallBatchWarning` is issued below about 2 k d rows.
    max_iter : int or "auto", default="auto"
        Most passes over the batches in ``fit``. One pass is the streaming algorithm of the
        seeds. Further passes re-use the data, which the one-pass theory does not cover (a batch
        is no longer independent of the iterate): they run the same step as a projected
        gradient-type method on the empirical risk, with a monotone safeguard (a step that
        would increase the batch's loss is halved until it does not). From the third pass on,
        ``fit`` stops when the training RMSE changes by at most ``tol`` (relative) from one pass
        to the next or falls below ``tol`` times the RMS of the targets. "auto": one pass when
        X holds at least 10 batches, else at most 100 passes (small data sets).
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
        Also on fresh batches, halve a step that would increase the batch's own loss (an extra
        read of the batch per step). "auto": only when ``fit`` makes more than one pass (small
        data sets, where the run is outside the one-pass theory anyway; on data that the theory
        covers the step decreases the loss and is accepted unchanged). A single streaming pass
        and ``partial_fit`` run the seeds' algorithm unguarded: a run outside the theory (e.g.
        plain one-pass gFM on skewed features) stops contracting, which the solver detects and
        reports with a ``ConvergenceWarning`` naming the remedy, and may later explode
        (``DivergenceError``); with ``True`` such runs converge slowly or stall instead.
    fit_intercept : bool, default=True
        Learn a constant b (not in the seeds): E[h2] = (b* - b) + tr(M* - M), so
        b <- b + h2 - (tr M_new - tr M_old).
    standardize : bool, default=True
        Fit on features standardised with the first batch's mean and standard deviation (only
        scaled, by their root mean square, when ``fit_intercept=False``: removing the mean
        creates a constant term that only an intercept can absorb).
    init : {"auto", "dense", "randomized", "lanczos"}, default="auto"
        Eigen-solver of the spectral initialisation on the first batch (top-k eigenvectors of
        ``H1 - h2/2 I`` by magnitude); "auto" is exact (dense) up to
        :data:`fmlearn.linalg.DENSE_MAX_DIM` features and a randomized block power method above.
    warm_start : bool, default=False
        ``fit`` continues from the fitted state (same standardisation and moments).
    random_state : int, RandomState or None, default=None
        Used only by the randomized initialisation.
    n_jobs : int or None, default=None
        Threads for the batch products (None: all CPUs). Rows are processed in fixed chunks
        with single-threaded BLAS and summed in a fixed order, so results do not depend on it.
    verbose : int, default=0
        Progress bar with the prequential batch RMSE (and recovery error / validation RMSE).
    reg_linear, reg_pairwise : float, default=0.0
        solver="als" or "lm": ridge penalties on w and on (U, V) (working coordinates), added
        to the weighted sum of squared residuals (libFM's convention, as in FMRegressor).

    Attributes
    ----------
    w_ : ndarray of shape (n_features,)
    U_, V_ : ndarrays of shape (n_features, k)
        Factors in input coordinates (U_ has orthonormal columns when standardize=False).
    M_ : LowRankOperator of shape (n_features, n_features)
        The symmetric second-order matrix, matrix-free.
    intercept_ : float
    working_w_, working_U_, working_V_, working_intercept_, mean_, scale_
        The solver state in standardised coordinates (what ``partial_fit`` continues from).
    moment_coef_ : ndarray of shape (n_features, 4) or None
        solver="moment": the coefficients (G1, G2, H1, H2) of Lin et al. 2019, Eq. 8-9.
    moment_tau_ : ndarray of shape (n_features,) or None
        solver="moment": tau = |phi - 1 - kappa^2| per standardised feature (first batch).
    n_batches_ : int
        Batches consumed since the first one (including by ``partial_fit``).
    n_iter_ : int
        Batch steps taken by the last ``fit`` (passes times the number of batches).
    n_passes_ : int
        Passes over the data made by the last ``fit``.
    step_ : float
        Step of the next re-used batch (1, halved after rejected steps and doubled back).
    batch_size_ : int
        Largest batch of the last call.
    history_ : dict of lists, one entry per batch
        ``"rmse"``: residual RMS of each batch *before* its update (a prequential error);
        ``"change"``: relative change of the model made by the batch (the solver's contraction
        tracking; NaN for the first batch);
        ``"recovery_error"``: (|w - w*| + ||M - M*||_2) / (|w*| + ||M*||_2) when ``truth`` is
        passed (spectral norm, computed without d x d matrices); ``"val"``: RMSE on
        ``eval_set``.

    References
    ----------
    M. Lin and J. Ye. A non-convex one-pass framework for generalized factorization machine and
    rank-one matrix sensing. NeurIPS 2016
    (long version with proofs: arXiv:1608.05995).
    M. Lin et al. Which factorization machine modeling is better: a theoretical answer with
    optimal guarantee. AAAI 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import GFMRegressor
    >>> from fmlearn.datasets import make_gfm
    >>> X, y, truth = make_gfm(40000, 40, 2, random_state=0)
    >>> m = GFMRegressor(n_factors=2, batch_size=2000, random_state=0).fit(X, y, truth=truth)
    >>> m.n_batches_
    20
    >>> bool(m.history_["recovery_error"][-1] < 1e-6)
    True
    """

    _parameter_constraints = {
        "solver": [StrOptions({"auto", "one_pass", "moment", "als", "lm"})],
        **OnePassFMMixin._parameter_constraints,
    }

    def _correction(self):
        return "moment" if self.solver == "moment" else "shift"

    def _stall_remedy(self):
        if self.solver == "moment":
            return "use IFMRegressor (no diagonal, no dependence on the moments)"
        return "use solver='moment' or IFMRegressor"

    def _after_first_batch(self, state):
        from ..diagnostics import TAU_CAUTION

        if state.tau is None:
            return
        bad = np.flatnonzero(state.tau < TAU_CAUTION)
        if bad.shape[0]:
            shown = ", ".join(str(j) for j in bad[:10]) + (" ..." if bad.shape[0] > 10 else "")
            warnings.warn(
                f"GFMRegressor(solver='moment'): {bad.shape[0]} feature(s) have a small moment "
                f"invertibility tau = |phi - 1 - kappa^2| < {TAU_CAUTION} (features {shown}). "
                "Their self-interactions M_jj are poorly identifiable (Lin et al. 2019, "
                "Definition 2, Proposition 1: binary features have tau = 0); this is a caution, "
                "not a verdict (the low-rank structure can still pin them down). IFMRegressor, "
                "which has no diagonal, does not depend on tau.", UserWarning, stacklevel=4)
