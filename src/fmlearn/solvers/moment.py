"""High-order moment elimination for the generalized FM on non-Gaussian features
(Lin et al. 2019, §3.2, Algorithm 1, Eq. 7-10), in the form that converges.

For features z with independent coordinates, zero mean, unit variance, third moments kappa and
fourth moments phi, and residuals r = y - f(z) with errors  dM = M* - M,  dw = w* - w,  the
statistics of one batch have expectations (Lin et al. 2019, Theorem 4 and Lemma 5)::

    H1 = 1/(2n) A'(r)           ->  dM + 1/2 tr(dM) I + 1/2 D(phi - 3) D(dM) + 1/2 D(kappa) D(dw)
    P0 = mean(r)                ->  tr(dM)
    P1 = (1/n) Z^T r            ->  dw + kappa o diag(dM)
    P2 = (1/n) (Z o Z)^T r - P0 ->  kappa o dw + (phi - 1) o diag(dM)

so per coordinate j, [P1_j, P2_j] = A_j [dw_j, dM_jj] with A_j = [[1, kappa_j], [kappa_j,
phi_j - 1]] (Eq. 8-9), whose determinant phi_j - 1 - kappa_j^2 is the tau of the Moment
Invertible Property (Lin et al. 2019, Definition 2). Solving for dw_j and dM_jj gives the estimators

    M-operator:  H1 - 1/2 P0 I - 1/2 D(G1 o P1 + G2 o P2),   G_j = A_j^{-1} [kappa_j, phi_j - 3]
    w-update:    H_1 o P1 + H_2 o P2,                          H_j = A_j^{-1} [1, 0]

Fixes to the printed algorithm (each derived from the expectations above, each tested in
tests/gfm/test_gfm.py):

1. Eq. (7) omits the ``- 1/2 P0 I`` term: it removes the skewness and kurtosis bias but leaves
   the 1/2 tr(dM) I of Theorem 4, and the printed iteration diverges even on Gaussian data for
   k >= 3. With the term, and G = 0, H = (1, 0) for Gaussian moments, the method is exactly
   Lin and Ye's (2016) Algorithm 1.
2. Appendix E writes G for the w-update where Eq. (10) has H; H is right (G gives the kurtosis
   correction of the diagonal, not dw).
3. "A(M) = D(X X)" in the definitions before Eq. 7 should read diag(X^T M X).
4. Algorithm 1 keeps M = U V^T unsymmetrised while Lemma 7 treats it as symmetric; we use the
   symmetrised M = (U V^T + V U^T)/2 of Lin and Ye 2016, so that the step is Lin and Ye's (2016)
   with the corrected operator.

Where tau_j is (numerically) zero the system A_j is singular: binary features have z^2 - 1 =
kappa z, so the diagonal of M is not identifiable (Lin et al. 2019, Proposition 1). There the
pseudo-inverse gives the minimum-norm split between dw_j and dM_jj; the estimator warns and suggests
iFM.
"""

import numpy as np


def moment_coefficients(kappa, phi, tau_floor=1e-8):
    """The (d, 4) array [G1, G2, H1, H2] of Lin et al. 2019, Eq. 8-9 from per-feature kappa and phi.

    Coordinates with ``phi - 1 - kappa^2 <= tau_floor`` use the pseudo-inverse of A_j.
    """
    kappa = np.asarray(kappa, dtype=np.float64)
    phi = np.asarray(phi, dtype=np.float64)
    d = kappa.shape[0]
    det = phi - 1.0 - kappa * kappa
    out = np.empty((d, 4))
    ok = det > tau_floor
    dk = det[ok]
    out[ok, 0] = 2.0 * kappa[ok] / dk
    out[ok, 1] = (phi[ok] - 3.0 - kappa[ok] ** 2) / dk
    out[ok, 2] = (phi[ok] - 1.0) / dk
    out[ok, 3] = -kappa[ok] / dk
    for j in np.flatnonzero(~ok):
        A = np.array([[1.0, kappa[j]], [kappa[j], phi[j] - 1.0]])
        Ainv = np.linalg.pinv(A, rcond=1e-10)
        out[j, 0:2] = Ainv @ np.array([kappa[j], phi[j] - 3.0])
        out[j, 2:4] = Ainv @ np.array([1.0, 0.0])
    return out


def diagonal_correction(coef, h2, h3, q):
    """Diagonal of the corrected operator minus H1: ``-1/2 P0 - 1/2 (G1 P1 + G2 P2)``.

    ``h2 = P0``, ``h3 = P1`` and ``q = (Z o Z)^T rho`` (so ``P2 = q - P0``).
    """
    P2 = q - h2
    return -0.5 * h2 - 0.5 * (coef[:, 0] * h3 + coef[:, 1] * P2)


def linear_update(coef, h2, h3, q):
    """Estimate of ``w* - w``: ``H1 o P1 + H2 o P2`` (Lin et al. 2019, Eq. 10 with H, see fix 2)."""
    return coef[:, 2] * h3 + coef[:, 3] * (q - h2)
