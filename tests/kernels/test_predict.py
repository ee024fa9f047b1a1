"""The prediction kernels' per-row arithmetic: the two-entry row (``_pair``, the row state of
one-hot user x item fields) against ``_row`` and a NumPy oracle."""

import numpy as np
import pytest

from fmlearn.kernels.predict import _pair, _row


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pair_is_row_of_two_entries_bit_for_bit(dtype):
    rng = np.random.default_rng(0)
    d, k = 6, 5
    V = rng.standard_normal((d, k)).astype(dtype)
    V[1, 2] = -0.0  # a signed zero in a factor sum
    w = rng.standard_normal(d).astype(dtype)
    q, qq = np.empty(k), np.empty(k)
    ptr = np.array([0, 2])
    for a, b in [(0, 3), (3, 0), (1, 4), (2, 2)]:
        for x in (1.0, 2.5):
            x = dtype(x)
            got = _pair(0.25, w, V, a, b, x, np.full(k + 1, np.nan))
            want = _row(ptr, np.array([a, b]), np.array([x, x]), 0, 0.25, w, V, q, qq)
            assert got == want and np.signbit(got) == np.signbit(want), (a, b, x)
            if a == b:  # not a canonical row: the oracle's x_a would be the entries' sum
                continue
            xs = np.zeros(d)
            xs[[a, b]] = x
            Vd, wd = V.astype(np.float64), w.astype(np.float64)
            oracle = 0.25 + xs @ wd + 0.5 * (np.sum((xs @ Vd) ** 2)
                                             - (xs ** 2) @ np.sum(Vd ** 2, 1))
            assert got == pytest.approx(oracle, rel=1e-5 if dtype == np.float32 else 1e-12,
                                        abs=1e-5 if dtype == np.float32 else 1e-12)
