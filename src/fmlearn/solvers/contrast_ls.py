"""Batch least squares for f(x) = b + <w, x> + x^T M x fitted to any linear targets of f.

The targets are y_g = sum_i C[g, i] f(x_i) for a sparse contrast matrix C (C = None is the
identity, the ordinary fit; the double differences of Lin et al. 2019, §4.2 have four entries +-1
per row). With M = (U V^T + V U^T)/2 (generalized FM) or that matrix minus diag(U V^T) (iFM, seed
Lin et al. 2019, §3.3),

    f(x) = b + <w, x> + sum_l (x.u_l)(x.v_l) - [iFM] sum_j x_j^2 sum_l U_jl V_jl,

so with U fixed f is linear in (b, w, V), and, f being symmetric in U and V, with V fixed it is
linear in (b, w, U): each block enters every contrast linearly. The objective is

    J = sum_g s_g (y_g - (C f)_g)^2 + reg_linear |w|^2 + reg_pairwise (|U|_F^2 + |V|_F^2).

Two methods, both never increasing J:

* ``"als"``: alternating least squares, one sweep = an exact ridge solve for (b, w, V) and one
  for (b, w, U) (block coordinate descent: J decreases monotonically and, with
  reg_pairwise > 0, every block problem is strictly convex). Cheap per sweep and good at
  tracking a slowly changing target from a warm start, but it can crawl near an exact fit: the
  model only sees sym(U V^T), so the antisymmetric part of U V^T is a flat direction.
* ``"lm"``: Levenberg-Marquardt on all parameters jointly (the Gauss-Newton step of the
  linearised f, damped by mu I, accepted only when J decreases, mu decreased on success and
  increased on failure; More 1978). Converges quadratically near an exact fit.

The one-pass moment solvers cannot take contrasts: they estimate M from E[y x x^T] under a
known law of the rows x, and a contrast of f is not f of any row.

Every step is a linear least-squares problem in theta = (b?, w, G_1, ...) whose design rows are
D_i = [1, x_i, x_ij (x_i.f_l) - [iFM] x_ij^2 F_jl] for the fixed factor(s) F. Its normal matrix
sum_g s_g (C D)_g^T (C D)_g is accumulated over chunks of targets, each with the rows it
references; when the p x p matrix would exceed ``memory_budget`` bytes, the step is solved
matrix-free by conjugate gradients on the same normal equations (products with C D and its
transpose cost O(nnz(C) + nnz(X) k)).
"""

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, cg

__all__ = ["ContrastData", "ContrastSettings", "ContrastState", "contrast_ls", "model_values",
           "objective"]

#: Bytes the dense normal matrix and a chunk of the design may use before the matrix-free path.
MEMORY_BUDGET = 256 * 2**20


@dataclass
class ContrastData:
    """Validated training data: X (n_rows, d) dense or CSR in working coordinates; C
    (n_targets, n_rows) CSR, or None for the identity; y and sw (n_targets,)."""

    X: object
    C: object
    y: np.ndarray
    sw: np.ndarray


@dataclass
class ContrastSettings:
    zero_diagonal: bool = False
    fit_intercept: bool = True        # False also when b is not identifiable (then held fixed)
    reg_linear: float = 0.0
    reg_pairwise: float = 0.0
    method: str = "als"
    max_iter: int = 100
    tol: float = 1e-6
    exact_iter: bool = False          # run exactly max_iter iterations (no early stop)
    memory_budget: int = MEMORY_BUDGET


@dataclass
class ContrastState:
    w: np.ndarray
    U: np.ndarray
    V: np.ndarray
    b: float = 0.0

    def copy(self):
        return ContrastState(self.w.copy(), self.U.copy(), self.V.copy(), float(self.b))


def _dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def _square(X):
    return X.multiply(X).tocsr() if sp.issparse(X) else X * X


def model_values(X, state, zero_diagonal):
    """f(x_i) for every row of X (dense or CSR), float64."""
    P = np.asarray(X @ state.U)
    Q = np.asarray(X @ state.V)
    f = state.b + np.asarray(X @ state.w).ravel() + np.einsum("il,il->i", P, Q)
    if zero_diagonal and state.U.shape[1]:
        f = f - np.asarray(_square(X) @ np.einsum("jl,jl->j", state.U, state.V)).ravel()
    return f


def objective(data, state, settings):
    """J of the module docstring and the weighted RMS of the target residuals."""
    f = model_values(data.X, state, settings.zero_diagonal)
    r = data.y - (f if data.C is None else data.C @ f)
    sq = float(np.dot(data.sw, r * r))
    J = sq + settings.reg_linear * float(state.w @ state.w) + settings.reg_pairwise * float(
        np.sum(state.U ** 2) + np.sum(state.V ** 2))
    return J, float(np.sqrt(sq / np.sum(data.sw)))


def _design(Xr, F, zero_diagonal, intercept):
    """Design rows [1?, x, x_j (x.f_l) - [iFM] x_j^2 F_jl] (row-major in (j, l)) of dense Xr."""
    n = Xr.shape[0]
    P = Xr @ F
    Z = Xr[:, :, None] * P[:, None, :]
    if zero_diagonal:
        Z -= (Xr * Xr)[:, :, None] * F[None, :, :]
    parts = [Xr, Z.reshape(n, -1)]
    if intercept:
        parts.insert(0, np.ones((n, 1)))
    return np.hstack(parts)


def _syrk(A):
    """A^T A by a symmetric rank-k update (half the flops of a general product)."""
    if A.shape[0] == 0:
        return np.zeros((A.shape[1], A.shape[1]))
    # A.T of a C-ordered A is Fortran-ordered: no copy.
    N = scipy.linalg.blas.dsyrk(1.0, A.T, trans=0, lower=0)
    return np.triu(N) + np.triu(N, 1).T


def _row_sums(C, n):
    return np.ones(n) if C is None else np.asarray(C.sum(axis=1)).ravel()


class _Problem:
    """Linear least squares in theta = (b?, w, vec G_1, ..., vec G_m) with values
    f_lin(theta) = b + X w + sum_i [(X F_i) . (X G_i) - [iFM] (X o X) rowsum(F_i o G_i)]
    for fixed factors F_i. An ALS block has one pair (F = U with unknown V, or the reverse);
    the Gauss-Newton step of Levenberg-Marquardt has two (F = U for dV, F = V for dU)."""

    def __init__(self, data, factors, settings, intercept):
        self.data, self.factors, self.s = data, factors, settings
        self.intercept = intercept
        d, k = factors[0].shape
        self.d, self.k = d, k
        m = len(factors)
        self.p = int(intercept) + d + m * d * k
        reg = np.concatenate([np.full(d, settings.reg_linear),
                              np.full(m * d * k, settings.reg_pairwise)])
        self.reg = np.concatenate([[0.0], reg]) if intercept else reg

    def design(self, Xr):
        parts = [_design(Xr, self.factors[0], self.s.zero_diagonal, self.intercept)]
        for F in self.factors[1:]:
            parts.append(_design(Xr, F, self.s.zero_diagonal, False)[:, Xr.shape[1]:])
        return np.hstack(parts) if len(parts) > 1 else parts[0]

    def split(self, theta):
        i = int(self.intercept)
        b = float(theta[0]) if self.intercept else 0.0
        w = theta[i:i + self.d]
        dk = self.d * self.k
        Gs = [theta[i + self.d + j * dk:i + self.d + (j + 1) * dk].reshape(self.d, self.k)
              for j in range(len(self.factors))]
        return b, w, Gs

    # -- dense normal equations ---------------------------------------------------------------
    def normal(self, target):
        """(A^T S A, A^T S target) for A = C D, accumulated over chunks of targets."""
        data, X = self.data, self.data.X
        p = self.p
        N = np.zeros((p, p))
        rhs = np.zeros(p)
        n_t = target.shape[0]
        chunk = max(1, int(self.s.memory_budget // (8 * p * 8)))
        D = None
        if data.C is not None and 8 * X.shape[0] * p <= self.s.memory_budget // 4:
            D = self.design(_dense(X))            # every row once, shared by all chunks
        for a in range(0, n_t, chunk):
            b = min(n_t, a + chunk)
            if data.C is None:
                A = self.design(_dense(X[a:b]))
            elif D is not None:
                A = np.asarray(data.C[a:b] @ D)
            else:
                Cc = data.C[a:b]
                cols, inv = np.unique(Cc.indices, return_inverse=True)
                Cs = sp.csr_matrix((Cc.data, inv, Cc.indptr), shape=(b - a, cols.shape[0]))
                A = np.asarray(Cs @ self.design(_dense(X[cols])))
            N += _syrk(A * np.sqrt(data.sw[a:b])[:, None])
            rhs += A.T @ (data.sw[a:b] * target[a:b])
        return N, rhs

    # -- matrix-free products -----------------------------------------------------------------
    def matvec(self, theta):
        X = self.data.X
        b, w, Gs = self.split(theta)
        f = b + np.asarray(X @ w).ravel()
        for F, G in zip(self.factors, Gs, strict=True):
            f = f + np.einsum("il,il->i", np.asarray(X @ F), np.asarray(X @ G))
            if self.s.zero_diagonal:
                f = f - np.asarray(_square(X) @ np.einsum("jl,jl->j", F, G)).ravel()
        return f if self.data.C is None else self.data.C @ f

    def rmatvec(self, r):
        X = self.data.X
        r2 = r if self.data.C is None else self.data.C.T @ r
        parts = [[r2.sum()]] if self.intercept else []
        parts.append(np.asarray(X.T @ r2).ravel())
        for F in self.factors:
            gG = np.asarray(X.T @ (r2[:, None] * np.asarray(X @ F)))
            if self.s.zero_diagonal:
                gG = gG - np.asarray(_square(X).T @ r2).ravel()[:, None] * F
            parts.append(gG.ravel())
        return np.concatenate(parts)

    def solve(self, target, shift=0.0, extra=None, theta0=None):
        """argmin_theta |S^1/2 (target - A theta)|^2 + theta' diag(reg + shift) theta
        - 2 extra' theta: dense when the p x p matrix fits the memory budget, else conjugate
        gradients on the normal equations."""
        diag = self.reg + shift
        if 8 * self.p * self.p <= self.s.memory_budget:
            N, rhs = self.normal(target)
            N[np.diag_indices(self.p)] += diag
            if extra is not None:
                rhs = rhs + extra
            if np.all(diag[int(self.intercept):] > 0):
                try:
                    with warnings.catch_warnings():
                        # A tiny LM damping is ill-conditioned by design; the step is checked
                        # by its objective before it is accepted.
                        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
                        return scipy.linalg.solve(N, rhs, assume_a="pos")
                except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
                    pass
            # Singular or unregularised: the minimum-norm least-squares solution.
            return scipy.linalg.lstsq(N, rhs, cond=1e-13)[0]
        sw = self.data.sw
        op = LinearOperator((self.p, self.p), dtype=np.float64,
                            matvec=lambda t: self.rmatvec(sw * self.matvec(t)) + diag * t)
        rhs = self.rmatvec(sw * target)
        if extra is not None:
            rhs = rhs + extra
        theta, _ = cg(op, rhs, x0=theta0, rtol=1e-12, atol=0.0, maxiter=20 * self.p)
        return theta


def _balance(U, V):
    """Rescale each pair (u_l, v_l) to equal norms: f is unchanged (the iFM diagonal term is
    bilinear per column too) and |U|^2 + |V|^2 can only decrease."""
    nu, nv = np.linalg.norm(U, axis=0), np.linalg.norm(V, axis=0)
    ok = (nu > 0) & (nv > 0)
    c = np.ones_like(nu)
    c[ok] = np.sqrt(nv[ok] / nu[ok])
    return U * c, V / c


def _als_sweep(data, st, settings):
    """One V step and one U step, each an exact ridge least-squares solve."""
    learn_b = settings.fit_intercept
    # A held intercept b contributes b C 1 (zero when b is not identifiable).
    y = data.y if learn_b or st.b == 0.0 else data.y - st.b * _row_sums(data.C, data.y.shape[0])
    for side in (0, 1):
        F, G0 = (st.U, st.V) if side == 0 else (st.V, st.U)
        prob = _Problem(data, [F], settings, learn_b)
        start = np.concatenate(([np.array([st.b])] if learn_b else []) + [st.w, G0.ravel()])
        b, w, (G,) = prob.split(prob.solve(y, theta0=start))
        st.w = np.array(w)
        if learn_b:
            st.b = b
        if side == 0:
            st.V = np.array(G)
        else:
            st.U = np.array(G)
    st.U, st.V = _balance(st.U, st.V)
    return st


def _lm_step(data, st, settings, J, mu):
    """One accepted Levenberg-Marquardt step on (b?, w, V, U) jointly: (state, J, mu), with
    state None when no damping decreases J (a stationary point to working precision)."""
    learn_b = settings.fit_intercept
    prob = _Problem(data, [st.U, st.V], settings, learn_b)
    f = model_values(data.X, st, settings.zero_diagonal)
    r = data.y - (f if data.C is None else data.C @ f)
    head = [np.array([st.b])] if learn_b else []
    theta = np.concatenate(head + [st.w, st.V.ravel(), st.U.ravel()])
    # The linearised problem in delta: (A'SA + reg + mu) delta = A'S r - reg theta.
    for _ in range(40):
        delta = prob.solve(r, shift=mu, extra=-prob.reg * theta)
        b, dw, (dV, dU) = prob.split(delta)
        cand = ContrastState(st.w + dw, st.U + dU, st.V + dV, st.b + b if learn_b else st.b)
        Jc, _ = objective(data, cand, settings)
        if np.isfinite(Jc) and Jc < J:
            cand.U, cand.V = _balance(cand.U, cand.V)
            return cand, objective(data, cand, settings)[0], max(mu / 3.0, 1e-300)
        mu = max(mu, 1e-300) * 10.0
    return None, J, mu


def contrast_ls(data, state, settings, callback=None):
    """Fit by ALS or Levenberg-Marquardt (``settings.method``); returns (state, n_iter, info).

    One iteration is an ALS sweep (two block solves with p = 1 + d + d k unknowns) or one
    accepted LM step (1 + d + 2 d k unknowns). Both never increase J. ``state`` is not
    modified; its U must not be all zero (the V block would see no interaction).

    ``info`` holds ``objective`` and ``rmse`` after each iteration, ``converged`` and
    ``diverged`` (None or a message: a non-finite iterate stops the run, the input state is
    returned and the caller keeps its previous model).
    """
    st = state.copy()
    J, _ = objective(data, st, settings)
    hist_J, hist_rmse = [], []
    info = {"objective": hist_J, "rmse": hist_rmse, "converged": False, "diverged": None}
    y2 = float(np.dot(data.sw, data.y * data.y))
    mu = 1e-6 * max(y2, 1e-300) / max(data.y.shape[0], 1)
    n_iter = 0
    for it in range(settings.max_iter):
        previous = J
        stalled = False
        if settings.method == "lm":
            new, J, mu = _lm_step(data, st, settings, J, mu)
            stalled = new is None
            st = st if stalled else new
        else:
            st = _als_sweep(data, st, settings)
        n_iter = it + 1
        J, rmse = objective(data, st, settings)
        hist_J.append(J)
        hist_rmse.append(rmse)
        if callback is not None:
            callback(n_iter, st, info)
        if not (np.isfinite(J) and np.all(np.isfinite(st.U)) and np.all(np.isfinite(st.V))):
            info["diverged"] = f"non-finite objective or factors after iteration {n_iter}"
            return state.copy(), n_iter, info
        if settings.exact_iter:
            continue
        if stalled or previous - J <= settings.tol * max(previous, 1e-300) \
                or J <= 1e-24 * max(y2, 1e-300):
            info["converged"] = True
            break
    return st, n_iter, info
