"""FMRanker: recovery on planted implicit feedback, the data paths (Interactions and event
rows) and their invariances, bad input, failure atomicity, warm start, persistence, and
fmlearn.recommend on a ranker."""

import numpy as np
import pytest
import scipy.sparse as sp

import fmlearn
from fmlearn import recommend
from fmlearn.datasets import make_implicit_feedback
from fmlearn.exceptions import DivergenceError, ModelFileError, NotFittedError
from fmlearn.metrics import ranking_metrics
from fmlearn.ranking import FMRanker, Interactions, evaluate_ranking, per_user_split


def _planted(seed, n_users=150, n_items=200, n_events=9000):
    d = make_implicit_feedback(n_users=n_users, n_items=n_items, n_events=n_events, rank=4,
                               sharpness=6.0, random_state=seed)
    data = Interactions(d.user_ids, d.item_ids, n_users=n_users, n_items=n_items)
    tr, te = per_user_split(data, 0.2, random_state=seed)
    return d, data.subset(tr), data.subset(te)


def _small(seed=0, n_users=20, n_items=15, n=200, **kw):
    rng = np.random.default_rng(seed)
    users = rng.integers(n_users, size=n)
    items = (users % 3) * 5 + rng.integers(5, size=n)
    return Interactions(users, items % n_items, n_users=n_users, n_items=n_items, **kw)


@pytest.mark.parametrize("params", [{"loss": "warp", "learning_rate": 0.1}, {"loss": "bpr"},
                                    {"loss": "squared"}])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_planted_preferences(params, seed):
    # Measured baselines on the same split: recommending the most popular items, and the
    # planted utility itself (the best any model can do on events sampled from it). Each
    # learner closes most of the gap: at least 60% of the oracle's precision@10 and twice
    # popularity's (measured 0.65-0.80 of the oracle, 2.1-4x popularity).
    d, train, test = _planted(seed)
    M, T = train.matrix(), test.matrix()
    oracle = ranking_metrics(d.utility, T, train=M, k=10)["precision"]
    pop = np.bincount(train.items, minlength=200) + 1e-6 * np.arange(200)[::-1]
    popular = ranking_metrics(np.tile(pop, (150, 1)), T, train=M, k=10)["precision"]
    model = FMRanker(n_factors=8, random_state=seed, **params).fit(train)
    got = evaluate_ranking(model, test, train=train)["precision"]
    assert got >= 0.6 * oracle
    assert got >= 2.0 * popular


def test_more_sweeps_never_raise_the_squared_loss():
    _, train, _ = _planted(0, n_events=3000)
    history = FMRanker(n_factors=4, loss="squared", n_iter=6, random_state=0,
                       verbose=0).fit(train, callback=lambda i, h: False).history_["loss"]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(history, history[1:], strict=False))


def test_interactions_and_event_rows_give_the_same_squared_loss_fit():
    # iCD is deterministic given the data; the two paths order the contexts differently,
    # which changes summation orders only
    data = _small(item_features=np.random.default_rng(1).random((15, 2)))
    a = FMRanker(n_factors=3, loss="squared", n_iter=4, random_state=0).fit(data)
    b = FMRanker(n_factors=3, loss="squared", n_iter=4, random_state=0,
                 item_columns=data.item_columns).fit(data.rows())
    X = data.rows()
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(a.item_columns_, np.arange(*data.item_columns))


@pytest.mark.parametrize("loss", ["warp", "bpr", "squared"])
def test_repeated_events_equal_weights_and_row_order_is_irrelevant(loss):
    data = _small(seed=2)
    X = data.rows()
    cols = data.item_columns
    params = dict(n_factors=3, loss=loss, n_iter=3, random_state=0, item_columns=cols)
    w = np.random.default_rng(0).integers(1, 4, X.shape[0])
    weighted = FMRanker(**params).fit(X, sample_weight=w)
    repeated = FMRanker(**params).fit(X[np.repeat(np.arange(X.shape[0]), w)])
    perm = np.random.default_rng(1).permutation(X.shape[0])
    shuffled = FMRanker(**params).fit(X[perm], sample_weight=w[perm])
    np.testing.assert_array_equal(weighted.V_, repeated.V_)
    np.testing.assert_array_equal(weighted.V_, shuffled.V_)
    # zero weights are dropped events
    w0 = w.copy()
    w0[:5] = 0
    a = FMRanker(**params).fit(X, sample_weight=w0)
    b = FMRanker(**params).fit(X[5:], sample_weight=w[5:])
    np.testing.assert_array_equal(a.V_, b.V_)


def test_same_random_state_same_model_whatever_n_jobs():
    data = _small(seed=3)
    a = FMRanker(n_factors=4, n_iter=3, random_state=7, n_jobs=1).fit(data)
    b = FMRanker(n_factors=4, n_iter=3, random_state=7, n_jobs=2).fit(data)
    np.testing.assert_array_equal(a.V_, b.V_)
    np.testing.assert_array_equal(a.predict(data), b.predict(data))


def test_warm_start_continues_icd():
    data = _small(seed=4)
    full = FMRanker(n_factors=3, loss="squared", n_iter=6, random_state=0).fit(data)
    half = FMRanker(n_factors=3, loss="squared", n_iter=3, random_state=0,
                    warm_start=True).fit(data).fit(data)
    np.testing.assert_allclose(half.V_, full.V_, rtol=1e-10, atol=1e-12)


def test_cold_items_are_scored_by_their_side_features():
    rng = np.random.default_rng(5)
    F = rng.random((15, 3))
    data = _small(seed=5, item_features=F)
    seen = np.unique(data.items)
    cold = np.setdiff1d(np.arange(15), data.items[data.items < 12])
    train = data.subset(data.items < 12)
    model = FMRanker(n_factors=3, n_iter=3, random_state=0).fit(train)
    ids = np.arange(*data.item_columns)[:15]
    # ids of items without a training event carry nothing: zero weight and factors
    assert np.all(model.w_[ids[cold]] == 0) and np.all(model.V_[ids[cold]] == 0)
    assert np.any(model.V_[ids[np.setdiff1d(seen, cold)]] != 0)
    rows = data.item_rows(cold)
    keep = np.ones(data.n_features)
    keep[ids] = 0.0
    side_only = sp.csr_matrix(rows @ sp.diags(keep))
    u = data.user_rows([0])
    np.testing.assert_array_equal(model.predict(u[[0] * len(cold)] + rows),
                                  model.predict(u[[0] * len(cold)] + side_only))


def test_recommend_on_a_ranker_is_the_exact_top_k():
    data = _small(seed=6, item_features=np.random.default_rng(0).random((15, 2)))
    model = FMRanker(n_factors=4, n_iter=5, random_state=0).fit(data)
    users, items = data.user_rows(), data.item_rows()
    seen = data.matrix()
    top = recommend(model, users, items, k=4, exclude=seen)
    for u in range(data.n_users):
        s = model.predict(sp.vstack([users[u]] * 15) + items)
        s[seen[u].indices] = -np.inf
        best = np.lexsort((np.arange(15), -s))[:4]
        best = np.where(np.isneginf(s[best]), -1, best)
        np.testing.assert_array_equal(top.indices[u], best)


def test_evaluate_ranking_equals_the_metrics_of_the_full_score_matrix():
    data = _small(seed=7)
    tr, te = per_user_split(data, 0.3, random_state=0)
    train, test = data.subset(tr), data.subset(te)
    model = FMRanker(n_factors=3, n_iter=3, random_state=0).fit(train)
    users, items = data.user_rows(), data.item_rows()
    S = np.array([model.predict(sp.vstack([users[u]] * 15) + items) for u in range(20)])
    want = ranking_metrics(S, test.matrix(), train=train.matrix(), k=5)
    got = evaluate_ranking(model, test, train=train, k=5, memory_budget_mb=1e-4)
    for name in ("precision", "recall", "ndcg", "map", "auc"):
        assert got[name] == pytest.approx(want[name], rel=1e-12)


def test_a_user_with_every_item_excluded_gets_no_recommendation():
    data = _small(seed=8)
    model = FMRanker(n_factors=3, n_iter=2, random_state=0).fit(data)
    top = recommend(model, data.user_rows([0]), data.item_rows(), k=3,
                    exclude=[list(range(15))])
    assert top.indices.tolist() == [[-1, -1, -1]] and np.all(np.isneginf(top.scores))
    # k above the number of items: every item, once
    top = recommend(model, data.user_rows([0]), data.item_rows(), k=40)
    assert sorted(top.indices[0].tolist()) == list(range(15))


def test_more_factors_than_items_still_fits():
    data = _small(seed=9, n_items=15)
    for loss in ("warp", "squared"):
        model = FMRanker(n_factors=40, loss=loss, n_iter=2, random_state=0).fit(data)
        assert np.all(np.isfinite(model.predict(data)))


@pytest.mark.parametrize("bad, match", [
    (lambda: Interactions([0, 5], [1, 2], n_users=3), "outside the declared n_users=3"),
    (lambda: Interactions([0, 1], [1, 9], n_items=4), "outside the declared n_items=4"),
    (lambda: Interactions([0, -1], [1, 2]), "negative id"),
    (lambda: Interactions([0, 1.5], [1, 2]), "integer ids"),
    (lambda: Interactions([0, 1], [1]), "differ in length"),
    (lambda: Interactions([0, 1], [1, 2], weights=[1.0, np.nan]), "NaN"),
    (lambda: Interactions([0, 1], [1, 2], weights=[1.0, -1.0]), "non-negative"),
    (lambda: Interactions([0, 1], [1, 2], n_users=2, user_features=np.ones((5, 2))),
     "rows, expected"),
    (lambda: Interactions([0, 1], [1, 2], item_features=[[np.inf], [1], [1]]), "NaN or inf"),
    (lambda: Interactions([0], [0], n_users=1, n_items=1, item_identity=False),
     "items have no feature"),
])
def test_bad_interactions_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        bad()


def test_bad_fits_raise_and_leave_the_model_unchanged():
    data = _small(seed=10)
    model = FMRanker(n_factors=3, n_iter=2, random_state=0).fit(data)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(model).items()}

    def same():
        assert set(vars(model)) == set(before)
        for k, v in before.items():
            if isinstance(v, np.ndarray):
                np.testing.assert_array_equal(getattr(model, k), v)

    X = data.rows()
    cases = [
        (lambda: model.fit(data, sample_weight=np.zeros(len(data))), ValueError,
         "nothing to fit"),
        (lambda: model.fit(Interactions([0], [0], n_users=2, n_items=2).subset([])), ValueError,
         "no event"),
        (lambda: model.fit(data, sample_weight=-np.ones(len(data))), ValueError,
         "non-negative"),
        (lambda: model.fit(X), ValueError, "item_columns"),
        (lambda: model.set_params(item_columns=(5, 2)).fit(X), ValueError, "start < stop"),
        (lambda: model.set_params(item_columns=[0, 0]).fit(X), ValueError, "twice"),
        (lambda: model.set_params(item_columns=None, loss="warp", solver="icd").fit(data),
         ValueError, "squared"),
        (lambda: model.set_params(solver="auto", loss="squared").set_params(
            solver="sgd").fit(data), ValueError, "icd"),
        (lambda: model.set_params(loss="bpr", solver="sgd", learning_rate=1e30,
                                  init_stdev=10.0).fit(data), DivergenceError, "diverged"),
    ]
    for call, exc, match in cases:
        with pytest.raises(exc, match=match):
            call()
        same()
    with pytest.warns(UserWarning, match="no negative item"):
        FMRanker(n_factors=2, n_iter=1).fit(Interactions([0, 0], [0, 1]))


def test_unfitted_and_wrong_width_prediction():
    with pytest.raises(NotFittedError):
        FMRanker().predict(np.zeros((1, 3)))
    data = _small(seed=11)
    model = FMRanker(n_factors=2, n_iter=1, random_state=0).fit(data)
    with pytest.raises(ValueError, match="features"):
        model.predict(np.zeros((1, data.n_features + 1)))
    other = _small(seed=11, n_users=21)
    with pytest.raises(ValueError, match="features"):
        model.predict(other)


def test_save_load_and_crafted_state(tmp_path):
    import json
    import zipfile

    data = _small(seed=12)
    model = FMRanker(n_factors=3, loss="squared", n_iter=2, random_state=0).fit(data)
    path = tmp_path / "ranker.fmz"
    model.save(path)
    loaded = fmlearn.load(path)
    np.testing.assert_array_equal(loaded.predict(data), model.predict(data))
    assert loaded.settings_ == model.settings_
    top_a = recommend(model, data.user_rows(), data.item_rows(), k=3)
    top_b = recommend(loaded, data.user_rows(), data.item_rows(), k=3)
    np.testing.assert_array_equal(top_a.indices, top_b.indices)

    from fmlearn.io import manifest_digest

    def tamper(edit):
        with zipfile.ZipFile(path) as zf:
            meta = json.loads(zf.read("fmlearn.json"))
            members = {n: zf.read(n) for n in zf.namelist() if n != "fmlearn.json"}
        edit(meta, members)
        meta["digest"] = manifest_digest(meta)
        bad = tmp_path / "bad.fmz"
        with zipfile.ZipFile(bad, "w", zipfile.ZIP_STORED) as zf:
            zf.writestr("fmlearn.json", json.dumps(meta))
            for n, b in members.items():
                zf.writestr(n, b)
        return bad

    def set_array(name, arr):
        import hashlib
        import io

        def edit(meta, members):
            buf = io.BytesIO()
            np.save(buf, arr)
            blob = buf.getvalue()
            members[meta["arrays"][name]["file"]] = blob
            meta["arrays"][name].update(shape=list(arr.shape), dtype=arr.dtype.str,
                                        sha256=hashlib.sha256(blob).hexdigest())
        return edit

    d = data.n_features
    for edit, match in [
        (set_array("item_columns_", np.array([0, d + 3])), "item_columns_"),
        (set_array("item_columns_", np.array([5, 2])), "item_columns_"),
        (set_array("V_", np.zeros((d, 2))), "do not match"),
        (lambda meta, members: meta["attributes"].update(settings_=[1]), "settings_"),
    ]:
        with pytest.raises(ModelFileError, match=match):
            fmlearn.load(tamper(edit))


def test_context_features_make_distinct_contexts():
    from fmlearn.ranking._data import summarize

    # a user seen in two situations is two contexts; the situation's factors are learned
    rng = np.random.default_rng(13)
    n = 300
    users = rng.integers(10, size=n)
    evening = rng.random(n) < 0.5
    items = np.where(evening, 5 + rng.integers(5, size=n), rng.integers(5, size=n))
    data = Interactions(users, items, n_users=10, n_items=10,
                        context=evening[:, None].astype(float))
    ed = summarize(data, None)
    assert ed.n_contexts == np.unique(users * 2 + evening).shape[0]
    model = FMRanker(n_factors=4, loss="squared", random_state=0).fit(data)
    night = sp.csr_matrix(([1.0], ([0], [data.context_columns[0]])), shape=(1, data.n_features))
    top_day = recommend(model, data.user_rows([0]), data.item_rows(), k=3)
    top_night = recommend(model, data.user_rows([0]), data.item_rows(), k=3, context=night)
    assert np.all(top_day.indices < 5) and np.all(top_night.indices >= 5)
