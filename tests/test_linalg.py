"""fmlearn.linalg: top eigen/singular pairs (dense, randomized, Lanczos agree with LAPACK),
canonical ties, low-rank operators and spectral norms against dense NumPy."""

import numpy as np
import pytest
from scipy.sparse.linalg import aslinearoperator

from fmlearn.linalg import (
    LANCZOS_MIN_DIM,
    LowRankOperator,
    leading_eigenpair,
    low_rank_eigh,
    spectral_norm,
    symmetric_low_rank,
    top_eigenpairs,
    top_singular_triplets,
)


def _planted_symmetric(d, vals, seed):
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    return (Q * vals) @ Q.T, Q


@pytest.mark.parametrize("method", ["dense", "randomized", "lanczos"])
@pytest.mark.parametrize("which", ["LM", "LA", "SA"])
def test_top_eigenpairs_methods_agree(method, which):
    d = 80
    vals = np.concatenate([[9.0, -8.0, 7.0, -6.5], np.linspace(-0.5, 0.5, d - 4)])
    A, Q = _planted_symmetric(d, vals, 0)
    got_vals, got_vecs = top_eigenpairs(aslinearoperator(A), 2, which=which, method=method,
                                        n_iter=30, random_state=0)
    expect = {"LM": [9.0, -8.0], "LA": [9.0, 7.0], "SA": [-8.0, -6.5]}[which]
    np.testing.assert_allclose(got_vals, expect, atol=1e-6)
    np.testing.assert_allclose(np.abs(got_vecs.T @ A @ got_vecs), np.abs(np.diag(expect)),
                               atol=1e-5)


def test_top_singular_triplets_and_dense_budget():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((50, 3)) @ rng.standard_normal((3, 40)) + 1e-3 * rng.standard_normal(
        (50, 40))
    U0, s0, Vt0 = np.linalg.svd(A)
    for method in ("dense", "randomized", "lanczos"):
        U, s, Vt = top_singular_triplets(A, 3, method=method, random_state=0, n_iter=10)
        np.testing.assert_allclose(s, s0[:3], rtol=1e-6)
        np.testing.assert_allclose((U * s) @ Vt, (U0[:, :3] * s0[:3]) @ Vt0[:3], atol=1e-6)
    with pytest.raises(ValueError, match="dense_max_dim"):
        top_eigenpairs(np.eye(30), 2, method="dense", dense_max_dim=10)


def test_ties_are_resolved_canonically():
    # A degenerate eigenvalue straddling the top-k cut: the choice must not depend on how the
    # (same) matrix was perturbed at round-off level.
    vals = np.array([5.0, 2.0, 2.0, 2.0, 0.1, 0.0])
    A, _ = _planted_symmetric(6, vals, 2)
    _, v1 = top_eigenpairs(A, 2, method="dense")
    _, v2 = top_eigenpairs(A + 1e-15 * np.eye(6)[:, ::-1] * (A != 0), 2, method="dense")
    np.testing.assert_allclose(v1 @ v1.T, v2 @ v2.T, atol=1e-9)


def test_low_rank_operator_and_norms():
    rng = np.random.default_rng(3)
    U, V = rng.standard_normal((20, 3)), rng.standard_normal((20, 3))
    for zero in (False, True):
        op = symmetric_low_rank(U, V, zero_diagonal=zero)
        dense = (U @ V.T + V @ U.T) / 2
        if zero:
            dense -= np.diag(np.diag(dense))
        np.testing.assert_allclose(op.toarray(), dense, atol=1e-12)
        B = rng.standard_normal((20, 4))
        np.testing.assert_allclose(op @ B, dense @ B, atol=1e-12)
        np.testing.assert_allclose(op.T @ B, dense.T @ B, atol=1e-12)
        assert spectral_norm(op) == pytest.approx(np.linalg.norm(dense, 2), rel=1e-10)
        assert op.trace() == pytest.approx(np.trace(dense), abs=1e-10)
    op = symmetric_low_rank(U, V)
    vals, vecs = low_rank_eigh(op)
    ev = np.linalg.eigvalsh(op.toarray())
    np.testing.assert_allclose(np.sort(vals), np.sort(ev[np.argsort(-np.abs(ev))[:6]]),
                               atol=1e-10)
    rect = LowRankOperator(rng.standard_normal((30, 2)), rng.standard_normal((10, 2)))
    assert spectral_norm(rect) == pytest.approx(np.linalg.norm(rect.toarray(), 2), rel=1e-10)
    # matrix-free path above the dense budget agrees with LAPACK
    big = symmetric_low_rank(rng.standard_normal((700, 2)), rng.standard_normal((700, 2)),
                             zero_diagonal=True)
    assert spectral_norm(big) == pytest.approx(np.linalg.norm(big.toarray(), 2), rel=1e-8)


@pytest.mark.parametrize("d", [LANCZOS_MIN_DIM, LANCZOS_MIN_DIM + 40])
def test_leading_eigenpair_dense_and_lanczos_match_lapack(d):
    vals = np.concatenate([[4.0, -9.0, 3.5], np.linspace(-1.0, 1.0, d - 3)])
    A, _ = _planted_symmetric(d, vals, 5)
    p, rho, ok = leading_eigenpair(aslinearoperator(A), v0=np.ones(d), tol=1e-12)
    assert ok and rho == pytest.approx(4.0, rel=1e-10)  # largest algebraic, not magnitude
    assert np.linalg.norm(p) == pytest.approx(1.0)
    assert float(p @ A @ p) == pytest.approx(rho, rel=1e-12)


def test_leading_eigenpair_reports_non_convergence():
    d = 200
    A, _ = _planted_symmetric(d, np.linspace(0.0, 1.0, d), 6)  # no gap at the top
    p, rho, ok = leading_eigenpair(A, v0=np.ones(d), tol=1e-14, maxiter=2)
    assert not ok and np.linalg.norm(p) == pytest.approx(1.0)
    assert rho == pytest.approx(float(p @ A @ p), rel=1e-12)
