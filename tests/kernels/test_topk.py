"""The scoring kernel of fmlearn.recommend (kernels.topk.pair_scores) against a NumPy oracle
that sums each inner product in the same order: bit-identical, whatever the batch or the
number of users per SIMD block."""

import numpy as np
import pytest

from fmlearn.kernels.topk import pair_scores

USERS = 8  # sizes around a multiple of a SIMD register of float64


def oracle(query, key, part_user, part_item, bias):
    """score[a, b] = ((bias + part_user[a]) + part_item[b]) + s[a, b], s summed from 0.0 over
    the factors in order (elementwise NumPy: one rounding per product and per sum)."""
    s = np.zeros((query.shape[0], key.shape[0]))
    for f in range(query.shape[1]):
        s = s + np.multiply.outer(query[:, f], key[:, f])
    return (bias + part_user)[:, None] + part_item[None, :] + s


@pytest.mark.parametrize("n_users, n_items, r", [(1, 1, 1), (USERS + 3, 37, 5),
                                                 (3 * USERS, 20, 72), (5, 9, 0)])
def test_pair_scores_equal_the_ordered_oracle_bit_for_bit(n_users, n_items, r):
    rng = np.random.default_rng(n_users + r)
    query, key = rng.normal(size=(n_users, r)), rng.normal(size=(n_items, r))
    part_user, part_item = rng.normal(size=n_users), rng.normal(size=n_items)
    out = np.empty((n_users, n_items))
    pair_scores(query, key, part_user, part_item, 0.25, out)
    np.testing.assert_array_equal(out, oracle(query, key, part_user, part_item, 0.25))
    # a user's scores do not depend on the batch it is scored in
    part = np.empty((1, n_items))
    pair_scores(query[-1:], key, part_user[-1:], part_item, 0.25, part)
    np.testing.assert_array_equal(part[0], out[-1])


def test_identical_items_tie_exactly():
    rng = np.random.default_rng(0)
    key = rng.normal(size=(4, 16))
    key[3] = key[1]
    out = np.empty((11, 4))
    pair_scores(rng.normal(size=(11, 16)), key, np.zeros(11), np.array([0.0, 1.0, 2.0, 1.0]),
                0.0, out)
    np.testing.assert_array_equal(out[:, 1], out[:, 3])
