"""Scoring kernel of :func:`fmlearn.recommend`: every user of a batch against every item.

    score[a, b] = bias + part_user[a] + part_item[b] + <query_user[a], key_item[b]>

Each score is summed over the factors in one fixed order, so a user's scores do not depend on
the batch it falls in, on the number of threads or on BLAS blocking, and two identical item rows
get bitwise identical scores (exact ties, broken by index by the caller). Rows are independent:
the parallel loop gives results that do not depend on the thread count.
"""

from numba import njit, prange


@njit(cache=True, nogil=True, parallel=True)
def pair_scores(query, key, part_user, part_item, bias, out):
    """Fill ``out`` (n_users, n_items) with the decomposed FM scores (float64 arrays)."""
    n, m = out.shape
    r = query.shape[1]
    for a in prange(n):
        pa = bias + part_user[a]
        for b in range(m):
            s = 0.0
            for f in range(r):
                s += query[a, f] * key[b, f]
            out[a, b] = pa + part_item[b] + s
