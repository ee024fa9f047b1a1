"""Small dense products of the eigen-solvers and of the low-rank C, as plain loops.

The convex learners work on blocks of a few dozen rows and columns (the tracked subspace, the
core K of C, the Lanczos basis of a dense H). These loops sum in one fixed order, so their
results do not depend on the BLAS build or on its threads, and each is written once here for
:mod:`.eigtrack`, :mod:`.lanczos` and :mod:`.lowrank`.
"""

from ._jit import njit


@njit(cache=True, nogil=True)
def dot(x, y, n):
    """sum_{i < n} x[i] y[i]."""
    s = 0.0
    for i in range(n):
        s += x[i] * y[i]
    return s


@njit(cache=True, nogil=True)
def matvec(A, x, n, out):
    """out[:n] = A[:n, :n] x[:n]."""
    for j in range(n):
        out[j] = dot(A[j], x, n)


@njit(cache=True, nogil=True)
def combine_rows(Q, cols, n_in, old, m, new):
    """new[k, :m] += sum_{a < n_in} Q[a, cols[k]] old[a, :m] for every row k of ``new``: the
    rows of ``old`` rotated by the columns ``cols`` of Q (zero coefficients skipped)."""
    for k in range(new.shape[0]):
        col = cols[k]
        for a in range(n_in):
            c = Q[a, col]
            if c != 0.0:
                for j in range(m):
                    new[k, j] += c * old[a, j]
