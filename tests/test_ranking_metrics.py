"""fmlearn.metrics' ranking metrics against a brute-force oracle written from the definitions
(loops over users and ranks, ties broken by the smaller item index), scikit-learn's
roc_auc_score for the per-user AUC, top-k lists against score matrices, and bad input."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import roc_auc_score

from fmlearn import recommend
from fmlearn.metrics import (
    map_at_k,
    ndcg_at_k,
    precision_at_k,
    ranking_auc,
    ranking_metrics,
    recall_at_k,
)
from fmlearn.recommender import Recommendations


def _oracle(S, test, train, k):
    """Per evaluated user: precision, recall, NDCG, AP, AUC, from the definitions."""
    out = {m: [] for m in ("precision", "recall", "ndcg", "map", "auc")}
    n_users, n_items = S.shape
    for u in range(n_users):
        tr = set(np.flatnonzero(train[u])) if train is not None else set()
        held = set(np.flatnonzero(test[u])) - tr
        if not held:
            continue
        cand = [i for i in range(n_items) if i not in tr]
        ranked = sorted(cand, key=lambda i: (-S[u, i], i))[:k]
        hits = [1.0 if i in held else 0.0 for i in ranked] + [0.0] * (k - len(ranked))
        out["precision"].append(sum(hits) / k)
        out["recall"].append(sum(hits) / len(held))
        dcg = sum(h / np.log2(r + 2) for r, h in enumerate(hits))
        idcg = sum(1 / np.log2(r + 2) for r in range(min(k, len(held))))
        out["ndcg"].append(dcg / idcg)
        ap = sum(h * sum(hits[:r + 1]) / (r + 1) for r, h in enumerate(hits))
        out["map"].append(ap / min(k, len(held)))
        neg = [i for i in cand if i not in held]
        if neg:
            pos_s = [S[u, i] for i in held]
            neg_s = [S[u, i] for i in neg]
            wins = sum((p > n) + 0.5 * (p == n) for p in pos_s for n in neg_s)
            out["auc"].append(wins / (len(pos_s) * len(neg_s)))
    return {m: float(np.mean(v)) for m, v in out.items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 3, 7])
def test_metrics_equal_the_brute_force_oracle(seed, k):
    rng = np.random.default_rng(seed)
    n_users, n_items = 12, 9
    S = rng.integers(0, 4, (n_users, n_items)).astype(float)  # many ties
    train = rng.random((n_users, n_items)) < 0.25
    test = (rng.random((n_users, n_items)) < 0.3)
    test[0] = train[0]  # a user whose held-out pairs are all training positives: not held out
    train[1] = True  # a user with no candidate
    got = ranking_metrics(S, sp.csr_matrix(test), train=sp.csr_matrix(train), k=k)
    want = _oracle(S, test, train, k)
    for m, v in want.items():
        assert got[m] == pytest.approx(v, rel=1e-12), m
    assert precision_at_k(S, test, train=train, k=k) == pytest.approx(want["precision"])
    assert recall_at_k(S, test, train=train, k=k) == pytest.approx(want["recall"])
    assert ndcg_at_k(S, test, train=train, k=k) == pytest.approx(want["ndcg"])
    assert map_at_k(S, test, train=train, k=k) == pytest.approx(want["map"])
    assert ranking_auc(S, test, train=train) == pytest.approx(want["auc"])


def test_auc_per_user_equals_scikit_learn():
    rng = np.random.default_rng(3)
    S = rng.normal(size=(6, 20))
    test = rng.random((6, 20)) < 0.3
    train = (rng.random((6, 20)) < 0.2) & ~test
    per = ranking_metrics(S, test, train=train, k=5, per_user=True)
    for t, u in enumerate(per["users"]):
        cand = ~train[u]
        assert per["auc"][t] == pytest.approx(roc_auc_score(test[u, cand], S[u, cand]))


def test_top_lists_give_the_same_metrics_as_scores():
    rng = np.random.default_rng(4)
    S = rng.normal(size=(10, 15))
    test = sp.csr_matrix(rng.random((10, 15)) < 0.3)
    train = sp.csr_matrix((rng.random((10, 15)) < 0.2) & ~test.toarray())
    from fmlearn._ranking_metrics import top_k_items

    top = Recommendations(top_k_items(S, 5, train), np.zeros((10, 5)))
    a = ranking_metrics(S, test, train=train, k=5)
    b = ranking_metrics(top, test, k=5)
    for m in ("precision", "recall", "ndcg", "map"):
        assert a[m] == b[m]
    assert b["auc"] is None
    with pytest.raises(ValueError, match="every item's score"):
        ranking_auc(top, test)


def test_metrics_of_recommend_on_a_factorization_machine():
    from fmlearn.ranking import FMRanker, Interactions

    rng = np.random.default_rng(5)
    data = Interactions(rng.integers(8, size=80), rng.integers(12, size=80), n_users=8,
                        n_items=12)
    model = FMRanker(n_factors=2, n_iter=2, random_state=0).fit(data)
    users, items = data.user_rows(), data.item_rows()
    S = np.array([model.predict(sp.vstack([users[u]] * 12) + items) for u in range(8)])
    test = sp.csr_matrix(rng.random((8, 12)) < 0.3)
    test = test - test.multiply(data.matrix().astype(bool))
    top = recommend(model, users, items, k=4, exclude=data.matrix())
    assert ranking_metrics(top, test, k=4)["precision"] == pytest.approx(
        ranking_metrics(S, test, train=data.matrix(), k=4)["precision"])


@pytest.mark.parametrize("call, match", [
    (lambda S, T: ranking_metrics(S, T, k=10), "exceeds the number of items"),
    (lambda S, T: ranking_metrics(S, T, k=0), "positive integer"),
    (lambda S, T: ranking_metrics(S[:, :3], T, k=2), "shape"),
    (lambda S, T: ranking_metrics(np.where(S > 0, np.nan, S), T, k=2), "NaN"),
    (lambda S, T: ranking_metrics(S, T, train=np.ones((2, 2)), k=2), "train has shape"),
    (lambda S, T: ranking_metrics(S.ravel(), T, k=2), "2-D"),
])
def test_bad_metric_input(call, match):
    S = np.random.default_rng(6).normal(size=(4, 5))
    T = sp.csr_matrix(np.eye(4, 5))
    with pytest.raises(ValueError, match=match):
        call(S, T)
