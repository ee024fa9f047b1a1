"""One thread policy for the whole package: what ``n_jobs`` means and how BLAS is held to one
thread where the package runs its own parallelism.

``n_jobs`` (every estimator that has it): ``None`` or ``-1`` use every CPU numba may use
(``NUMBA_NUM_THREADS``, by default the machine's CPU count); a positive ``n`` uses
``min(n, that)``. Results never depend on it: the compiled kernels cut their work into pieces
fixed by the data (colour classes, row blocks, row chunks), never by the thread count.
"""

import contextlib
import os

_BLAS_CONTROLLER = []


def max_threads():
    """The most threads the package may use: numba's ``NUMBA_NUM_THREADS`` (read without
    importing numba, which is slow to import), else the CPU count."""
    env = os.environ.get("NUMBA_NUM_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    return os.cpu_count() or 1


def resolve_n_jobs(n_jobs):
    """The number of threads ``n_jobs`` stands for (see the module docstring)."""
    most = max_threads()
    if n_jobs is None or n_jobs < 0:
        return most
    return max(1, min(int(n_jobs), most))


@contextlib.contextmanager
def n_threads(n_jobs):
    """Run numba's parallel loops on ``resolve_n_jobs(n_jobs)`` threads inside the block."""
    import numba

    old = numba.get_num_threads()
    numba.set_num_threads(min(resolve_n_jobs(n_jobs), numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(old)


def blas_single_thread():
    """A context holding BLAS/LAPACK to one thread.

    Used where the package is the parallel unit (row chunks on a thread pool, whose fixed
    summation order keeps results independent of the thread count) and where LAPACK runs on
    small matrices every round (online learners), where BLAS threads only add synchronisation
    (10x slower measured on 2 busy cores).
    """
    if not _BLAS_CONTROLLER:
        from threadpoolctl import ThreadpoolController

        _BLAS_CONTROLLER.append(ThreadpoolController())
    return _BLAS_CONTROLLER[0].limit(limits=1, user_api="blas")


def single_thread():
    """A context holding every native thread pool (BLAS and OpenMP) to one thread.

    For small problems solved many times in a row, such as scikit-learn's K-means on one 60 s
    window of pierce points (~10^4 points in 2-D): there OpenMP threads cost more than they
    give (0.07 s on one thread against 0.6-0.9 s on two busy cores, measured).
    """
    if not _BLAS_CONTROLLER:
        from threadpoolctl import ThreadpoolController

        _BLAS_CONTROLLER.append(ThreadpoolController())
    return _BLAS_CONTROLLER[0].limit(limits=1)
