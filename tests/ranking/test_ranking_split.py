"""The evaluation splits: per user, by time, by item; and the Interactions layout."""

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn.ranking import Interactions, cold_item_split, leave_last_out, per_user_split


def test_per_user_split_holds_out_the_rounded_share_of_each_user():
    rng = np.random.default_rng(0)
    users = rng.integers(30, size=500)
    train, test = per_user_split(users, 0.2, random_state=1)
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(500))
    counts = np.bincount(users, minlength=30)
    held = np.bincount(users[test], minlength=30)
    np.testing.assert_array_equal(held, np.minimum(np.floor(0.2 * counts + 0.5), counts - 1))
    again = per_user_split(users, 0.2, random_state=1)
    assert np.array_equal(again[1], test)
    assert not np.array_equal(per_user_split(users, 0.2, random_state=2)[1], test)


def test_leave_last_out_takes_each_users_latest_events():
    users = np.array([0, 0, 0, 1, 1, 2, 0])
    t = np.array([5, 9, 1, 3, 3, 8, 9])
    train, test = leave_last_out(users, t)
    # user 0: the latest time is 9 twice: the later position wins; user 1: a tie, later
    # position; user 2 has one event: kept for training
    assert test.tolist() == [4, 6]
    train, test = leave_last_out(users, t, n_test=2)
    assert test.tolist() == [1, 6]
    with pytest.raises(ValueError, match="one per event"):
        leave_last_out(users, t[:3])
    with pytest.raises(ValueError, match="finite"):
        leave_last_out(users, np.where(t > 5, np.nan, t).astype(float))


def test_cold_item_split_holds_out_whole_items():
    rng = np.random.default_rng(2)
    items = rng.integers(40, size=400)
    train, test, cold = cold_item_split(items, 0.2, random_state=0)
    assert cold.shape[0] == round(0.2 * np.unique(items).shape[0])
    assert set(items[test]) == set(cold) and not set(items[train]) & set(cold)
    with pytest.raises(ValueError, match="fraction"):
        cold_item_split(items, 1.5)


def test_interactions_layout_rows_and_matrix():
    data = Interactions([0, 2, 2], [1, 0, 1], n_users=3, n_items=2, weights=[1.0, 2.0, 3.0],
                        user_features=np.array([[1.0], [0.0], [2.0]]),
                        item_features=sp.csr_matrix([[0.0, 1.0], [1.0, 0.0]]),
                        context=np.array([[1.0], [0.0], [1.0]]))
    assert data.user_columns == (0, 4) and data.item_columns == (4, 8)
    assert data.context_columns == (8, 9) and data.n_features == 9
    X = data.rows().toarray()
    np.testing.assert_array_equal(X[1], [0, 0, 1, 2, 1, 0, 0, 1, 0])
    np.testing.assert_array_equal(data.matrix().toarray(), [[0, 1], [0, 0], [2, 3]])
    sub = data.subset([2])
    assert sub.users.tolist() == [2] and sub.n_users == 3 and sub.weights.tolist() == [3.0]
    m = Interactions.from_matrix(sp.csr_matrix([[0, 2.0], [1.0, 0]]))
    assert (m.users.tolist(), m.items.tolist(), m.weights.tolist()) == ([0, 1], [1, 0],
                                                                         [2.0, 1.0])
    with pytest.raises(TypeError, match="from the matrix"):
        Interactions.from_matrix(np.eye(2), n_users=2)
