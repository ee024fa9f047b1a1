"""kernels/lowrank.py against dense NumPy: prediction, projection onto the trace-norm ball,
compression."""

import numpy as np
import pytest

from fmlearn.kernels.lowrank import (
    LowRank,
    ball_threshold,
    lr_compress,
    lr_predict,
    project_core,
)


def _project(A, delta, psd):
    lam, Q = np.linalg.eigh(0.5 * (A + A.T))
    mags = np.maximum(lam, 0.0) if psd else np.abs(lam)
    best = None
    for tau in np.linspace(0, mags.max(), 200001):  # brute force: sum (|lam| - tau)_+ = delta
        if np.maximum(mags - tau, 0).sum() <= delta:
            best = tau
            break
    m = np.maximum(mags - best, 0.0)
    return (Q * (m if psd else np.sign(lam) * m)) @ Q.T, best


@pytest.mark.parametrize("psd", [False, True])
def test_projection_onto_the_ball_matches_brute_force(psd):
    rng = np.random.default_rng(0)
    A = rng.normal(size=(8, 8))
    A = A + A.T
    P_ref, tau_ref = _project(A, 3.0, psd)
    lam = np.linalg.eigvalsh(A)
    assert ball_threshold(lam, 3.0, psd) == pytest.approx(tau_ref, abs=1e-4)
    K = A.copy()
    project_core(K, 8, 3.0, psd)
    np.testing.assert_allclose(K, P_ref, atol=1e-3)
    assert np.abs(np.linalg.eigvalsh(K)).sum() <= 3.0 + 1e-9
    if psd:
        assert np.linalg.eigvalsh(K).min() > -1e-12


def _lowrank(rng, D, r_max, r):
    Q, _ = np.linalg.qr(rng.normal(size=(D, r_max)))
    U = np.ascontiguousarray(Q.T)
    K = np.zeros((r_max, r_max))
    B = rng.normal(size=(r, r))
    K[:r, :r] = B + B.T
    return LowRank(U, K, np.array([r]), False, np.zeros(1))


@pytest.mark.parametrize("self_inter", [True, False])
def test_prediction_equals_the_dense_quadratic_form(self_inter):
    rng = np.random.default_rng(1)
    D, r = 15, 5
    C = _lowrank(rng, D, 8, r)
    M = C.U[:r].T @ C.K[:r, :r] @ C.U[:r]
    idx = np.array([1, 4, 9, D - 1], dtype=np.int64)
    val = np.array([0.5, -2.0, 1.5, 1.0])
    x = np.zeros(D)
    x[idx] = val
    expected = 0.5 * x @ M @ x
    if not self_inter:
        expected -= 0.5 * np.sum(val[:-1] ** 2 * np.diag(M)[idx[:-1]])
    got = lr_predict(C, idx, val, 4, self_inter, D - 1, np.zeros(8), np.zeros(8))
    assert got == pytest.approx(expected, rel=1e-12)
    dense = LowRank(np.zeros((0, D)), M.copy(), np.array([D]), True, np.zeros(1))
    got = lr_predict(dense, idx, val, 4, self_inter, D - 1, np.zeros(D), np.zeros(D))
    assert got == pytest.approx(expected, rel=1e-12)


def test_compression_keeps_the_largest_eigenvalues_and_reports_the_rest():
    rng = np.random.default_rng(2)
    D, r = 12, 6
    C = _lowrank(rng, D, 6, r)
    M = C.U.T @ C.K @ C.U
    lam = np.linalg.eigvalsh(M)
    lam = lam[np.argsort(-np.abs(lam))]
    new_r, dropped = lr_compress(C.U, C.K, r, 3, np.zeros((6, 1)), 0)
    assert new_r == 3
    assert dropped == pytest.approx(np.abs(lam[3:6]).sum(), rel=1e-10)
    kept = np.linalg.eigvalsh(C.U[:3].T @ C.K[:3, :3] @ C.U[:3])
    np.testing.assert_allclose(np.sort(kept[np.abs(kept) > 1e-9]), np.sort(lam[:3]), rtol=1e-10)
    np.testing.assert_allclose(C.U[:3] @ C.U[:3].T, np.eye(3), atol=1e-12)
