"""``kernels._prefetch.prefetch``: a hint that changes nothing, also past the array's end, and
that compiles to the CPU's prefetch instruction."""

import numpy as np
from numba import njit, uint64

from fmlearn.kernels._prefetch import prefetch


@njit
def _summed(a, ahead):
    s = 0.0
    for i in range(a.shape[0]):
        prefetch(a, uint64(i) + ahead)  # past the end near the last entries
        s += a[i]
    return s


def test_prefetch_changes_nothing_and_is_emitted():
    for a in (np.arange(5000.0) / 3, np.linspace(0, 1, 777).astype(np.float32)):
        assert _summed(a, uint64(64)) == sum(float(v) for v in a)  # the same sequential sum
        asm = _summed.inspect_asm(_summed.signatures[-1])
        assert "prefetch" in asm or "prfm" in asm  # x86, arm64
