"""fmlearn.kernels.rows: CSR row-range products and products with X o X, dense and CSR,
against NumPy (float64 and float32 input, accumulated in float64)."""

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn.kernels.rows import (
    csr_matmat,
    csr_tmatmat,
    sq_matvec_csr,
    sq_matvec_dense,
    sq_rmatvec_csr,
    sq_rmatvec_dense,
)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_square_products_match_numpy(dtype):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 8)).astype(dtype)
    X[X < 0.1] = 0.0
    X[3] = 0.0  # an empty row
    v, r = rng.standard_normal(8), rng.standard_normal(30)
    Xd = X.astype(np.float64)
    want_mv, want_rmv = (Xd * Xd) @ v, (Xd * Xd).T @ r
    A = sp.csr_matrix(X)
    out = np.empty(30)
    sq_matvec_dense(X, v, out)
    np.testing.assert_allclose(out, want_mv, rtol=1e-12, atol=1e-12)
    sq_matvec_csr(A.indptr, A.indices, A.data, v, out)
    np.testing.assert_allclose(out, want_mv, rtol=1e-12, atol=1e-12)
    acc = np.ones(8)  # the r-products accumulate into their output
    sq_rmatvec_dense(X, r, acc)
    np.testing.assert_allclose(acc, 1.0 + want_rmv, rtol=1e-12, atol=1e-12)
    acc = np.zeros(8)
    sq_rmatvec_csr(A.indptr, A.indices, A.data, r, acc)
    np.testing.assert_allclose(acc, want_rmv, rtol=1e-12, atol=1e-12)


def test_csr_row_range_products_match_scipy_without_shifting_indptr():
    rng = np.random.default_rng(1)
    A = sp.random(40, 9, density=0.3, format="csr", random_state=1)
    B, R = rng.standard_normal((9, 3)), rng.standard_normal((15, 3))
    a, b = 10, 25
    out = np.empty((15, 3))
    csr_matmat(A.indptr[a:b + 1], A.indices, A.data, B, out)
    np.testing.assert_allclose(out, A[a:b] @ B, rtol=1e-14, atol=1e-14)
    acc = np.zeros((9, 3))
    csr_tmatmat(A.indptr[a:b + 1], A.indices, A.data, R, acc)
    np.testing.assert_allclose(acc, A[a:b].T @ R, rtol=1e-14, atol=1e-14)
