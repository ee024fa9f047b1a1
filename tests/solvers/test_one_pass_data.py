"""fmlearn.solvers._one_pass_data: the chunked products of a standardised batch equal the dense
NumPy products of Z = (X - mean) / scale, sparse equals dense, and the first batch's statistics
(computed chunk by chunk, without copies of X) equal NumPy's on the whole array."""

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn.solvers import _one_pass_data as data
from fmlearn.solvers._one_pass_data import Batch, standardization, weighted_moments


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


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("zero_diagonal", [False, True])
def test_residual_and_gram_pass_match_numpy_over_many_chunks(monkeypatch, sparse,
                                                             zero_diagonal):
    monkeypatch.setattr(data, "CHUNK_VALUES", 60)  # chunks of 64 rows: several per batch
    rng = np.random.default_rng(5)
    n, d, k = 300, 9, 2
    X = rng.standard_normal((n, d))
    X[X < 0.2] = 0.0
    y, sw = rng.standard_normal(n), rng.uniform(0.5, 2.0, n)
    mean, scale = rng.standard_normal(d), rng.uniform(0.5, 2.0, d)
    U, V, w = rng.standard_normal((d, k)), rng.standard_normal((d, k)), rng.standard_normal(d)
    Z = (X - mean) / scale
    M = (U @ V.T + V @ U.T) / 2
    if zero_diagonal:
        M -= np.diag(np.diag(M))
    r = y - (0.3 + Z @ w + np.einsum("ij,jk,ik->i", Z, M, Z))
    rho = sw * r / sw.sum()
    b = Batch(sp.csr_matrix(X) if sparse else X, mean, scale, n_jobs=2)
    out = b.residual_pass(U, V, w, 0.3, y, sw, sw.sum(), zero_diagonal, need_q=True)
    assert out["rss"] == pytest.approx(np.dot(sw, r * r), rel=1e-12)
    np.testing.assert_allclose(out["rho"], rho, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(out["G"], Z.T @ np.column_stack([rho[:, None] * (Z @ U), rho]),
                               atol=1e-12)
    np.testing.assert_allclose(out["q"], (Z * Z).T @ rho, atol=1e-12)
    B = rng.standard_normal((d, 3))
    np.testing.assert_allclose(b.gram_pass(B, out["rho"]), Z.T @ (rho[:, None] * (Z @ B)),
                               atol=1e-12)


def test_sparse_chunks_are_views_of_the_batch():
    X = sp.random(40, 6, density=0.4, format="csr", random_state=0)
    view = data._row_view(X, 10, 25)
    B = np.random.default_rng(0).standard_normal((6, 2))
    np.testing.assert_allclose(view @ B, X[10:25] @ B, rtol=1e-14)
    np.testing.assert_allclose(data._tmatmul(view, B[:, :1].repeat(15, 0)[:15]),
                               X[10:25].T @ B[:, :1].repeat(15, 0)[:15], rtol=1e-14)
    assert view.shape == (15, 6)
    assert view.data is X.data and view.indices is X.indices
    assert np.shares_memory(view.indptr, X.indptr)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_first_batch_statistics_match_numpy(monkeypatch, dtype):
    monkeypatch.setattr(data, "CHUNK_VALUES", 50)
    rng = np.random.default_rng(6)
    X = (rng.exponential(size=(400, 5)) * [1, 2, 3, 4, 5] + [0, 1, -1, 2, 0]).astype(dtype)
    X[:, 4] = 7.0  # a constant column keeps scale 1
    sw = rng.uniform(0.1, 3.0, 400)
    Xd = X.astype(np.float64)
    mean = sw @ Xd / sw.sum()
    std = np.sqrt(sw @ (Xd - mean) ** 2 / sw.sum())
    std[4] = 1.0
    for Xin in (X, sp.csr_matrix(X)):
        m, s = standardization(Xin, sw)
        np.testing.assert_allclose(m, mean, rtol=1e-6 if dtype == np.float32 else 1e-12)
        np.testing.assert_allclose(s, std, rtol=1e-5 if dtype == np.float32 else 1e-10)
        k3, k4 = weighted_moments(Xin, sw, mean, std)
        Z = (Xd - mean) / std
        np.testing.assert_allclose(k3, sw @ Z ** 3 / sw.sum(), rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(k4, sw @ Z ** 4 / sw.sum(), rtol=1e-8, atol=1e-8)
    m, s = standardization(X, sw, center=False)
    np.testing.assert_array_equal(m, 0.0)
    np.testing.assert_allclose(s, np.sqrt(sw @ Xd ** 2 / sw.sum()), rtol=1e-6)


def test_first_batch_statistics_make_no_copy_of_X():
    import tracemalloc

    rng = np.random.default_rng(7)
    X = rng.standard_normal((6000, 1000))  # 48 MB, six chunks of CHUNK_VALUES
    sw = np.ones(6000)
    tracemalloc.start()
    try:
        mean, scale = standardization(X, sw)
        weighted_moments(X, sw, mean, scale)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < X.nbytes / 2  # main's version allocated 2 n x d temporaries (2 X.nbytes)


def test_residual_pass_reports_non_finite_rows():
    X = np.random.default_rng(8).standard_normal((300, 5))
    X[170, 2] = np.inf
    b = Batch(X, n_jobs=2)
    k = 2
    with pytest.raises(ValueError, match="row 170 of the batch"):
        b.residual_pass(np.zeros((5, k)), np.zeros((5, k)), np.zeros(5), 0.0, np.zeros(300),
                        np.ones(300), 300.0)
