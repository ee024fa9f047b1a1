"""How a fit asks the operating system for memory.

:func:`small_pages` stops NumPy from advising transparent huge pages for the arrays allocated
inside it. NumPy calls ``madvise(MADV_HUGEPAGE)`` on every allocation of 4 MiB or more; with
the kernel's ``transparent_hugepage/defrag`` set to ``madvise`` (a common default), the first
touch of such an array then waits while the kernel finds, compacts and zeroes 2 MiB pages.
On the virtual machines this library is benchmarked on (Firecracker guests, 2 cores) that
made the first touch of a fresh 64 MB array in a fit cost 0.14 s instead of 0.03 s, and the
set-up of an ALS fit at 8,000,000 rows (its transient index arrays, each touched once or
twice) ~0.2-0.3 CPU s more. :func:`empty_for_sweeps` keeps the advice for the one array the
sweeps read and write in random order, the row state: huge pages spare the sweeps' TLB
misses there. ``benchmarks/bench_row_state_pages.py`` (3 alternated fresh processes, quiet
machine): per ALS sweep 0.529 against 0.573 CPU s at 8,000,000 rows, 0.128 against 0.141 at
2,000,000 (MCMC 0.131 against 0.142); the first fit's set-up at 8,000,000 rows 1.16 against
0.87 CPU s (the first touch of 192 MB of huge pages, which varies with the machine's free
memory), a later fit's 0.74 against 0.87: the huge pages pay for themselves from about the
seventh sweep of a process's first fit.
"""

import contextlib
import threading

try:  # NumPy >= 2
    from numpy._core import multiarray as _multiarray
except ImportError:  # pragma: no cover - NumPy 1.x
    from numpy.core import multiarray as _multiarray

_SET = getattr(_multiarray, "_set_madvise_hugepage", None)
_LOCK = threading.Lock()
_depth = 0
_saved = None


@contextlib.contextmanager
def small_pages():
    """Within the block, NumPy's large allocations get no huge-page advice (the system's
    default pages); the previous setting comes back when the last of nested or concurrent
    blocks ends. Nothing changes where NumPy offers no such switch. NumPy's switch is
    process-wide: arrays other threads allocate while a fit runs get no advice either (a
    matter of speed only, never of results)."""
    global _depth, _saved
    if _SET is None:  # pragma: no cover - a NumPy without the switch
        yield
        return
    with _LOCK:
        if _depth == 0:
            _saved = bool(_SET(False))
        _depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                _SET(_saved)


def empty_for_sweeps(shape, dtype):
    """``numpy.empty(shape, dtype)`` with NumPy's huge-page advice as it is outside
    :func:`small_pages` (for an array every sweep reads and writes in random order)."""
    import numpy as np

    if _SET is None:  # pragma: no cover - a NumPy without the switch
        return np.empty(shape, dtype=dtype)
    with _LOCK:
        if _depth == 0:
            return np.empty(shape, dtype=dtype)
        _SET(_saved)
        try:
            return np.empty(shape, dtype=dtype)
        finally:
            _SET(False)
