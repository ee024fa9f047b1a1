"""Rank-one matrix sensing (seed 000 §2.1), one pass: symmetric, asymmetric (inductive matrix
completion) and phase retrieval recover the planted matrix to 1e-6; plus the linear-algebra
helpers they rely on (top eigen/singular pairs, low-rank operators, spectral norms)."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import aslinearoperator

from fmlearn import AsymmetricRankOneSensing, PhaseRetrieval, SymmetricRankOneSensing
from fmlearn.datasets import (
    make_asymmetric_sensing,
    make_phase_retrieval,
    make_symmetric_sensing,
)
from fmlearn.exceptions import DivergenceError
from fmlearn.linalg import (
    LowRankOperator,
    low_rank_eigh,
    spectral_norm,
    symmetric_low_rank,
    top_eigenpairs,
    top_singular_triplets,
)
from fmlearn.solvers.one_pass import AsymState, Batch, OnePassSettings, asym_step


def test_symmetric_sensing_recovers_to_1e6():
    d, k, n, T = 60, 3, 1800, 20
    X, y, truth = make_symmetric_sensing((T + 1) * n, d, k, random_state=0)
    s = SymmetricRankOneSensing(k, batch_size=n, n_passes=1, random_state=0)
    s.fit(X, y, truth=truth)
    err = s.history_["recovery_error"]
    assert err[-1] < 1e-6
    assert np.all(s.w_ == 0) and s.intercept_ == 0.0
    # The safeguard never fires on an isotropic design at these batch sizes: same result.
    s2 = SymmetricRankOneSensing(k, batch_size=n, n_passes=1, safeguard=False, random_state=0)
    np.testing.assert_allclose(s2.fit(X, y).working_V_, s.working_V_, rtol=0, atol=1e-12)


def test_phase_retrieval_recovers_signal_up_to_sign():
    X, y, truth = make_phase_retrieval(25 * 1000, 50, random_state=1)
    p = PhaseRetrieval(batch_size=1000, n_passes=1, random_state=0).fit(X, y, truth=truth)
    x = truth.signal
    err = min(np.linalg.norm(p.signal_ - x), np.linalg.norm(p.signal_ + x))
    assert err < 1e-6
    assert p.history_["recovery_error"][-1] < 1e-6
    assert "n_factors" not in p.get_params()


def test_asymmetric_sensing_recovers_to_1e6_and_sparse_equals_dense():
    d1, d2, k, n, T = 40, 30, 3, 2100, 15
    X, y, truth = make_asymmetric_sensing((T + 1) * n, d1, d2, k, random_state=2)
    a = AsymmetricRankOneSensing(k, n_left=d1, batch_size=n, random_state=0)
    a.fit(X, y, truth=truth)
    err = np.array(a.history_["recovery_error"])
    assert err[-1] < 1e-6
    assert np.exp(np.polyfit(np.arange(T + 1), np.log(err), 1)[0]) < 0.5
    np.testing.assert_allclose(a.U_.T @ a.U_, np.eye(k), atol=1e-10)
    Xs = X[: 3 * n].copy()
    Xs[np.abs(Xs) < 0.4] = 0.0
    kw = dict(n_left=d1, batch_size=n, random_state=0)
    dense = AsymmetricRankOneSensing(k, **kw).fit(Xs, y[: 3 * n])
    csr = AsymmetricRankOneSensing(k, **kw).fit(sp.csr_matrix(Xs), y[: 3 * n])
    np.testing.assert_allclose(csr.predict(sp.csr_matrix(Xs)), dense.predict(Xs), atol=1e-9)


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


def test_non_isotropic_design_diverges_without_safeguard():
    # Sensing assumes isotropic x; with a large feature mean the plain step explodes and says
    # so, while the safeguard stalls instead of exploding.
    rng = np.random.default_rng(4)
    X = rng.normal(loc=100.0, size=(400, 3))
    y = rng.normal(size=400)
    with pytest.raises(DivergenceError):
        SymmetricRankOneSensing(2, batch_size=50, n_passes=1, safeguard=False).fit(X, y)
    s = SymmetricRankOneSensing(2, batch_size=50, n_passes=1).fit(X, y)
    assert np.all(np.isfinite(s.predict(X)))
    assert max(s.history_["rmse"]) <= 1.01 * s.history_["rmse"][0] * 10


def test_asymmetric_needs_two_sides():
    with pytest.raises(ValueError, match="n_features=1"):
        AsymmetricRankOneSensing(1).fit(np.ones((5, 1)), np.ones(5))
    with pytest.raises(ValueError, match="truth M has shape"):
        X, y, truth = make_asymmetric_sensing(200, 4, 3, 1, random_state=0)
        AsymmetricRankOneSensing(1, n_left=3).fit(X, y, truth=truth)


# -- linear algebra ------------------------------------------------------------------------------
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


def test_batch_operator_standardises_implicitly():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((50, 7))
    X[X < 0.3] = 0.0
    mean, scale = rng.standard_normal(7), rng.uniform(0.5, 2.0, 7)
    Z = (X - mean) / scale
    B, R, v = rng.standard_normal((7, 3)), rng.standard_normal((50, 2)), rng.standard_normal(7)
    for Xin in (X, sp.csr_matrix(X)):
        b = Batch(Xin, mean, scale)
        np.testing.assert_allclose(b.matmat(B), Z @ B, atol=1e-12)
        np.testing.assert_allclose(b.rmatmat(R), Z.T @ R, atol=1e-12)
        np.testing.assert_allclose(b.sq_matvec(v), (Z * Z) @ v, atol=1e-11)
        np.testing.assert_allclose(b.sq_rmatvec(R[:, 0]), (Z * Z).T @ R[:, 0], atol=1e-11)
