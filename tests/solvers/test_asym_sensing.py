"""fmlearn.solvers.asym_sensing: one step of asymmetric rank-one sensing equals a dense NumPy
oracle of seed 000 §2.1 (U <- QR(E Vbar), V <- E^T U)."""

import numpy as np

from fmlearn.solvers.asym_sensing import AsymState, asym_step
from fmlearn.solvers.one_pass import OnePassSettings


def test_asymmetric_step_matches_dense_oracle():
    rng = np.random.default_rng(3)
    d1, d2, k, n = 8, 6, 2, 200
    Xu, Xv = rng.standard_normal((n, d1)), rng.standard_normal((n, d2))
    y = rng.standard_normal(n)
    U = np.linalg.qr(rng.standard_normal((d1, k)))[0]
    V = rng.standard_normal((d2, k))
    st = AsymState(U.copy(), V.copy(), t=1, y_scale=1.0, ref_norm=10.0)
    new, _ = asym_step(Xu, Xv, y, np.ones(n), st, OnePassSettings(k))
    r = y - np.einsum("ij,jk,ik->i", Xu, U @ V.T, Xv)
    E = (Xu.T * r) @ Xv / n + U @ V.T
    Vbar = np.linalg.qr(V)[0]
    Q, R = np.linalg.qr(E @ (Vbar * np.sign(np.diag(np.linalg.qr(V)[1]))))
    Q = Q * np.sign(np.diag(R))
    np.testing.assert_allclose(new.U, Q, atol=1e-10)
    np.testing.assert_allclose(new.V, E.T @ Q, atol=1e-10)
