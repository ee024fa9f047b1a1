"""Scoring kernel of :func:`fmlearn.recommend`: every user of a batch against every item.

    score[a, b] = bias + part_user[a] + part_item[b] + <query_user[a], key_item[b]>

Each score's inner product is summed over the factors in one fixed order (f = 0, 1, ..., r-1,
starting from 0.0, then added to ``(bias + part_user[a]) + part_item[b]``), so a user's scores do
not depend on the batch it falls in, on the number of threads or on BLAS blocking, and two
identical item rows get bitwise identical scores (exact ties, broken by index by the caller).

The order of the loops is what makes it faster without changing a bit: the items of a user are
innermost (``row[b] += query[a, f] * keyT[f, b]`` for the items side by side, each still its
own sum in the order f = 0, 1, ...), where the former kernel ran one chain of dependent
additions per (user, item) pair. Measured against the other bit-identical order (8 users of a
block as SIMD lanes), alternated 5 times on one machine: 943 x 1,682 pairs at r = 720 (an MCMC
model) 0.22 against 0.35 CPU s, at r = 32 0.008 against 0.013. For an MCMC model the inner
product has ``n_kept_samples * n_factors`` terms (the posterior mean as one product), which
is where this matters (benchmarks/bench_serving.py, docs/serving.md); the results are
bit-identical to the former kernel (tested against a NumPy oracle of the same order in
tests/kernels/test_topk.py).
"""

import numpy as np
from numba import prange

from ._jit import njit


@njit(cache=True, nogil=True, parallel=True)
def pair_scores(query, key, part_user, part_item, bias, out):
    """Fill ``out`` (n_users, n_items) with the decomposed FM scores (float64 arrays).

    Each score is accumulated over the factors f = 0, 1, ... in turn, as a plain dot product
    would be, but the loop over the items is innermost (on the transposed keys): every item
    of a user advances by one factor at a time, a loop without a chain of dependent additions
    that the compiler vectorises, instead of one such chain per pair (measured 2x faster on
    MovieLens-100K's 943 x 1,682 pairs at r = 32, one thread; the scores are bitwise the
    same, since every sum is taken in the same order).
    """
    n, m = out.shape
    r = query.shape[1]
    keyT = np.empty((r, m))
    for f in range(r):
        for b in range(m):
            keyT[f, b] = key[b, f]
    for a in prange(n):
        row = out[a]
        for b in range(m):
            row[b] = 0.0
        for f in range(r):
            qa = query[a, f]
            kf = keyT[f]
            for b in range(m):
                row[b] += qa * kf[b]
        pa = bias + part_user[a]
        for b in range(m):
            row[b] = pa + part_item[b] + row[b]



#: Largest k for :func:`top_k_rows` (a sorted buffer of k entries per row; each insertion
#: shifts at most k of them). Larger k use NumPy's partition.
TOP_K_MAX = 128


@njit(cache=True, nogil=True, parallel=True)
def top_k_rows(scores, k, indices, top):
    """The k best entries of every row, best first, equal scores by the smaller column; -inf
    entries are never taken (their slots keep index -1 and score -inf).

    One pass per row keeping a sorted buffer of the k best so far: an entry is compared with
    the buffer's last (the usual case, no insertion) and inserted behind every equal score
    (scanning columns in increasing order, a tie keeps the earlier column first). Replaces
    ``np.argpartition`` plus tie masks, whose passes over the (rows, items) matrix cost more
    than the scoring itself (MovieLens-100K, 943 x 1,682, k = 10).
    """
    n, m = scores.shape
    for a in prange(n):
        idx = indices[a]
        val = top[a]
        for t in range(k):
            idx[t] = -1
            val[t] = -np.inf
        filled = 0
        for b in range(m):
            s = scores[a, b]
            if s == -np.inf:
                continue
            if filled == k:
                if not s > val[k - 1]:
                    continue
                t = k - 1
            else:
                t = filled
                filled += 1
            while t > 0 and val[t - 1] < s:
                val[t] = val[t - 1]
                idx[t] = idx[t - 1]
                t -= 1
            val[t] = s
            idx[t] = b
