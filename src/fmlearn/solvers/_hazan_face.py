"""Corrective steps of Hazan's algorithm (:mod:`fmlearn.solvers.hazan`): projected gradient
on the face spanned by the current atoms.

Frank-Wolfe and its pairwise variant move W one rank-one atom at a time; the atoms point
where the gradient pointed when they were added, and their span is only slowly rotated and
re-weighted towards the optimum (``ConvexFMClassifier()`` on IJCNN1 ended 100 pairwise
steps at a certified gap of 0.0076 x the class entropy, the objective falling by 0.006% per
step, 1% above the optimum). The standard cure is a corrective step on the current atoms
(Jaggi 2013, ICML, Section 4, "fully corrective" variants; Laue 2012, ICML, local refinement
of the low-rank factor): with Q (d x k) an orthonormal basis of the atoms' span and
W = Q S Q^T, minimise J over the face {Q S Q^T : S psd, tr S <= eta}, a convex problem in the
k x k matrix S whose gradient Q^T grad J Q = -Q^T M(g) Q costs one O(n k^2) product (B = X Q
is stored on the rows).

Each corrective step is a projected-gradient step with two exact line searches (so it has no
step size to tune and never raises J):

1. the Cauchy step along -G (G the face gradient), searched over t in [0, eta / ||G||_2] (a
   move of at most eta in spectral norm, the feasible set's radius);
2. S' = Proj(S - t G), the Euclidean projection on {S psd, tr S <= eta} (eigenvalues clipped
   at 0 and projected on the capped simplex), and the exact step along S' - S in [0, 1].

The linear part is re-fitted after the step as after a Frank-Wolfe step. Steps never leave the
feasible set (S' is feasible and the segment is convex), so the Frank-Wolfe gap still
certifies every iterate. Every sum is one of the rows' block functions and every decision a
continuous function of the sums, so the Dask fit takes the same steps.
"""

import numpy as np

from ..kernels.lowrank import project_core
from ._hazan_rows import blk_face_basis, blk_face_direction, blk_face_gradient, blk_pair_step

#: Eigenvalues of W at most DROP x tr W are dropped (round-off of rank-deficient atoms: a
#: threshold, not the sign of a round-off, so that the Dask fit keeps the same atoms).
DROP = 1e-12


def compress_atoms(P, lam, rtol=1e-10):
    """Rewrite W = P diag(lam) P^T in its eigen-basis, dropping eigenvalues <= rtol * tr(W).

    Thin QR of P (d x m) then an m x m eigendecomposition: O(d m^2), never d x d. Returns
    orthonormal atoms and their (descending) eigenvalues; W changes by at most the dropped mass.
    """
    m = lam.shape[0]
    if m == 0:
        return P[:, :0].copy(), lam.copy()
    Q, R = np.linalg.qr(P)
    core = (R * lam) @ R.T
    vals, vecs = np.linalg.eigh(0.5 * (core + core.T))
    order = np.argsort(vals)[::-1]
    vals, vecs = vals[order], vecs[:, order]
    total = float(np.sum(np.maximum(vals, 0.0)))
    keep = vals > rtol * total
    return np.ascontiguousarray(Q @ vecs[:, keep]), vals[keep].copy()


def project_spectahedron(S, eta):
    """Euclidean projection of a symmetric S on {S psd, tr S <= eta}
    (:func:`fmlearn.kernels.lowrank.project_core`, the projection of the online learners)."""
    K = np.array(S, dtype=np.float64, order="C")
    project_core(K, K.shape[0], float(eta), True)
    return K


def _direction(rows, linear, Q, D):
    """Store delta = q(Q D Q^T) on the rows; the exact step in [0, 1] along it."""
    dD = np.einsum("ja,ab,jb->j", Q, D, Q)
    return linear.pair_search(linear.face(blk_face_direction, D, dD))


def face_steps(rows, linear, P, lam, eta, n_steps, metric, idx=None):
    """``n_steps`` corrective steps on the face of W = P diag(lam) P^T (see the module
    docstring); with ``idx`` (the features of one interaction group, holding every atom),
    Q is zero outside them, so that W stays block-diagonal. Returns (atoms, weights) of the
    result, the eigen-basis of Q S Q^T (at most as many atoms as P's rank); the rows' q and
    ``linear`` follow the steps."""
    if idx is None:
        Q, vals = compress_atoms(P, lam, rtol=DROP)
    else:
        Qg, vals = compress_atoms(P[idx], lam, rtol=DROP)
        Q = np.zeros((P.shape[0], vals.shape[0]))
        Q[idx] = Qg
    if vals.shape[0] == 0:
        return P, lam
    S = np.diag(vals)
    rows.update(blk_face_basis, Q)
    for _ in range(n_steps):
        _, _, c, _ = linear.current(metric)
        MQ = rows.reduce(blk_face_gradient)[0] - (Q * c[:, None]).T @ Q
        G = -0.5 * (MQ + MQ.T)
        norm = float(np.max(np.abs(np.linalg.eigvalsh(G))))
        if not norm > 0.0:
            break
        span = eta / norm
        cauchy = _direction(rows, linear, Q, -span * G)
        if not cauchy > 0.0:
            break
        D = project_spectahedron(S - (cauchy * span) * G, eta) - S
        alpha = _direction(rows, linear, Q, D)
        if not alpha > 0.0:
            break
        rows.update(blk_pair_step, alpha)
        linear.pair_step(alpha)
        S = S + alpha * D
    rows.update(blk_face_basis, None)
    vals, vecs = np.linalg.eigh(0.5 * (S + S.T))
    keep = vals > DROP * float(np.sum(np.maximum(vals, 0.0)))
    return Q @ vecs[:, keep], vals[keep]
