"""The linear part of Hazan's algorithm (:mod:`fmlearn.solvers.hazan`): the weighted ridge
system, the squared loss's exact elimination of w and the logistic loss's Newton refit, each with
the exact step along a Frank-Wolfe or pairwise direction (the rows' vector "delta")."""

import numpy as np
from scipy.optimize import minimize
from scipy.sparse.linalg import LinearOperator, cg

from ._hazan_rows import (
    as_rows,
    blk_atom,
    blk_current,
    blk_exact_step,
    blk_logistic_curvature,
    blk_logistic_gain,
    blk_logistic_loss,
    blk_logistic_segment,
    blk_pair,
    blk_ridge_apply,
    blk_ridge_diagonal,
    blk_ridge_rhs,
    blk_squared_loss,
    safeguarded_newton,
)


class RidgeSystem:
    """Weighted ridge on z = [1, x]: w*(v) = argmin ||s^1/2 (v - Z w)||^2 + lam1 ||w_1:||^2.

    Solved by preconditioned conjugate gradient on (Z^T S Z + Lambda) w = Z^T S v (Yamada et al.
    2017, Eq. 5 with weights and lam1), never forming Z^T Z. Jacobi preconditioner; empty columns
    get a unit preconditioner (their coordinate stays at its start value, 0). ``v`` is an
    n-vector held by the rows, named as a combination ((c, name), ...) ("y": the targets).
    ``weights`` names a stored n-vector to use instead of s (the logistic Hessian's system).
    """

    def __init__(self, rows, reg_linear, tol, mask=None, weights=None):
        rows = as_rows(rows)
        self.rows = rows
        self.lam = float(reg_linear)
        self.tol = tol
        self.weights = weights
        self.mask = None if mask is None else np.asarray(mask, dtype=np.float64)
        d = rows.n_features
        self.d = d
        diag = np.empty(d + 1)
        diag[0], diag[1:] = rows.reduce(blk_ridge_diagonal, weights)
        diag[1:] += self.lam
        if self.mask is not None:
            diag[1:] *= self.mask
        diag[diag <= 0.0] = 1.0
        self._inv_diag = 1.0 / diag
        self.A = LinearOperator((d + 1, d + 1), matvec=self._apply, dtype=np.float64)
        self.M = LinearOperator((d + 1, d + 1), matvec=lambda v: self._inv_diag * np.ravel(v),
                                dtype=np.float64)

    def masked(self, w):
        """(w0, w_1:) with the linear mask applied: the arguments of Z w on the rows."""
        w1 = w[1:] if self.mask is None else self.mask * w[1:]
        return float(w[0]), w1

    def _gather(self, s0, s1):
        out = np.empty(self.d + 1)
        out[0], out[1:] = s0, s1
        if self.mask is not None:
            out[1:] *= self.mask
        return out

    def _apply(self, w):
        w = np.ravel(w)
        out = self._gather(*self.rows.reduce(blk_ridge_apply, *self.masked(w), self.weights))
        out[1:] += self.lam * w[1:]
        return out

    def rhs(self, terms):
        """Z^T (s o v) for v = sum c_i v_i (masked)."""
        return self._gather(*self.rows.reduce(blk_ridge_rhs, tuple(terms)))

    def solve(self, terms, x0=None, b=None):
        """w*(v) for v = sum c_i v_i over ``terms``; ``b`` is its right-hand side when known."""
        b = self.rhs(terms) if b is None else b
        if not np.any(b):
            return np.zeros_like(b)
        if x0 is not None and self.mask is not None:
            x0 = np.concatenate([x0[:1], self.mask * x0[1:]])
        w, info = cg(self.A, b, x0=x0, rtol=self.tol, atol=0.0, M=self.M,
                     maxiter=20 * (self.d + 1) + 100)
        return w

    def penalty(self, w):
        return self.lam * float(w[1:] @ w[1:])


def _train_metric(metric, num, den):
    value = num / den if den > 0 else np.nan
    return float(np.sqrt(value)) if metric[0] == "rmse" else float(value)


class RidgeLinear:
    """Squared loss: the linear part eliminated exactly (Eq. 3, 5) and the exact step (Eq. 6).

    w*(y - q) = w*(y) - w*(q) is linear in q, so w*(q) follows the iterates by the same convex
    combination as q: one CG solve per iteration (for the new atom), warm starts elsewhere.
    """

    def __init__(self, rows, state, settings):
        self.rows = rows
        self.ridge = RidgeSystem(rows, settings.reg_linear, settings.cg_tol,
                                 settings.linear_mask)
        self.w_start = np.concatenate([[state.w0], state.w]).astype(np.float64)
        self.wp = None

    def start(self):
        ridge = self.ridge
        w = ridge.solve(((1.0, "y"), (-1.0, "q")),
                        x0=self.w_start if np.any(self.w_start) else None)
        self.wq = ridge.solve(((1.0, "q"),))
        self.wy = w + self.wq

    def refresh(self):
        self.wq = self.ridge.solve(((1.0, "q"),), x0=self.wq)

    def current(self, metric):
        self.w = self.wy - self.wq
        part, gq, c, num, den = self.rows.update(blk_current, "squared",
                                                 *self.ridge.masked(self.w), metric)
        return part + self.ridge.penalty(self.w), gq, c, _train_metric(metric, num, den)

    def predict_eval(self, X):
        return X @ self.w[1:] + self.w[0]

    def atom(self, p, eta, exact):
        out = self.rows.update(blk_atom, p, eta, True)
        return self.ridge._gather(*out)

    def line_search(self, eta, atom_rhs):
        # J(a) = J(0) - 2 a g^T delta + a^2 delta^T C delta; delta^T C delta is the ridge
        # residual norm (plus penalty) of delta, whose solution is eta w*(qp) - w*(q).
        self.wp = self.ridge.solve(((1.0, "qp"),), b=atom_rhs)
        return self._minimizer(eta * self.wp - self.wq)

    def _minimizer(self, w_delta):
        num, res2 = self.rows.reduce(blk_exact_step, *self.ridge.masked(w_delta))
        den = res2 + self.ridge.penalty(w_delta)
        self.segment = (num, den)
        if den > 0.0:
            return min(max(num / den, 0.0), 1.0)
        return 1.0 if num > 0.0 else 0.0

    def pair(self, p, pa, scale):
        """Store the pairwise direction; its right-hand side (for :meth:`pair_search`)."""
        return self.ridge._gather(*self.rows.update(blk_pair, p, pa, scale, True))

    def face(self, fn, *args):
        """Store a direction by the block function ``fn(..., rhs=True)``; its right-hand side."""
        return self.ridge._gather(*self.rows.update(fn, *args, True))

    def pair_search(self, rhs):
        """The exact step in [0, 1] along the stored pairwise direction: w*(delta) by one
        solve, then Eq. 6 with delta in place of eta q(p p^T) - q."""
        self.wd = self.ridge.solve((), b=rhs)
        return self._minimizer(self.wd)

    def gain(self, alpha):
        """J(0) - J(a) along the direction of the last line search: 2 a g^T delta -
        a^2 delta^T C delta (closed form from that search's two sums)."""
        num, den = self.segment
        return alpha * (2.0 * num - alpha * den)

    def pair_step(self, alpha):
        self.wq = self.wq + alpha * self.wd
        self.wp = None

    def step(self, alpha, eta, atom_rhs):
        if self.wp is None:  # 2/(t+2) step: no line search has solved for the atom yet
            self.wp = self.ridge.solve(((1.0, "qp"),), b=atom_rhs)
        self.wq = (1.0 - alpha) * self.wq + (alpha * eta) * self.wp
        self.wp = None

    def is_finite(self):
        return bool(np.all(np.isfinite(self.wq)))

    def finish(self):
        ridge = self.ridge
        w = ridge.solve(((1.0, "y"), (-1.0, "q")), x0=self.wy - self.wq)
        return w, self.rows.reduce(blk_squared_loss, *ridge.masked(w))[0] + ridge.penalty(w)


class LogisticLinear:
    """Logistic loss (extension): w re-fitted after each step, exact 1-D line search on the
    smooth loss along the segment (safeguarded Newton).

    The refit is Newton's method (the Hessian system solved by conjugate gradient, each step
    halved until the loss does not increase) until the next step's predicted decrease is below
    1e-13 |loss|: w is then the minimizer to round-off whatever the start, so the iterates do
    not depend on the order of the sums (the Dask fit equals the in-memory one). The first fit
    starts damped Newton from the start w; later fits start it from the previous w, which one
    Frank-Wolfe step moved little (a few Newton steps). L-BFGS from the previous w, run to
    ftol = 1e-15 at every step, took 460 loss evaluations per step and 90% of the 348 s CPU of
    ``ConvexFMClassifier()`` on Adult; it remains the fallback when Newton does not converge.
    """

    def __init__(self, rows, state, settings):
        self.rows = rows
        self.cg_tol = settings.cg_tol
        self.reg = float(settings.reg_linear)
        self.mask = (np.ones(rows.n_features) if settings.linear_mask is None
                     else np.asarray(settings.linear_mask, dtype=np.float64))
        self.w = np.concatenate([[state.w0], self.mask * state.w]).astype(np.float64)
        self.warm = False

    def _loss(self, w):
        rows, reg, mask = self.rows, self.reg, self.mask
        w1 = mask * w[1:]
        val, u0, u1 = rows.reduce(blk_logistic_loss, float(w[0]), w1)
        grad = np.empty_like(w)
        grad[0] = u0
        grad[1:] = mask * (u1 + reg * w1)
        return val + 0.5 * reg * float(w1 @ w1), grad

    def _newton(self, w, max_steps):
        """Newton steps from w; returns (w, loss, converged: the predicted decrease of the
        next step, -grad^T step, is below 1e-13 |loss|: a step below round-off). The Hessian
        system is solved by CG to a relative residual min(0.1, ||grad|| / ||grad at w||), an
        inexact Newton method that keeps the quadratic rate (Dembo, Eisenstat & Steihaug 1982)
        at a fraction of the CG iterations of a 1e-10 solve."""
        val, grad = self._loss(w)
        g_start = float(np.linalg.norm(grad)) or 1.0
        for _ in range(max_steps):
            self.rows.update(blk_logistic_curvature, float(w[0]), self.mask * w[1:])
            rtol = max(self.cg_tol, min(0.1, float(np.linalg.norm(grad)) / g_start))
            hessian = RidgeSystem(self.rows, self.reg, rtol, self.mask, weights="h")
            step = hessian.solve((), b=-grad)
            if not np.all(np.isfinite(step)):
                break
            if -float(grad @ step) <= 1e-13 * abs(val):
                return w, val, True
            # Damped Newton: halve a step that raises the loss beyond its round-off (near the
            # minimizer a full step lowers it by less than that); give up below 2^-20.
            for _ in range(21):
                val_new, grad_new = self._loss(w + step)
                if val_new <= val + 1e-12 * abs(val):
                    break
                step = 0.5 * step
            else:
                break
            w, val, grad = w + step, val_new, grad_new
        return w, val, False

    def _fit(self):
        # The first fit too: damped Newton from the start w (0 on a cold start) takes a few
        # dozen steps where L-BFGS to ftol = 1e-15 took ~1,000 loss evaluations on Adult.
        w, val, converged = self._newton(self.w, 10 if self.warm else 50)
        if converged:
            self.w, self.loss, self.warm = w, float(val), True
            return
        res = minimize(self._loss, self.w, jac=True, method="L-BFGS-B",
                       options={"maxiter": 1000, "gtol": 1e-10, "ftol": 1e-15})
        w, val, _ = self._newton(res.x, 5)
        self.w, self.loss, self.warm = w, float(val), True

    def start(self):
        self._fit()

    def refresh(self):
        self._fit()

    def current(self, metric):
        _, gq, c, num, den = self.rows.update(blk_current, "logistic", float(self.w[0]),
                                              self.mask * self.w[1:], metric)
        return self.loss, gq, c, _train_metric(metric, num, den)

    def predict_eval(self, X):
        return X @ self.w[1:] + self.w[0]

    def atom(self, p, eta, exact):
        self.rows.update(blk_atom, p, eta, False)

    def line_search(self, eta, atom_rhs):
        return safeguarded_newton(lambda a: self.rows.reduce(blk_logistic_segment, a))

    def pair(self, p, pa, scale):
        self.rows.update(blk_pair, p, pa, scale, False)

    def face(self, fn, *args):
        self.rows.update(fn, *args, False)

    def pair_search(self, rhs):
        return self.line_search(None, rhs)

    def gain(self, alpha):
        """The loss's decrease along the stored direction at step a, w fixed."""
        return self.rows.reduce(blk_logistic_gain, alpha)[0]

    def pair_step(self, alpha):
        self._fit()

    def step(self, alpha, eta, atom_rhs):
        self._fit()

    def is_finite(self):
        return bool(np.all(np.isfinite(self.w)))

    def finish(self):
        self._fit()
        return self.w, self.loss
