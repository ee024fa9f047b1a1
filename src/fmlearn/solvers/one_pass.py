"""One-pass alternating solver of the generalized FM (Lin and Ye 2016,, Algorithm 1) and its
relatives: improved FM with zero diagonal (Lin et al. 2019, §3.3), symmetric and asymmetric rank-one
matrix sensing (Lin and Ye 2016, §2.1). The moment-eliminating variant (Lin et al. 2019, Algorithm
1) plugs its diagonal correction into the same step through :mod:`fmlearn.solvers.moment`.

Model (working coordinates ``z = (x - mean) / scale``, fixed after the first batch)::

    f(z) = b + <w, z> + z^T M z,     M = (U V^T + V U^T) / 2,  U^T U = I   (rank <= 2k, Lin and Ye
    2016, Alg. 1) iFM:  M = (U V^T + V U^T) / 2 - diag(U V^T)                          (Lin et al.
    2019, §3.3)

One step on a batch of n rows with residuals r = y - f(Z) and weights s (sum 1 after scaling,
rho = s * r) forms the matrix-free operator

    E(B) = 1/2 Z^T (rho o Z B) - 1/2 h2 B + M B,      h2 = sum(rho),  h3 = Z^T rho

and runs one block power step  U <- QR(E(U)),  V <- E(U),  w <- w + h3   (Lin and Ye 2016, Alg. 1
lines 5-8). Every product touches the batch only through ``Z @ B`` and ``Z^T @ R`` with B, R of
width <= 2k+1; memory is O(kd) plus the batch, and no d x d matrix is formed (the spectral
initialisation is matrix-free above :data:`fmlearn.linalg.DENSE_MAX_DIM` features). How a batch is
read (chunked products without copies) lives in :mod:`fmlearn.solvers._one_pass_data`.

Why the shift: E[(1/2n) A'A(M)] = M + tr(M)/2 I for Gaussian x (Lin and Ye 2016, Theorem 4) and
E[h2] = tr(M* - M), so ``H1 - h2/2 I`` estimates M* - M. Lin and Ye 2016, Lemma 10 prints ``tr`` and
``- h2 I`` (and the concluding sentence ``H1 - h2 I + M -> M*``): that is a typo, the algorithm's
``1/2 tr`` / ``- 1/2 h2 I`` is right (Theorem 4 and Lemma 13 Eq. 5 have the 1/2), and the unshifted
iteration diverges (tested in tests/gfm/test_gfm.py). The arXiv version of Lin and Ye 2016
(arXiv:1608.05995) repeats A(M) in H1 in its Algorithm 1 line 1 by an extraction glitch; the
conference text is used.

iFM (Lin et al. 2019, §3.3): with diag(M) = 0 the shift and the moment terms vanish (Lin et al.
2019, Eq. 11); the solver uses the off-diagonal part of H1 and fills the diagonal of the
power-iteration operator with the current diag(U V^T), so that the operator tends to the rank-k
matrix U* V*^T whose off-diagonal part is M* (a fixed point argument; Lin et al. 2019 gives no
algorithm for iFM beyond "the same scheme").

Intercept (not in the seeds, needed for real data): E[h2] = (b* - b) + tr(M* - M) and the shift
cancels any intercept error, so ``b <- b + h2 - (tr M_new - tr M_old)`` converges with M.
"""


from dataclasses import dataclass

import numpy as np
from scipy.sparse.linalg import LinearOperator

from .._threads import blas_single_thread
from ..linalg import orthonormal_basis, top_eigenpairs
from ._one_pass_data import (  # noqa: F401 (re-exported: the batch interface of the step)
    Batch,
    BatchRows,
    predict_batch,
    scale_from_variance,
    standardization,
    weighted_moments,
)

__all__ = ["AUTO_BATCH_FACTOR", "MIN_BATCH_FACTOR", "Batch", "BatchRows", "OnePassSettings",
           "OnePassState", "auto_batch_size", "auto_max_iter", "contraction_stalled",
           "gaussian_gap", "model_change", "new_state", "one_pass_fit", "one_pass_solver",
           "one_pass_step", "one_pass_step_rows", "predict_batch"]

# A step whose residual RMS exceeds this multiple of the first batch's target RMS, or whose
# parameters grow this much beyond the first estimate, is declared divergent.
DIVERGENCE_FACTOR = 1e4

#: Rows per batch of ``batch_size="auto"``, in units of n_factors * n_features (Lin and Ye 2016,
#: Theorem 1 asks for n >= C k^3 d; on Gaussian data c = 10 converges fast and c ~ 2-3 is the edge).
AUTO_BATCH_FACTOR = 10
#: Below this many rows per batch (in units of k d) the theory gives no guarantee.
MIN_BATCH_FACTOR = 2
#: max_iter="auto": one pass when X holds at least this many batches (the one-pass iteration
#: contracts geometrically per batch), else passes over the re-used data until converged.
AUTO_MIN_BATCHES = 10
AUTO_MAX_PASSES = 100


def auto_max_iter(max_iter, n_batches):
    """Passes of ``max_iter="auto"``: one when the data hold at least ``AUTO_MIN_BATCHES``
    batches (the streaming algorithm), else up to ``AUTO_MAX_PASSES``; an int is kept."""
    if max_iter == "auto":
        return 1 if n_batches >= AUTO_MIN_BATCHES else AUTO_MAX_PASSES
    return int(max_iter)


def auto_batch_size(n_factors, n_features):
    """Rows per batch of ``batch_size="auto"``: ``AUTO_BATCH_FACTOR * k * d`` with ``k`` the
    effective rank (the callers pass ``min(n_factors, ...)``); the one rule of every one-pass
    estimator, :func:`fmlearn.fit_stream` and :mod:`fmlearn.distributed`."""
    return AUTO_BATCH_FACTOR * int(n_factors) * int(n_features)


@dataclass
class OnePassState:
    """Solver state in working coordinates plus the first-batch statistics it depends on.

    ``U`` (d, k) has orthonormal columns, ``V`` (d, k); ``mean``/``scale`` define the working
    coordinates; ``coef`` (d, 4) holds the moment-elimination coefficients (G1, G2, H1, H2) of
    Lin et al. 2019, Eq. 8-9 (None for other corrections); ``y_scale`` is the RMS of the first
    batch's targets (divergence reference); ``ref_norm`` the parameter norm after it; ``tau`` the
    per-feature phi - 1 - kappa^2 (moment correction only); ``t`` counts batches consumed.
    """

    w: np.ndarray
    U: np.ndarray
    V: np.ndarray
    b: float = 0.0
    t: int = 0
    mean: np.ndarray = None
    scale: np.ndarray = None
    coef: np.ndarray = None
    y_scale: float = 0.0
    ref_norm: float = 0.0
    tau: np.ndarray = None
    eta: float = 0.5

    def copy(self):
        c = lambda a: None if a is None else a.copy()  # noqa: E731
        return OnePassState(self.w.copy(), self.U.copy(), self.V.copy(), float(self.b),
                            int(self.t), c(self.mean), c(self.scale), c(self.coef),
                            float(self.y_scale), float(self.ref_norm), c(self.tau),
                            float(self.eta))


@dataclass
class OnePassSettings:
    """What to fit and how.

    correction : "shift" (Lin and Ye 2016, Alg. 1), "moment" (Lin et al. 2019, Alg. 1, fixed),
    "zero_diagonal" (iFM) or
        "none" (the unshifted iteration, kept only to demonstrate that it diverges).
    fit_linear, fit_intercept : learn w and b (False for rank-one sensing).
    standardize : compute mean/scale from the first batch (else z = x); the mean is removed only
        when ``fit_intercept`` (otherwise the scale is the root mean square).
    init : eigen-solver method of the spectral initialisation (see ``linalg.top_eigenpairs``).
    step : scale of the data term, E(B) = M B + step * (estimate of (M* - M) B), and of the w
        and b updates. 1 is the algorithm of the seeds (fresh batches).
    reuse : the batches have been seen before (passes after the first). The one-pass theory
        then no longer applies (the batch is not independent of the iterate) and the iteration
        is a projected gradient-type method on the empirical risk, whose step 1 can overshoot
        (e.g. batches of a few k d rows): a step is halved whenever it would increase the
        batch's loss (then doubled again, up to ``reuse_step``, for the next batch), and a batch
        is skipped when the step falls below ``min_step``.
    safeguard : apply the same monotone check to fresh batches (an in-sample test: on the
        designs the theory covers, the step decreases the batch loss and is accepted as is).
    """

    n_factors: int
    correction: str = "shift"
    fit_linear: bool = True
    fit_intercept: bool = True
    standardize: bool = True
    init: str = "auto"
    init_n_iter: int = 2
    random_state: object = None
    step: float = 1.0
    n_jobs: object = None
    reuse: bool = False
    reuse_step: float = 1.0
    safeguard: bool = False
    min_step: float = 1e-4
    divergence_factor: float = DIVERGENCE_FACTOR
    tau_floor: float = 1e-8


def new_state(n_features, n_factors, dtype=np.float64):
    """An empty state (t = 0): the first batch will standardise, estimate moments, initialise."""
    k = min(n_factors, n_features)
    return OnePassState(np.zeros(n_features, dtype), np.zeros((n_features, k), dtype),
                        np.zeros((n_features, k), dtype))


# -- first-batch statistics ---------------------------------------------------------------------

def _first_batch(rows, state, settings):
    d = rows.d
    if settings.standardize:
        # Centring turns x^T M x into a form with a constant term, so it needs an intercept;
        # without one, only the scale is normalised (still an exact reparametrisation).
        state.mean, state.scale = rows.standardization(center=settings.fit_intercept)
        if not (np.all(np.isfinite(state.mean)) and np.all(np.isfinite(state.scale))):
            raise ValueError("Input X contains NaN or infinity (or values so large that "
                             "their squares overflow)")
    else:
        state.mean, state.scale = np.zeros(d), np.ones(d)
    if settings.correction == "moment":
        from .moment import moment_coefficients

        kappa, phi = rows.moments(state.mean, state.scale)
        state.coef = moment_coefficients(kappa, phi, settings.tau_floor)
        state.tau = np.abs(phi - 1.0 - kappa * kappa)
    y_rms, y_mean = rows.target_moments()
    state.y_scale = y_rms
    if settings.fit_intercept:
        # Start the intercept at the mean target: the shift would absorb any start value, but a
        # large mean residual adds mean(y)/2 E[z z^T] noise to the spectral initialisation.
        state.b = y_mean


# -- one step ---------------------------------------------------------------------------------
def _trace(U, V, zero_diagonal):
    return 0.0 if zero_diagonal else float(np.einsum("ij,ij->", U, V))


def model_change(old, new):
    """Relative change of the model from ``old`` to ``new`` (states with ``w``, ``U``, ``V``):
    ``sqrt(|dw|^2 + ||dM||_F^2) / sqrt(|w|^2 + ||M||_F^2)`` with M = sym(U V^T), in O(d k^2)
    from the Gram matrices of the factors (no d x d matrix)."""
    def fro2(L, R):  # ||L R^T||_F^2 = tr(L^T L R^T R)
        return float(np.sum((L.T @ L) * (R.T @ R)))

    Un, Vn = new.U.astype(np.float64), new.V.astype(np.float64)
    Uo, Vo = old.U.astype(np.float64), old.V.astype(np.float64)
    # sym(U V^T) = L R^T with L = [U, V] / 2, R = [V, U]
    Ln, Rn = 0.5 * np.hstack([Un, Vn]), np.hstack([Vn, Un])
    Lo, Ro = 0.5 * np.hstack([Uo, Vo]), np.hstack([Vo, Uo])
    dM2 = max(fro2(np.hstack([Ln, -Lo]), np.hstack([Rn, Ro])), 0.0)
    dw2 = float(np.sum((new.w.astype(np.float64) - old.w.astype(np.float64)) ** 2))
    ref = fro2(Ln, Rn) + float(np.sum(new.w.astype(np.float64) ** 2))
    return float(np.sqrt((dM2 + dw2) / ref)) if ref > 0 else 0.0


def one_pass_step(X, y, sw, state, settings):
    """One batch of the alternating scheme; returns ``(new_state, info)`` (``state`` untouched).

    ``info`` has ``"rmse"`` (weighted residual RMS of the batch before the update, a prequential
    error), ``"change"`` (:func:`model_change` of the update) and ``"diverged"`` (None or a
    message; then ``new_state`` is ``state``).
    """
    return one_pass_step_rows(BatchRows(X, y, sw), state, settings)


@dataclass
class _StepTerms:
    """What the residual pass of a step gives the candidate updates (d x O(k) arrays)."""

    rows: object
    first: bool
    zero_diag: bool
    rho: object
    h2: float
    G: np.ndarray
    diag0: np.ndarray
    lin0: np.ndarray
    Uold: np.ndarray
    Vold: np.ndarray
    cache: dict


def _candidate(eta, state, settings, t):
    """(U, V, w, b) after a step of size ``eta`` (1: the seeds' step) from ``state``."""
    k = t.Uold.shape[1]
    d = t.Uold.shape[0]
    diag = eta * t.diag0

    def apply_E(B, ZtB=None):
        # E(B) = M B + eta (1/2 Z^T (rho o Z B) + diag0 o B),  M = sym(U V^T) (full diagonal)
        if ZtB is None:  # second read of the batch
            ZtB = t.rows.gram_pass(B, t.rho)
        out = (0.5 * eta) * ZtB + diag[:, None] * B
        if k:
            out += 0.5 * (t.Uold @ (t.Vold.T @ B) + t.Vold @ (t.Uold.T @ B))
        return out

    if not k:
        Unew, Vnew = t.Uold, t.Vold
    else:
        if t.first and "U0" in t.cache:  # the eigenvectors of eta * E0 do not depend on eta
            Unew = t.cache["U0"]
        elif t.first:
            op = LinearOperator((d, d), matvec=lambda v: apply_E(v.reshape(-1, 1)).ravel(),
                                matmat=apply_E, dtype=np.float64)
            _, Unew = top_eigenpairs(op, k, which="LM", method=settings.init,
                                     n_iter=settings.init_n_iter,
                                     random_state=settings.random_state)
            t.cache["U0"] = Unew
        else:
            Unew = orthonormal_basis(apply_E(t.Uold, ZtB=t.G[:, :k]))
        Vnew = apply_E(Unew)
    w = state.w.astype(np.float64)
    if t.lin0 is not None:
        w = w + eta * t.lin0
    b = state.b
    if settings.fit_intercept:
        b = b + eta * t.h2 - (_trace(Unew, Vnew, t.zero_diag) - _trace(t.Uold, t.Vold,
                                                                       t.zero_diag))
    return Unew, Vnew, w, float(b)


def _guarded_step(state, settings, t, rmse, info):
    """The step, halved while it would increase the batch's loss when the safeguard is on."""
    eta = float(state.eta) if settings.reuse and not t.first else float(settings.step)
    guarded = settings.safeguard or (settings.reuse and not t.first)
    while True:
        Unew, Vnew, w, b = _candidate(eta, state, settings, t)
        if not guarded:
            break
        # Accept only a step that does not increase this batch's loss, else halve it (a monotone
        # safeguard: always on re-used batches, on fresh ones only when settings.safeguard).
        trial = OnePassState(w, Unew, Vnew, b)
        new_rmse = float(np.sqrt(t.rows.rss(trial, t.zero_diag) / t.rows.wsum))  # extra read
        if np.isfinite(new_rmse) and new_rmse <= rmse * (1.0 + 1e-10):
            break
        eta *= 0.5
        if eta < settings.min_step:
            Unew, Vnew, w, b = t.Uold, t.Vold, state.w.astype(np.float64), state.b
            info["stalled"] = True
            break
    if settings.reuse and not t.first:
        # Try a larger step on the next batch (halvings are per step, not forever).
        state.eta = min(float(settings.reuse_step), 2.0 * eta) if not info.get("stalled") \
            else float(settings.reuse_step)
    info["step"] = eta
    return Unew, Vnew, w, b


def one_pass_step_rows(rows, state, settings):
    """:func:`one_pass_step` on a batch given as a :class:`BatchRows`-like object (the batch
    statistics may then be computed elsewhere, e.g. by :mod:`fmlearn.distributed`).

    BLAS runs single-threaded throughout (``fmlearn._threads.blas_single_thread``): the batch
    products are parallel over row chunks already, and the d x O(k) work between them (QR,
    small products, :func:`model_change`) only pays BLAS threads' wake-up latency, which on
    busy cores cost more than the operations themselves (measured: a d x k QR took 34 ms
    instead of ~1 ms at load 7).
    """
    with blas_single_thread():
        return _step_rows(rows, state, settings)


def _step_rows(rows, state, settings):
    old = state
    state = state.copy()
    first = state.t == 0
    if first:
        _first_batch(rows, state, settings)
    rows.bind(state.mean, state.scale, settings.n_jobs)
    k = state.U.shape[1]
    zero_diag = settings.correction == "zero_diagonal"

    # First read of the batch: residuals of the current model and every statistic built on them.
    stats = rows.residual_pass(state.U, state.V, state.w, state.b, zero_diag,
                               need_q=settings.correction not in ("shift", "none"))
    rmse = float(np.sqrt(stats["rss"] / rows.wsum))
    info = {"rmse": rmse, "diverged": None, "change": np.nan}
    # Safeguarded steps are monotone on their batch; only unguarded fresh batches can diverge.
    unguarded = not (settings.reuse or settings.safeguard)
    if not np.isfinite(rmse) or (not first and unguarded and state.y_scale > 0
                                 and rmse > settings.divergence_factor * state.y_scale):
        info["diverged"] = (f"the residual RMS on batch {state.t + 1} is {rmse:.3g}, "
                            f"{rmse / max(state.y_scale, 1e-300):.3g} times the RMS of the "
                            "first batch's targets")
        return old, info
    h2, G, q = stats["h2"], stats["G"], stats["q"]
    h3 = G[:, k]  # Z^T rho; G[:, :k] = Z^T (rho o Z U) feeds E(U)
    terms = _StepTerms(
        rows, first, zero_diag, stats["rho"], h2, G,
        _diagonal_term(rows.d, h2, h3, q, state, settings),
        _linear_update(h2, h3, q, state, settings) if settings.fit_linear else None,
        state.U.astype(np.float64), state.V.astype(np.float64), {})
    Unew, Vnew, w, b = _guarded_step(state, settings, terms, rmse, info)

    norm = float(np.linalg.norm(w) + np.linalg.norm(Vnew))
    finite = np.isfinite(norm) and np.isfinite(b)
    if first:
        state.ref_norm = norm
    elif not finite or (unguarded and norm > settings.divergence_factor
                        * max(state.ref_norm, 1e-12) + 1e-300):
        info["diverged"] = (f"the parameters exploded on batch {state.t + 1} (norm {norm:.3g} "
                            f"vs {state.ref_norm:.3g} after the first batch)")
        return old, info
    if not finite:
        info["diverged"] = "the first batch produced non-finite parameters"
        return old, info
    dtype = state.w.dtype
    state.U, state.V, state.w, state.b = (Unew.astype(dtype), Vnew.astype(dtype),
                                          w.astype(dtype), float(b))
    state.t += 1
    if not first:
        info["change"] = model_change(old, state)
    return state, info


def _diagonal_term(d, h2, h3, q, state, settings):
    """Diagonal part of the data term of E (a d-vector): the shift and the moment corrections.

    ``q = (Z o Z)^T rho`` (needed by the moment and zero-diagonal corrections).
    """
    c = settings.correction
    if c == "shift":
        return np.full(d, -0.5 * h2)
    if c == "none":
        return np.zeros(d)
    if c == "zero_diagonal":
        # off-diagonal part of H1 = 1/2 Z^T diag(rho) Z: remove its diagonal 1/2 (Z o Z)^T rho
        return -0.5 * q
    if c == "moment":
        from .moment import diagonal_correction

        return diagonal_correction(state.coef, h2, h3, q)
    raise ValueError(f"unknown correction {c!r}")


def _linear_update(h2, h3, q, state, settings):
    if settings.correction == "moment":
        from .moment import linear_update

        return linear_update(state.coef, h2, h3, q)
    return h3


# -- passes over the batches --------------------------------------------------------------------
def one_pass_solver(batches, state, settings, callback=None, step=None, history=None):
    """Run a one-pass step over an iterable of batches (one pass, each batch read once).

    Parameters
    ----------
    batches : iterable of (X, y, sample_weight) or of batch objects
        ``X`` dense C-contiguous or canonical CSR, all with the same number of columns; or
        objects that ``step`` takes (e.g. :class:`BatchRows`, a Dask batch).
    state : OnePassState (``new_state`` for a fresh fit)
    settings : OnePassSettings
    callback : callable(t, state, info) -> bool, optional
        Called after every batch; returning True stops.
    step : callable(batch, state, settings) -> (state, info), default one_pass_step_rows
    history : dict with lists "rmse" and "change", optional
        The batches before these (e.g. earlier ``partial_fit`` calls), for the stall test.

    The solver tracks its own contraction: when :func:`contraction_stalled` becomes true on a
    fresh batch (not on re-used data), the step's ``info`` gets ``"stall"``, a dict with the
    window's figures and the batch's per-feature skewness ``kappa`` and kurtosis ``phi`` (one
    extra read of that batch) and their :func:`gaussian_gap`, for the caller to report.

    Returns
    -------
    state, n_iter, info : ``info`` has ``"rmse"`` (list, per batch), ``"change"`` (list) and
        ``"diverged"`` (None, or the message of the batch that diverged; ``state`` is then the
        state before that batch).
    """
    wrap = step is None
    step = one_pass_step_rows if wrap else step
    rmses, changes = [], []
    track_r = list(history["rmse"]) if history else []
    track_c = list(history.get("change", [])) if history else []
    was_stalled = contraction_stalled(track_r, track_c)
    n_done = 0
    for batch in batches:
        if wrap and isinstance(batch, tuple):
            batch = BatchRows(*batch)
        new, info = step(batch, state, settings)
        if info["diverged"]:
            return state, n_done, {"rmse": rmses, "change": changes,
                                   "diverged": info["diverged"]}
        state = new
        n_done += 1
        rmses.append(info["rmse"])
        changes.append(info.get("change", np.nan))
        if not settings.reuse and hasattr(batch, "moments"):
            track_r.append(info["rmse"])
            track_c.append(changes[-1])
            stalled = contraction_stalled(track_r, track_c)
            if stalled and not was_stalled:
                info["stall"] = _stall_report(batch, state, track_r, track_c)
            was_stalled = stalled
        if callback is not None and callback(state.t, state, info):
            break
    return state, n_done, {"rmse": rmses, "change": changes, "diverged": None}


def one_pass_fit(batches, state, settings, *, max_iter="auto", tol=1e-4, weights=None,
                 callback=None, end_pass=None):
    """Passes of :func:`one_pass_solver` over the same batches until converged.

    Parameters
    ----------
    batches : callable returning an iterable of batches
        Called once per pass (every pass sees the same batches in the same order).
    state, settings, callback : as in :func:`one_pass_solver`
    max_iter : int or "auto"
        Most passes (:func:`auto_max_iter` resolves "auto").
    tol : float or None
        From the third pass on, stop when the pass's prequential RMSE changes by at most ``tol``
        (relative) from the previous pass or falls below ``tol`` times the RMS of the first
        batch's targets (noise-free data decrease geometrically to 0). None: run every pass.
    weights : sequence of float, optional
        Weight sum of every batch (weights the pass RMSE); default equal.
    end_pass : callable(p, state) -> bool, optional
        Called after every finished pass ``p`` (from 0); returning True stops the passes
        (early stopping on a validation set: ``info["stopped"]`` is then True).

    Passes after the first re-use the data: the one-pass theory no longer applies, so they run
    with ``settings.reuse`` (a monotone safeguard, :class:`OnePassSettings`).

    Returns
    -------
    state, n_iter, info : ``n_iter`` batch steps; ``info`` has ``"n_passes"``, ``"converged"``
        (True after a single pass), ``"rmse"``, ``"change"`` (lists over every step),
        ``"pass_rmse"`` (each finished pass's RMSE) and ``"diverged"``.
    """
    if max_iter == "auto":
        max_iter = auto_max_iter(max_iter, sum(1 for _ in batches()))
    wsum = None if weights is None else np.asarray(weights, dtype=np.float64)
    previous = np.inf
    converged = max_iter == 1
    n_done, rmses, changes, losses = 0, [], [], []
    p = 0
    for p in range(int(max_iter)):
        if p == 1:
            settings.reuse = True
            state.eta = settings.reuse_step
        state, done, info = one_pass_solver(batches(), state, settings, callback)
        n_done += done
        rmses += info["rmse"]
        changes += info["change"]
        if info["diverged"]:
            return state, n_done, {"n_passes": p + 1, "converged": False, "rmse": rmses,
                                   "change": changes, "diverged": info["diverged"]}
        r = np.square(info["rmse"])
        loss = float(np.sqrt(np.average(r, weights=None if wsum is None else wsum[:r.shape[0]])))
        losses.append(loss)
        if end_pass is not None and end_pass(p, state):
            return state, n_done, {"n_passes": p + 1, "converged": converged, "rmse": rmses,
                                   "change": changes, "diverged": None, "pass_rmse": losses,
                                   "stopped": True}
        # Pass 1 starts from the zero model, so compare from the third pass on.
        if tol is not None and p >= 2 and (abs(previous - loss) <= tol * previous
                                           or loss <= tol * state.y_scale):
            converged = True
            break
        previous = loss
    return state, n_done, {"n_passes": p + 1, "converged": converged, "rmse": rmses,
                           "change": changes, "diverged": None, "pass_rmse": losses}


# -- contraction tracking (no silent stall) -----------------------------------------------------
#: Batches per window of the stall test.
STALL_WINDOW = 5
#: A model that still changes by more than this (relative, :func:`model_change`) on every batch
#: of a window is still moving: a converged model only moves by the noise of its batches.
STALL_CHANGE = 0.1
#: Mean over features of |kappa| + |phi - 3| (skewness, kurtosis of the standardised feature),
#: beyond its sampling noise, above which the features are "far from Gaussian": centred
#: exponential features give 8, uniform ones 1.2.
GAUSSIAN_GAP = 0.5


def contraction_stalled(rmse, change, window=STALL_WINDOW):
    """True when the iteration has stopped contracting: over the last ``window`` batches the
    model still moved by more than ``STALL_CHANGE`` on every batch, yet the best batch RMSE did
    not halve from the ``window`` batches before (the first batch, the initialisation, is not
    counted). A contracting run (noise-free) halves its RMSE every batch or two; a converged
    noisy run moves by the noise only."""
    rmse = np.asarray(rmse[1:], dtype=np.float64)
    change = np.asarray(change[1:], dtype=np.float64)
    if rmse.shape[0] < 2 * window or change.shape[0] < window:
        return False
    moving = bool(np.all(change[-window:] > STALL_CHANGE))
    return moving and float(np.min(rmse[-window:])) > 0.5 * float(
        np.min(rmse[-2 * window:-window]))


def _stall_report(batch, state, rmse, change, window=STALL_WINDOW):
    # The batch's own standardisation: with the first batch's, the error of its scale alone
    # moves phi by ~12/sqrt(2n) and would make Gaussian features look heavy-tailed.
    kappa, phi = batch.moments(*batch.standardization(center=True))
    n = max(int(getattr(batch, "n", 0) or 0), 1)
    # Expected gap of Gaussian features from sampling noise alone (E|N(0, s^2)| = 0.8 s with
    # sd(kappa) = sqrt(6/n), sd(phi) = sqrt(24/n)), taken off so that the test does not fire on
    # small Gaussian batches.
    floor = 0.8 * (np.sqrt(6.0 / n) + np.sqrt(24.0 / n))
    return {"rmse": float(np.min(rmse[-window:])), "change": float(np.min(change[-window:])),
            "window": window, "kappa": kappa, "phi": phi,
            "gap": max(gaussian_gap(kappa, phi) - floor, 0.0)}


def gaussian_gap(kappa, phi):
    """Mean over features of ``|kappa| + |phi - 3|``: 0 for Gaussian features, where the plain
    one-pass step is unbiased (Lin et al. 2019, Theorem 4 has bias terms in kappa and phi - 3)."""
    return float(np.mean(np.abs(kappa) + np.abs(np.asarray(phi) - 3.0)))
