"""kernels/lanczos.py against numpy.linalg.eigh / eigvalsh."""

import numpy as np
import pytest

from fmlearn.kernels.lanczos import (
    LanczosWork,
    lanczos_top,
    lcg_fill,
    start_state,
    tridiag_bisect,
    tridiag_vector,
)


def _work(D):
    return LanczosWork(np.zeros((D, D)), np.zeros((D, D)), *(np.zeros(D) for _ in range(5)))


@pytest.mark.parametrize("D, seed", [(5, 0), (20, 1), (40, 2)])
def test_tridiagonal_bisection_and_inverse_iteration_match_eigvalsh(D, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=D), rng.normal(size=D)
    T = np.diag(a) + np.diag(b[:-1], 1) + np.diag(b[:-1], -1)
    lam = np.linalg.eigvalsh(T)
    for index in (0, D - 1):
        approx = tridiag_bisect(a, b, D, index, 60)
        assert approx == pytest.approx(lam[index], abs=1e-9 * np.abs(lam).max())
        y = np.zeros(D)
        rq = tridiag_vector(a, b, D, approx, y, np.zeros(D))
        assert rq == pytest.approx(lam[index], abs=1e-10 * np.abs(lam).max())
        np.testing.assert_allclose(T @ y, rq * y, atol=1e-7)


@pytest.mark.parametrize("seed", range(4))
def test_lanczos_top_is_the_largest_magnitude_eigenpair(seed):
    rng = np.random.default_rng(seed)
    D = 30
    A = rng.normal(size=(D, D))
    S = A + A.T
    B = rng.normal(size=(D, D))
    K = 0.1 * (B + B.T)
    eta = 0.7
    H = -eta * S - 2 * K
    lam, Q = np.linalg.eigh(H)
    top = np.argmax(np.abs(lam))
    q = np.zeros(D)
    q0 = np.zeros(D)
    q0[0] = 1.0
    theta = lanczos_top(S, K, eta, q0, np.uint64(start_state(seed + 1, 0)), 1e-10, _work(D), q)
    assert theta == pytest.approx(lam[top], rel=1e-8)
    assert abs(q @ Q[:, top]) == pytest.approx(1.0, abs=1e-6)


def test_lanczos_rescales_extreme_magnitudes_instead_of_failing():
    # entries near 1e-300 or 1e300 would underflow / overflow their squares
    rng = np.random.default_rng(5)
    A = rng.normal(size=(12, 12))
    S = A + A.T
    lam = np.linalg.eigvalsh(-S)
    ref = lam[np.argmax(np.abs(lam))]
    for scale in (1e-300, 1e300):
        q = np.zeros(12)
        q0 = np.eye(12)[0]
        h = np.uint64(start_state(1, 0))
        theta = lanczos_top(S * scale, np.zeros((12, 12)), 1.0, q0, h, 1e-12, _work(12), q)
        assert np.isfinite(theta) and theta / scale == pytest.approx(ref, rel=1e-8)


def test_start_vectors_depend_on_round_and_key_only():
    a, b, c = np.zeros(8), np.zeros(8), np.zeros(8)
    lcg_fill(start_state(3, 0), a)
    lcg_fill(start_state(3, 0), b)
    lcg_fill(start_state(3, 7), c)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.all(np.abs(a) <= 0.5)
