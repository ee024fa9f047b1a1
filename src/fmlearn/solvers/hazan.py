"""Hazan's algorithm (Frank-Wolfe over the spectahedron) for the convex FM of Yamada et al. 2017.

Model (Yamada et al. 2017, Eq. 1), with z = [1, x]:

    f(x) = w^T z + 1/2 tr(W (x x^T - diag(x o x))),     W psd,  tr(W) <= eta

Regression (Yamada et al. 2017, Eq. 2-3): the linear part is eliminated, J(W) = min_w sum_i s_i
r_i^2 + lam1 ||w_{1:}||^2 with r = y - Z w - q(W) and q_i(W) = 1/2 tr(W (x_i x_i^T - diag(x_i o
x_i))). Each iteration (Algorithm 1):

1. residual r of the weighted ridge fit of y - q on Z (conjugate gradient, Eq. 5) and g = s o r;
2. the leading eigenpair (p, rho) of -grad J = M(g) = X^T diag(g) X - diag((X o X)^T g) by
   Lanczos (ARPACK's eigsh) on the matrix-free operator v -> X^T (g o X v) - c o v (two sparse
   products, O(nnz)), warm-started from the previous p, relative tolerance ``eig_tol / (t+1)^2``;
3. the Frank-Wolfe gap <W - eta p p^T, grad J> = eta rho - 2 g^T q (a bound on J(W) - J*);
4. the step W <- (1 - a) W + a eta p p^T with a = 2/(t+2) or the exact minimizer of the
   quadratic J along the segment (Eq. 6, corrected below), stored as atoms P diag(lam) P^T; the
   cached q and the ridge solution are updated by the same convex combination, so the training
   predictions cost O(nnz) per iteration, never O(nnz * atoms).

``step="pairwise"`` replaces step 4 by a pairwise step (Lacoste-Julien
& Jaggi, NeurIPS 2015): the mass of the away vertex (the atom of W, or the unused budget, with
the smallest p_k^T M(g) p_k) moves to eta p p^T, W <- W + a m (p p^T - p_k p_k^T), with the same
exact line search over a in [0, 1]. Frank-Wolfe's step shrinks every atom alike, so mass put on
early, poor atoms leaves only like 1/t; the pairwise step removes it where it is. The gap of
step 3 still certifies every iterate, and the stopping rule uses the best certificate so far,
J(W) - max_t (J(W_t) - gap_t). ``step="auto"`` (the estimators' default) computes both
the exact Frank-Wolfe and the pairwise candidate and takes Frank-Wolfe's when the pairwise
step is a drop step (its line search stopped at a = 1: the away vertex had too little mass)
and Frank-Wolfe's objective is lower, else the pairwise one. Pairwise steps stall when mass
must leave many atoms at once (a run of drop steps, each emptying one small atom: Lacoste-
Julien & Jaggi's "swap" steps, the ones their analysis cannot bound), Frank-Wolfe's when poor
early atoms must leave. Comparing the two objectives at every step instead (no drop
condition) ends 31% above the pairwise run after 60 steps on tests/convex/test_convex.py's
regression: the greedy choice is per step, not per run.

Corrections to the printed algorithm (Yamada et al. 2017, §2.4), each derived from Eq. 2-3 and
tested:

* Sign of D. "Derivative computation" first writes D = -diag(C ybar) and later "Finally,
  D = diag(y - f)", dropping the minus sign. With D = diag(y - f), X D X^T is the *negative*
  gradient; its top eigenvector is the Frank-Wolfe vertex. The literal reading gives an ascent
  direction (the line search then returns a = 0).
* Zero diagonal. grad q_i(W) = 1/2 (x_i x_i^T - diag(x_i o x_i)); the paper's X D X^T keeps the
  diagonal, which is not the gradient of the model of Eq. 1. We subtract diag((X o X)^T g).
* Line search (Eq. 6). J is a quadratic of a along the segment; its minimizer is
  a* = delta^T C r_bar / delta^T C delta with C = R^T R (+ lam1 H^T H), r_bar = y - q(W) and
  delta = eta q(p p^T) - q(W): the paper prints R where the derivation gives R^T R, and drops
  the eta of the rescaled loss J_eta (Algorithm 1, first line); without it a >= 1 always. C v is
  s o (v - Z w*(v)) with w*(v) the ridge solution, so one extra CG solve (for q(p p^T)) per
  iteration gives the numerator (= gap / 2) and the denominator.
* Atom weights. The printed rule reads lam_k <- (1 - a) lam_k for k < t; every existing atom
  (k <= t) must shrink for W to stay a convex combination.
* Feasible set. Because the model ignores the diagonal of W, -grad J has zero diagonal, so its
  top eigenvalue is >= 0 and any psd W of trace < eta can be padded with a diagonal to trace eta
  without changing a prediction: ``tr(W) = eta`` (the paper) and ``tr(W) <= eta`` have the
  same optimal value and the same iterates. We start from W = 0 (the paper's random start makes
  no difference after the first step a_0 = 1) and keep iterates with tr(W) <= eta.

Classification (an extension beyond the paper): the logistic loss sum s_i log(1 + exp(-y_i f_i))
+ lam1/2 ||w_{1:}||^2. The linear part has no closed form; it is re-fitted by Newton's method
from the previous w after every step (so W follows Frank-Wolfe on the partially minimized,
still convex objective), and the step is the exact 1-D minimizer of the smooth loss along the
segment (safeguarded Newton) or 2/(t+2). The same operator gives the gradient with
g = -s o l'(f) / 2.
"""

from dataclasses import dataclass

import numpy as np
from scipy.sparse.linalg import LinearOperator

from ..linalg import leading_eigenpair
from ._hazan_face import compress_atoms, face_steps  # noqa: F401 (compress_atoms: public here)
from ._hazan_linear import LogisticLinear, RidgeLinear, RidgeSystem  # noqa: F401 (RidgeSystem)
from ._hazan_rows import (  # noqa: F401  (CFMData .. sparse_pair: this module's public names)
    CFMData,
    LocalRows,
    as_rows,
    atom_quadratic,
    blk_atom,
    blk_atom_scores,
    blk_current,
    blk_exact_step,
    blk_gradient_matvec,
    blk_logistic_curvature,
    blk_logistic_loss,
    blk_logistic_segment,
    blk_pair,
    blk_pair_step,
    blk_quadratic,
    blk_ridge_apply,
    blk_ridge_diagonal,
    blk_ridge_rhs,
    blk_scale,
    blk_squared_loss,
    blk_step,
    cfm_data,
    logistic_line_search,
    quadratic_part,
    safeguarded_newton,
    sparse_pair,
)


@dataclass
class CFMState:
    """Iterate of Hazan's algorithm: W = P[:, :m] diag(lam[:m]) P[:, :m]^T, linear part w0, w.

    ``t`` counts Frank-Wolfe steps taken (it drives a = 2/(t+2) across warm starts); ``v0`` is
    the last eigenvector (the Lanczos warm start) or None.
    """

    w0: float
    w: np.ndarray
    P: np.ndarray
    lam: np.ndarray
    t: int = 0
    v0: object = None

    @property
    def n_atoms(self):
        return self.lam.shape[0]

    def factors(self):
        """U with W = U U^T (d x atoms), for the FM prediction kernel (Yamada et al. 2017,
        "Prediction")."""
        return self.P * np.sqrt(np.maximum(self.lam, 0.0))


@dataclass
class HazanSettings:
    trace_bound: float
    max_iter: int
    loss: str = "squared"  # "squared" | "logistic"
    step: str = "exact"  # "exact" | "pairwise" | "auto" (pairwise unless a drop step that
    # Frank-Wolfe's beats; all with exact line searches) | "standard" (2 / (t + 2))
    tol: float = 0.0  # stop when the certified gap <= tol * gap_scale
    gap_scale: object = None  # the scale of tol (None: the objective; see baseline_loss)
    reg_linear: float = 0.0
    eig_tol: float = 1e-2  # C_f of Algorithm 1, as a relative Lanczos tolerance
    eig_schedule: bool = True  # eig_tol / (t+1)^2 (Algorithm 1) or a fixed eig_tol
    cg_tol: float = 1e-10
    corrective: int = 0  # corrective steps on the atoms' face after each step (._hazan_face)
    refresh_every: int = 50  # recompute cached q from the atoms (stops round-off drift)
    linear_mask: object = None  # (d,) 0/1: features with a linear weight (None: all; Eq. 14)
    metric: tuple = ("rmse", -np.inf, np.inf)  # train metric: ("rmse", lo, hi) clipped, or
    # ("error_rate",) of the margins' signs


# -- linear algebra helpers (the rows and their block functions: ._hazan_rows) ------------------
def gradient_operator(rows, c, group=None):
    """The d x d operator M(g) = X^T diag(g) X - diag((X o X)^T g) (= -grad J), matrix-free,
    for the g stored on ``rows`` (by :func:`blk_current`) and c = (X o X)^T g; with ``group``
    (an index into ``rows.groups``), its diagonal block on that group's features."""
    if group is None:
        d = rows.n_features
    else:
        idx = rows.groups[group]
        d = idx.shape[0]
        c = c[idx]

    def matvec(v):
        v = np.ravel(v)
        return rows.reduce(blk_gradient_matvec, v, group)[0] - c * v

    return LinearOperator((d, d), matvec=matvec, dtype=np.float64)


def zero_diag_operator(data, g, group=None):
    """:func:`gradient_operator` of in-memory data for a given g (tests, diagnostics)."""
    rows = LocalRows(data)
    rows.vectors["g"] = np.asarray(g, dtype=np.float64)
    gi = None if group is None else next(
        k for k, grp in enumerate(data.groups) if grp is group)
    return gradient_operator(rows, data.X2T @ rows.vectors["g"], gi)


AUTO_TRACE_FACTOR = 3.0


def baseline_loss(data, loss):
    """The loss of the constant model (no feature used): sum_i s_i (y_i - ybar)^2 for the
    squared loss, the class entropy sum s * H(share of positives) for the logistic loss (labels
    +-1); 0 for constant targets. The scale of the estimators' ``tol``, as scikit-learn's Lasso
    measures its duality gap against ||y||^2: unlike the objective it does not shrink as the fit
    gets good, and it follows the units of y (squared loss) as the gap does."""
    sw, sy, syy, _, _ = as_rows(data).reduce(blk_scale)
    if not sw > 0:
        return 0.0
    if loss == "squared":
        return max(syy - sy * sy / sw, 0.0)
    share = min(max(0.5 * (1.0 + sy / sw), 0.0), 1.0)
    if share in (0.0, 1.0):
        return 0.0
    return -sw * (share * np.log(share) + (1.0 - share) * np.log1p(-share))


def auto_trace_bound(data, loss):
    """``trace_bound="auto"``: ``AUTO_TRACE_FACTOR * s_y / m2``, where m2 is the weighted mean
    of the squared non-zero feature values and s_y the weighted standard deviation of y (the
    squared loss) or, for the logistic loss, log 99 = 4.6, the margin of a 99%-confident
    prediction (with s_y = 1 the bounded margins left the decisions on the majority side:
    recall 0.18-0.20 on tests/test_defaults.py's 10% and 3% positives, 0.70-0.72 at s_y = 3.3).

    A pair (j, l) explained by one atom p = (e_j + e_l) / sqrt 2 of weight eta has W_jl = eta / 2,
    so eta = 2 s_y / m2 lets one pair of typical values move f by one standard deviation of y.
    Under X -> a X, y -> b y the bound scales as b / a^2, as W does, so the iterates do not
    depend on the units. The factor 3 is a start that learns, not a tuned value: on
    MovieLens-100K (one-hot, eta = 3.4) the test RMSE is 0.943 (0.932 at 100 s_y / m2, but then
    the 2 / (t + 2) step, which gives every early atom a large share of the budget, no longer
    fits scikit-learn's linear check data in 10 iterations).
    """
    sw, sy, syy, sx2, count = as_rows(data).reduce(blk_scale)
    if loss == "squared":
        mean = sy / sw if sw > 0 else 0.0
        scale = float(np.sqrt(max(syy / sw - mean * mean, 0.0))) if sw > 0 else 0.0
    else:
        scale = float(np.log(99.0))
    m2 = sx2 / count if count > 0 else 0.0
    if not (scale > 0.0 and m2 > 0.0 and np.isfinite(scale / m2)):
        return 1.0  # constant y or all-zero X: no pairwise part to fit
    return AUTO_TRACE_FACTOR * scale / m2


# -- the two solvers ----------------------------------------------------------------------------
def _append_atom(P_buf, lam, p, weight):
    m = lam.shape[0]
    P_buf[:, m] = p
    return np.append(lam, weight)


def frank_wolfe_vertex(rows, c, v0, tol):
    """The Frank-Wolfe vertex direction: the top eigenpair of M(g) over the feasible set.

    Without groups: the leading eigenvector of M(g). With groups (block-diagonal W), the best
    of the per-block leading eigenvectors, embedded in R^d. ``v0`` holds every block's last
    eigenvector in its own coordinates (the blocks are disjoint) and is updated in place.
    Returns (p, rho, ok).
    """
    if rows.groups is None:
        p, rho, ok = leading_eigenpair(gradient_operator(rows, c), v0=v0, tol=tol)
        v0[:] = p
        return p, rho, ok
    best, ok_all = None, True
    for k, idx in enumerate(rows.groups):
        pg, rho, ok = leading_eigenpair(gradient_operator(rows, c, k), v0=v0[idx], tol=tol)
        ok_all &= ok
        v0[idx] = pg
        if best is None or rho > best[1]:
            best = (idx, rho, pg)
    idx, rho, pg = best
    p = np.zeros(rows.n_features)
    p[idx] = pg
    return p, rho, ok_all


def _init_v0(state, d, rng):
    if state.v0 is not None and state.v0.shape == (d,) and np.any(state.v0):
        return np.array(state.v0, dtype=np.float64)
    return rng.standard_normal(d)


def hazan_solver(data, state, settings, rng, eval_data=None, callback=None, pre_step=None):
    """Run Hazan's algorithm from ``state`` for at most ``settings.max_iter`` steps.

    Parameters
    ----------
    data : CFMData, or rows with ``reduce`` / ``update`` (:class:`LocalRows`, the Dask rows
        of ``fmlearn.distributed``)
    state : CFMState
        Start (W = 0 and w = 0 on a cold start). Not modified; the result is a new state.
    settings : HazanSettings
    rng : numpy Generator or RandomState (draws the first Lanczos start vector only)
    eval_data : (X, X o X) from :func:`sparse_pair`, or None
        Held-out rows (in this process) whose predictions are tracked in O(nnz) per iteration.
    callback : callable(iteration, record) -> bool, optional
        ``record`` has "objective", "gap", "step", "train" (the weighted RMSE of the clipped
        predictions, or the error rate, per ``settings.metric``) and "val_pred" (or None) of
        the iterate *before* that iteration's step, and "snapshot", a function returning
        that iterate as a :class:`CFMState` (a copy), valid until the step: early stopping
        keeps the best iterate through ``pre_step``; returning True stops.
    pre_step : callable(iteration, record), optional
        Called with the same record before the iteration's step (the only moment its
        "snapshot" is the recorded iterate).

    Returns
    -------
    state, n_iter, info : ``n_iter`` steps taken; info has "diverged" (None or a message),
    "converged" (certified gap <= tol * gap_scale), "gap" (the certified gap of the result:
    its objective minus the best lower bound J(W_t) - gap_t seen), "objective" (of the result)
    and "lanczos_failures".
    """
    rows = as_rows(data)
    if settings.loss == "squared":
        linear = RidgeLinear(rows, state, settings)
    else:
        linear = LogisticLinear(rows, state, settings)
    eta = float(settings.trace_bound)
    d = rows.n_features
    lam = np.array(state.lam, dtype=np.float64)
    m0 = lam.shape[0]
    buf = np.empty((d, m0 + settings.max_iter), dtype=np.float64, order="F")
    buf[:, :m0] = state.P[:, :m0]
    rows.update(blk_quadratic, buf[:, :m0], lam, "q")
    qv = quadratic_part(eval_data, buf[:, :m0], lam) if eval_data is not None else None
    v0 = _init_v0(state, d, rng)
    linear.start()
    t = int(state.t)
    n_done = 0
    failures = 0
    converged = False
    gap = obj = np.inf
    lower = -np.inf  # the best lower bound on J* seen: max_t J(W_t) - gap_t
    info = {"diverged": None}
    for it in range(settings.max_iter):
        if it and it % settings.refresh_every == 0:
            rows.update(blk_quadratic, buf[:, :lam.shape[0]], lam, "q")
            linear.refresh()
            if qv is not None:
                qv = quadratic_part(eval_data, buf[:, :lam.shape[0]], lam)
        obj, gq, c, train = linear.current(settings.metric)
        if not np.isfinite(obj):
            info["diverged"] = _diverged(it, "objective")
            break
        tol_t = settings.eig_tol / (t + 1) ** 2 if settings.eig_schedule else settings.eig_tol
        p, rho, ok = frank_wolfe_vertex(rows, c, v0, max(tol_t, 1e-12))
        failures += not ok
        # <W - eta p p^T, grad J> with <W, M(g)> = 2 g^T q and p^T M(g) p = rho.
        gap = eta * max(rho, 0.0) - 2.0 * gq
        record = {"objective": obj, "gap": gap, "step": 0.0, "train": train,
                  "val_pred": None if qv is None else linear.predict_eval(eval_data[0]) + qv,
                  "snapshot": lambda lam=lam, t=t: _snapshot(linear, buf, lam, t, v0, settings)}
        if pre_step is not None:
            pre_step(it, record)
        # Every iterate certifies J* >= J(W_t) - gap_t (convexity), so J(W) - J* is at most
        # J(W) - (the best such bound): never above the last gap, and it does not jump with
        # the oscillating Frank-Wolfe gap (Jaggi 2013, ICML, Section 2).
        lower = max(lower, obj - gap)
        scale = obj if settings.gap_scale is None else settings.gap_scale
        if obj - lower <= settings.tol * scale or gap <= 0.0:
            converged = True
            if callback is not None:
                callback(it, record)
            break
        alpha, lam, bad_q, qv = _step(rows, linear, settings, buf, lam, (p, c, t, rho),
                                      eval_data, qv)
        record["step"] = alpha
        if alpha <= 0.0:
            # No descent along the step's direction: optimal up to the Lanczos accuracy.
            converged = True
            if callback is not None:
                callback(it, record)
            break
        t += 1
        n_done = it + 1
        if bad_q or not linear.is_finite():
            info["diverged"] = _diverged(it, "predictions")
            break
        if settings.corrective:
            lam, qv = _correct(rows, linear, settings, buf, lam, eval_data, qv)
        if callback is not None and callback(it, record):
            break
    m = lam.shape[0]
    P = buf[:, :m].copy()
    if settings.step in ("pairwise", "auto"):  # atoms whose mass was moved away
        P, lam = P[:, lam > 0.0], lam[lam > 0.0]
    rows.update(blk_quadratic, P, lam, "q")
    w, final_obj = linear.finish()
    new = CFMState(float(w[0]), w[1:].copy(), P, lam, t, v0)
    # The result's objective is at most the last measured one: its certified gap is its own,
    # and the last step may have brought it under the tolerance.
    if np.isfinite(lower):
        gap = max(final_obj - lower, 0.0)
        scale = final_obj if settings.gap_scale is None else settings.gap_scale
        converged = converged or (gap <= settings.tol * scale and not info["diverged"])
    info.update(converged=converged, lanczos_failures=failures, objective=final_obj, gap=gap)
    return new, n_done, info


def _snapshot(linear, buf, lam, t, v0, settings):
    """The current iterate as a new :class:`CFMState` (the atoms of zero weight dropped, the
    linear mask applied to w)."""
    keep = lam > 0.0
    P = np.array(buf[:, :lam.shape[0]][:, keep], order="F")
    w = np.array(linear.w, dtype=np.float64)
    w1 = w[1:] if settings.linear_mask is None else np.asarray(settings.linear_mask) * w[1:]
    return CFMState(float(w[0]), w1.copy(), P, lam[keep].copy(), int(t),
                    None if v0 is None else np.array(v0))


#: Relative tie of an atom's score with the zero vertex's (0), in units of |rho|.
AWAY_TIE = 1e-9


def _away_vertex(rows, P, lam, c, eta, rho):
    """The away vertex of a pairwise step: the atom p_k of W (or the zero vertex, holding the
    unused budget eta - tr W) with the smallest p_k^T M(g) p_k, i.e. the largest
    <p_k p_k^T, grad J>. Returns (k or None for the zero vertex, its mass), or None when W
    has neither (then the step is Frank-Wolfe's).

    Ties go to the atom: an atom just reached by an exact step from the zero vertex has
    score 0 to round-off (the step's optimality), and taking the zero vertex there (growing
    tr W before the atoms are sorted out) stalled tests/test_defaults.py's fit at a 0.5%
    gap, scale-dependently, where preferring the atom reached 2e-5 at every scale."""
    free = eta - float(lam.sum())
    best, score = -1, (0.0 if free > 1e-12 * eta else np.inf)
    live = np.flatnonzero(lam > 0.0)
    if live.size:
        Pl = P[:, live]
        s = rows.reduce(blk_atom_scores, Pl)[0] - (Pl * Pl).T @ c
        # near-ties (duplicate atoms score alike to round-off) go to the lowest index, so
        # that sums taken in another order (the Dask fit's partitions) choose the same atom
        j = int(np.flatnonzero(s <= s.min() + AWAY_TIE * abs(rho))[0])
        if s[j] < score + AWAY_TIE * abs(rho):
            best = int(live[j])
    if best >= 0:
        return best, float(lam[best])
    return (None, free) if np.isfinite(score) else None


def _step(rows, linear, settings, buf, lam, vertex, eval_data, qv):
    """One step from W = buf diag(lam) buf^T towards the vertex (p, c = (X o X)^T g, t):
    Frank-Wolfe's (W <- (1 - a) W + a eta p p^T), or with ``step="pairwise"`` the mass of
    the away vertex moved to p (W <- W + a m (p p^T - p_k p_k^T), a in [0, 1]), or with
    ``step="auto"`` the pairwise step unless it is a drop step (a = 1) and Frank-Wolfe's
    exact step lowers the objective more (ties: the pairwise step).
    Returns (a, lam, 1 when a prediction is no longer finite, the eval rows' q)."""
    p, c, t, rho = vertex
    eta = float(settings.trace_bound)
    away = (_away_vertex(rows, buf[:, :lam.shape[0]], lam, c, eta, rho)
            if settings.step in ("pairwise", "auto") else None)
    if away is None or settings.step == "auto":
        exact = settings.step != "standard"
        atom_rhs = linear.atom(p, eta, exact)
        alpha = linear.line_search(eta, atom_rhs) if exact else 2.0 / (t + 2.0)
        if away is not None:
            fw_gain = linear.gain(alpha)
            pw = _pair_candidate(linear, buf, p, away)
            # Frank-Wolfe's step only when the pairwise step is a drop step (a = 1: the away
            # vertex's mass ran out before the line search's minimizer) and lowers J less.
            pw_gain = linear.gain(pw)  # ties to round-off: the pairwise step (see above)
            if not (pw >= 1.0 and fw_gain > pw_gain + AWAY_TIE * abs(pw_gain)):
                return _pair_step(rows, linear, buf, lam, p, away, pw, eval_data, qv)
        if alpha <= 0.0:
            return alpha, lam, 0, qv
        lam = _append_atom(buf, lam * (1.0 - alpha), p, alpha * eta)
        bad = rows.update(blk_step, alpha, eta)[0]
        linear.step(alpha, eta, atom_rhs)
        if qv is not None:
            qv = (1.0 - alpha) * qv + (alpha * eta) * atom_quadratic(eval_data, p)
        return alpha, lam, bad, qv
    alpha = _pair_candidate(linear, buf, p, away)
    return _pair_step(rows, linear, buf, lam, p, away, alpha, eval_data, qv)


def _correct(rows, linear, settings, buf, lam, eval_data, qv):
    """``settings.corrective`` projected-gradient steps on the face of the atoms
    (:func:`._hazan_face.face_steps`); the atoms are rewritten in buf's first columns. With
    interaction groups, group by group (the face of each group's atoms, its budget eta minus
    the other groups' traces): a face spanning atoms of two groups would mix them."""
    live = lam > 0.0
    P, w = buf[:, :lam.shape[0]][:, live], lam[live]
    eta = float(settings.trace_bound)
    if rows.groups is None:
        P, w = face_steps(rows, linear, P, w, eta, settings.corrective, settings.metric)
    else:
        parts = []
        for idx in rows.groups:
            sel = np.any(P[idx] != 0.0, axis=0)
            if np.any(sel):
                budget = eta - float(w[~sel].sum()) - sum(float(x.sum()) for _, x in parts)
                parts.append(face_steps(rows, linear, P[:, sel], w[sel], budget,
                                        settings.corrective, settings.metric, idx))
                P, w = P[:, ~sel], w[~sel]
        P = np.hstack([P] + [a for a, _ in parts])
        w = np.concatenate([w] + [x for _, x in parts])
    buf[:, :w.shape[0]] = P
    if qv is not None:
        qv = quadratic_part(eval_data, P, w)
    return w, qv


def _pair_candidate(linear, buf, p, away):
    """Store the pairwise direction (the away vertex's mass moved to p); its exact step."""
    k, mass = away
    return linear.pair_search(linear.pair(p, None if k is None else buf[:, k], mass))


def _pair_step(rows, linear, buf, lam, p, away, alpha, eval_data, qv):
    """Take the pairwise step of size ``alpha`` along the stored direction (see :func:`_step`)."""
    if alpha <= 0.0:
        return alpha, lam, 0, qv
    k, mass = away
    pa = None if k is None else buf[:, k].copy()
    moved = alpha * mass
    lam = lam.copy()
    if k is not None:
        lam[k] = 0.0 if alpha >= 1.0 else max(lam[k] - moved, 0.0)
    lam = _append_atom(buf, lam, p, moved)
    bad = rows.update(blk_pair_step, alpha)[0]
    linear.pair_step(alpha)
    if qv is not None:
        qa = 0.0 if pa is None else atom_quadratic(eval_data, pa)
        qv = qv + moved * (atom_quadratic(eval_data, p) - qa)
    return alpha, lam, bad, qv


def _diverged(it, what):
    return (f"Hazan's algorithm produced a non-finite {what} at iteration {it}; the data or eta "
            "is too large for float64 (scale X or y, or lower eta)")
