"""Asymmetric rank-one matrix sensing, one pass (Lin and Ye 2016, §2.1): y_i = u_i^T M* v_i with
independent isotropic u_i, v_i (inductive matrix completion).

The sensing operator is unbiased, E[u u^T M v v^T] = M, so no shift is needed: each batch gives
one alternating power step on E = Xu^T diag(rho) Xv + U V^T. Batches are read through
:class:`fmlearn.solvers._one_pass_data.Batch` (chunked products, no copies); the pass over the
batches is :func:`fmlearn.solvers.one_pass.one_pass_solver` with :func:`asym_step_rows`.
"""

from dataclasses import dataclass

import numpy as np
from scipy.sparse.linalg import LinearOperator

from ..linalg import orthonormal_basis, top_singular_triplets
from ._one_pass_data import Batch

__all__ = ["AsymState", "asym_predict", "asym_step", "asym_step_rows"]

# -- asymmetric rank-one sensing ----------------------------------------------------------------
@dataclass
class AsymState:
    """``M = U V^T`` with ``U`` (d1, k) orthonormal, ``V`` (d2, k); ``t`` batches consumed."""

    U: np.ndarray
    V: np.ndarray
    t: int = 0
    y_scale: float = 0.0
    ref_norm: float = 0.0

    def copy(self):
        return AsymState(self.U.copy(), self.V.copy(), int(self.t), float(self.y_scale),
                         float(self.ref_norm))


def asym_predict(Bu, Bv, state):
    return np.einsum("ij,ij->i", Bu.matmat(state.U).astype(np.float64),
                     Bv.matmat(state.V).astype(np.float64))


def asym_step(Xu, Xv, y, sw, state, settings):
    """One batch of asymmetric rank-one sensing y_i = u_i^T M* v_i (Lin and Ye 2016, §2.1).

    For independent isotropic u, v the operator is unbiased, E[(1/n) A'A(M)] = M, so no shift
    is needed: with E = Xu^T diag(rho) Xv + U V^T (d1 x d2),  U <- QR(E Vbar) (Vbar an
    orthonormal basis of V),  V <- E^T U  (alternating power step, M_new = U U^T E).
    """
    state = state.copy()
    first = state.t == 0
    Bu, Bv = Batch(Xu, n_jobs=settings.n_jobs), Batch(Xv, n_jobs=settings.n_jobs)
    y = np.asarray(y, np.float64)
    sw = np.asarray(sw, np.float64)
    Wsum = float(sw.sum())
    if first:
        state.y_scale = float(np.sqrt(np.dot(sw, y * y) / Wsum))
    r = y - asym_predict(Bu, Bv, state)
    rmse = float(np.sqrt(np.dot(sw, r * r) / Wsum))
    info = {"rmse": rmse, "diverged": None}
    if not np.isfinite(rmse) or (not first and not settings.safeguard
                                 and rmse > settings.divergence_factor
                                 * max(state.y_scale, 1e-300)):
        info["diverged"] = f"the residual RMS on batch {state.t + 1} is {rmse:.3g}"
        return state, info
    rho = sw * r / Wsum
    U, V = state.U.astype(np.float64), state.V.astype(np.float64)
    k = U.shape[1]

    def E(B):  # (d2, c) -> (d1, c)
        return Bu.rmatmat(rho[:, None] * Bv.matmat(B)) + U @ (V.T @ B)

    def Et(B):  # (d1, c) -> (d2, c)
        return Bv.rmatmat(rho[:, None] * Bu.matmat(B)) + V @ (U.T @ B)

    if first:
        op = LinearOperator((Bu.d, Bv.d), matvec=lambda v: E(v.reshape(-1, 1)).ravel(),
                            rmatvec=lambda v: Et(v.reshape(-1, 1)).ravel(), matmat=E,
                            rmatmat=Et, dtype=np.float64)
        Unew, _, _ = top_singular_triplets(op, k, method=settings.init,
                                           n_iter=settings.init_n_iter,
                                           random_state=settings.random_state)
    else:
        Unew = orthonormal_basis(E(orthonormal_basis(V)))
    Vnew = Et(Unew)
    if settings.safeguard:
        # M_new = U U^T E is linear in the data term: M(eta) = U U^T (U V^T + eta D) with
        # D = Xu^T diag(rho) Xv, so V(eta) = V U^T Unew + eta (Vnew - V U^T Unew).
        base = V @ (U.T @ Unew)
        eta = 1.0
        while True:
            Vtry = base + eta * (Vnew - base)
            r2 = y - asym_predict(Bu, Bv, AsymState(Unew, Vtry))
            new_rmse = float(np.sqrt(np.dot(sw, r2 * r2) / Wsum))
            if np.isfinite(new_rmse) and new_rmse <= rmse * (1.0 + 1e-10):
                Vnew = Vtry
                break
            eta *= 0.5
            if eta < settings.min_step:
                Unew, Vnew = U, V
                break
    norm = float(np.linalg.norm(Vnew))
    if first:
        state.ref_norm = norm
    unguarded = not settings.safeguard
    if not np.isfinite(norm) or (not first and unguarded and norm > settings.divergence_factor
                                 * max(state.ref_norm, 1e-12)):
        info["diverged"] = f"the factors exploded on batch {state.t + 1} (norm {norm:.3g})"
        return state, info
    state.U, state.V = Unew.astype(state.U.dtype), Vnew.astype(state.V.dtype)
    state.t += 1
    return state, info



def asym_step_rows(rows, state, settings):
    """:func:`asym_step` on ``rows = (Xu, Xv, y, sw)``, the step of
    :func:`fmlearn.solvers.one_pass.one_pass_solver` for asymmetric sensing."""
    return asym_step(*rows, state, settings)
