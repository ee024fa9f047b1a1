"""``njit`` for fmlearn's kernels: numba's ``njit`` whose ``cache=True`` loads compiled kernels
from numba's on-disk cache without first building numba's whole CPU target.

numba's own cache (``numba.core.caching.FunctionCache``) calls ``target_context.refresh()``
before every load. The first refresh of a process imports and registers every typing and
lowering implementation numba has (strings, sets, typed dicts and lists, jitclass, the NumPy
random generators, polynomials, ...: about 1,000 ``@overload`` templates and 30,000 Python
objects). A kernel read from the cache needs none of it: its machine code, its environment and
the modules that environment names (which the load imports itself) are all in the cache file;
what it does need is numba's runtime (NRT), which the load below initialises. Anything that
compiles (a cache miss, a new signature, the user's own ``@njit`` functions) goes through
numba's compiler, which refreshes the context itself, so nothing is skipped for good.

The compiled code and the results are the same; only the first load of a fresh process is
cheaper: ``benchmarks/bench_fresh_process.py --detail`` lists the loads of a first small fit.
The cut, measured side by side on a quiet machine (``benchmarks/bench_fresh_process.py --reps 5
--compare OLD/src``: fresh processes, alternated with the code before it): ``from fmlearn
import FMRegressor`` plus the default fit on 100 rows 1.85 (1.79-1.87) against 1.98
(1.92-2.20) CPU s; 30,000 fewer objects for the garbage collector to walk in the fit and at
interpreter exit (benchmarks/RESULTS.md, "Stop 33").
"""

import numba
from numba.core.caching import FunctionCache
from numba.core.dispatcher import Dispatcher

__all__ = ["njit"]


# numba releases whose ``Cache.load_overload`` is the refresh followed by the guarded
# ``_load_overload`` this class repeats (checked up to 0.68); a later numba gets its own load.
_LIGHT_LOAD = tuple(int(p) for p in numba.__version__.split(".")[:2] if p.isdigit()) < (0, 69)


class _KernelCache(FunctionCache):
    """numba's ``FunctionCache`` minus the context refresh before a load (see the module's
    docstring); falls back to numba's own load on a numba release not checked against
    (``_LIGHT_LOAD``) or whose internals are not the expected ones."""

    def load_overload(self, sig, target_context):
        if not _LIGHT_LOAD:
            return super().load_overload(sig, target_context)
        try:
            from numba.core.runtime import rtsys

            guard = self._guard_against_spurious_io_errors
            load = self._load_overload
        except (ImportError, AttributeError):  # another numba: its own, complete load
            return super().load_overload(sig, target_context)
        rtsys.initialize(target_context)  # what the refresh starts with: the NRT
        with guard():
            return load(sig, target_context)
        return None  # the guard swallowed an I/O error: compile, as numba does


def njit(*args, **options):
    """``numba.njit`` with the same arguments; ``cache=True`` caches through
    :class:`_KernelCache`. Explicit signatures (compiled at decoration) keep numba's cache."""
    if not options.get("cache") or (args and not callable(args[0])):
        return numba.njit(*args, **options)
    options = dict(options, cache=False)

    def decorate(func):
        disp = numba.njit(**options)(func)
        if isinstance(disp, Dispatcher):  # not the plain function of NUMBA_DISABLE_JIT=1
            disp._cache = _KernelCache(disp.py_func)  # what Dispatcher.enable_caching does
        return disp

    return decorate(args[0]) if args else decorate
