"""kernels/eigtrack.py: the tracked subspace keeps S B' and B S B' exact through rank-one
changes of S, appends and restarts."""

import numpy as np

from fmlearn.kernels.eigtrack import append, gs_rank1, ritz, rotate, top_by_magnitude
from fmlearn.solvers._online_common import new_tracker


def test_products_follow_rank_one_updates_appends_and_restarts():
    rng = np.random.default_rng(0)
    D, m = 25, 6
    tr = new_tracker(D, m, 0)
    S = np.zeros((D, D))
    nb = 0
    cb = np.zeros(m)
    for _ in range(30):
        idx = np.sort(rng.choice(D, 4, replace=False)).astype(np.int64)
        val = rng.normal(size=4)
        coef = rng.normal()
        x = np.zeros(D)
        x[idx] = val
        S += coef * np.outer(x, x)
        gs_rank1(tr, nb, idx, val, 4, coef, True, D - 1, cb)
        if nb >= m:
            th, Y = ritz(tr.GS, tr.GS, nb, 1.0, 0.0)
            nb = rotate(tr, nb, 0, True, Y, top_by_magnitude(th, 3, 0), 3)
        v = x.copy()
        nb = append(tr, nb, 0, True, v, S @ x, np.zeros(1), np.zeros(m), False, np.zeros(m))
        B = tr.B[:nb]
        np.testing.assert_allclose(B @ B.T, np.eye(nb), atol=1e-10)
        np.testing.assert_allclose(tr.SB[:nb], B @ S, atol=1e-9)
        np.testing.assert_allclose(tr.GS[:nb, :nb], B @ S @ B.T, atol=1e-9)
