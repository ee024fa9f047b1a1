"""Scoring kernel of :func:`fmlearn.recommend`: every user of a batch against every item.

    score[a, b] = bias + part_user[a] + part_item[b] + <query_user[a], key_item[b]>

Each score's inner product is summed over the factors in one fixed order (f = 0, 1, ..., r-1,
starting from 0.0, then added to ``(bias + part_user[a]) + part_item[b]``), so a user's scores do
not depend on the batch it falls in, on the number of threads or on BLAS blocking, and two
identical item rows get bitwise identical scores (exact ties, broken by index by the caller).

The order of the loops is what makes it faster without changing a bit: ``USERS`` users of a
block are SIMD lanes (``acc[u] += query[a0 + u, f] * key[b, f]`` for the users side by side,
each lane still one user's own sum in the order f = 0, 1, ...), where the former kernel ran one
chain of dependent additions per (user, item) pair. For an MCMC model the inner product has
``n_kept_samples * n_factors`` terms (the posterior mean as one product), which is where this
matters (benchmarks/bench_serving.py, docs/serving.md); the results are bit-identical to the
former kernel (tested against a NumPy oracle of the same order in tests/kernels/test_topk.py).
"""

import numpy as np
from numba import njit, prange

#: Users per block: the SIMD lanes of the accumulation (8 float64 = one AVX-512 register).
USERS = 8


@njit(cache=True, nogil=True, parallel=True)
def pair_scores(query, key, part_user, part_item, bias, out):
    """Fill ``out`` (n_users, n_items) with the decomposed FM scores (float64 arrays; ``query``
    (n_users, r), ``key`` (n_items, r))."""
    n, m = out.shape
    r = query.shape[1]
    query_t = np.ascontiguousarray(query.T)  # (r, n_users): a factor's users side by side
    for blk in prange((n + USERS - 1) // USERS):
        a0 = blk * USERS
        nu = min(n, a0 + USERS) - a0
        acc = np.empty(USERS)
        for b in range(m):
            for u in range(USERS):
                acc[u] = 0.0
            for f in range(r):
                kb = key[b, f]
                for u in range(USERS):  # lanes past the last user repeat it (not written)
                    acc[u] += query_t[f, min(a0 + u, n - 1)] * kb
            pb = part_item[b]
            for u in range(nu):
                out[a0 + u, b] = bias + part_user[a0 + u] + pb + acc[u]
