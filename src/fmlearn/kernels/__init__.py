"""Compiled primitives on raw arrays and named records (the repository's ``ARCHITECTURE.md``,
"Kernels": records, caching, sharing code between kernels), and :func:`compile_for`."""

from numba import typeof


def compile_for(kernel, *args):
    """Compile ``kernel`` (a numba dispatcher) for the types of ``args``, or load that
    specialisation from numba's cache, without running it.

    Solvers call this before their first iteration so that the time of that iteration (an
    estimator's ``history_["iter_time"][0]``) never includes compilation. Costs microseconds
    once the specialisation exists.
    """
    kernel.compile(tuple(typeof(a) for a in args))
