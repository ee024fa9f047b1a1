"""kernels/symacc.py: the accumulated gradient S exact and as a Frequent Directions sketch,
against dense NumPy."""

import numpy as np
import pytest

from fmlearn.kernels.symacc import (
    EXACT,
    SKETCH,
    SymAcc,
    fd_shrink,
    sacc_add,
    sacc_matvec,
    sacc_quad,
    sacc_rows,
)
from fmlearn.solvers._online_common import SymAccumulator, check_symacc


def _rows(rng, n, D, nnz):
    for _ in range(n):
        idx = np.sort(rng.choice(D - 1, nnz, replace=False)).astype(np.int64)
        yield np.append(idx, D - 1), np.append(rng.normal(size=nnz), 1.0), rng.normal()


def _dense_update(S, idx, val, coef, self_inter, d):
    x = np.zeros(S.shape[0])
    x[idx] = val
    G = np.outer(x, x)
    if not self_inter:
        G -= np.diag(np.where(np.arange(S.shape[0]) < d, x * x, 0.0))
    return S + coef * G


def _sketch(D, ell):
    return SymAcc(SKETCH, np.zeros(D + 1, np.int64), np.zeros(0, np.int32), np.zeros(0),
                  np.zeros((2 * ell, D)), np.zeros((2 * ell, D)), np.zeros(2, np.int64),
                  np.zeros(2), np.zeros(D))


@pytest.mark.parametrize("self_inter", [True, False])
def test_exact_and_sketch_products_equal_the_dense_matrix(self_inter):
    # a sketch with more rows than the rank it sees is exact; products of either form equal
    # those of the dense S they represent
    rng = np.random.default_rng(0)
    D = 30
    acc = SymAccumulator(D, True, 16)
    rows = list(_rows(rng, 12, D, 4))
    S_exact = acc.new()  # an empty pattern: no entry to add to
    dense = np.zeros((D, D))
    S_sk = _sketch(D, 40)
    for idx, val, c in rows:
        dense = _dense_update(dense, idx, val, c, self_inter, D - 1)
        assert sacc_add(S_sk, idx, val, idx.shape[0], c, self_inter, D - 1) == 0
    np.testing.assert_allclose(acc.to_dense(S_sk), dense, atol=1e-12)
    v = rng.normal(size=D)
    out = np.zeros(D)
    sacc_matvec(S_sk, v, out)
    np.testing.assert_allclose(out, dense @ v, atol=1e-12)
    idx, val, _ = rows[0]
    sacc_rows(S_sk, idx, val, idx.shape[0], out)
    x = np.zeros(D)
    x[idx] = val
    np.testing.assert_allclose(out, dense @ x, atol=1e-12)
    quad = sacc_quad(S_sk, 0.5, idx, val, idx.shape[0], self_inter, D - 1)
    expected = 0.5 * x @ dense @ x
    if not self_inter:
        expected -= 0.5 * np.sum(np.diag(dense)[idx[:-1]] * val[:-1] ** 2)
    assert quad == pytest.approx(expected, rel=1e-10)
    assert sacc_add(S_exact, rows[0][0], rows[0][1], 5, 1.0, True, D - 1) == -1  # no pattern


def test_frequent_directions_error_stays_below_its_reported_bound():
    # Ghashami et al. 2016, Thm. 2.1: ||A'A - B'B||_2 <= sum of the shrink deltas
    rng = np.random.default_rng(1)
    D, ell = 60, 4
    S = _sketch(D, ell)
    dense = np.zeros((D, D))
    shrinks = 0
    for idx, val, _ in _rows(rng, 200, D, 6):
        c = abs(rng.normal()) + 0.1
        shrinks += sacc_add(S, idx, val, idx.shape[0], c, True, D - 1)
        dense = _dense_update(dense, idx, val, c, True, D - 1)
    assert shrinks > 20 and S.fill[0] < 2 * ell
    approx = S.P[: S.fill[0]].T @ S.P[: S.fill[0]]
    err = np.linalg.norm(dense - approx, 2)
    assert 0 < err <= S.shrunk[0] * (1 + 1e-9)
    assert np.linalg.eigvalsh(dense - approx).min() > -1e-9  # FD never overestimates


def test_shrink_keeps_the_top_directions():
    rng = np.random.default_rng(2)
    B = rng.normal(size=(8, 20))
    G = B.T @ B
    lam = np.linalg.eigvalsh(B @ B.T)[::-1]
    delta = fd_shrink(B)
    assert delta == pytest.approx(lam[3])
    np.testing.assert_allclose(np.linalg.eigvalsh(B @ B.T)[::-1][:3], lam[:3] - lam[3],
                               rtol=1e-9)
    assert np.all(B[3:] == 0.0)
    assert np.linalg.norm(G - B.T @ B, 2) <= delta * (1 + 1e-9)


def test_exact_pattern_switches_to_a_bounded_sketch(monkeypatch):
    # the pattern grows with the pairs seen; beyond 4 * sketch_size * D entries (and the floor
    # SKETCH_MIN_ENTRIES, lowered here) S becomes its sketch, whose size no longer depends on
    # the stream
    import fmlearn.solvers._online_common as common

    monkeypatch.setattr(common, "SKETCH_MIN_ENTRIES", 0)
    rng = np.random.default_rng(3)
    D = 200
    acc = SymAccumulator(D, True, 4)
    S = acc.new()
    switched = False
    for _ in range(40):
        idx = np.sort(rng.choice(D - 1, 10, replace=False)).astype(np.int32)
        S, sw = acc.prepare(S, np.array([0, 10], np.int64), idx)
        switched |= sw
        check_symacc(S, D)
        assert S.indices.shape[0] <= acc.exact_cap
    assert switched and S.mode == SKETCH and S.P.shape == (8, D)
    assert EXACT == 0
