"""FFMClassifier / FFMRegressor (fmlearn.ffm): a planted field-aware model recovered better
than by the classic FM, early stopping that keeps the best epoch, the carved-out validation
rows, determinism with threads and warm starts, partial_fit and fit_stream, field maps (from
fields=, TabularEncoder, libffm files), bad input refused without changing the model, safe
model files, recommendations."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.metrics import log_loss

import fmlearn
from fmlearn import FFMClassifier, FFMRegressor, FMClassifier
from fmlearn._early_stopping import validation_split
from fmlearn.datasets import make_ffm_ctr, save_libffm
from fmlearn.exceptions import DivergenceError, ModelFileError


@pytest.fixture(scope="module")
def ctr():
    """A planted field-aware click model: 4 fields of 20 values, k = 4 (the Bayes log-loss
    of the test rows 0.377, a constant model's 0.60)."""
    X, y, fields, model, p = make_ffm_ctr(24000, n_fields=4, n_values=20, n_factors=4,
                                          random_state=0)
    return X[:20000], y[:20000], X[20000:], y[20000:], p[20000:], fields


def _state(est):
    return [a.copy() for a in (est.state_factors_, est.state_linear_, est.state_bias_)]


def _same_state(est, state):
    for a, b in zip(_state(est), state, strict=True):
        np.testing.assert_array_equal(a, b)


def test_planted_field_aware_model_is_learned_better_than_by_fm(ctr):
    """On clicks drawn from a planted FFM, the FFM's held-out log-loss is well below the
    classic FM's at the same k (measured: 0.42 against 0.46-0.47 for FM's ALS, MCMC and SGD;
    the Bayes rate 0.377), and far below a constant model's."""
    X, y, Xt, yt, pt, fields = ctr
    ffm = FFMClassifier(fields=fields, n_iter=30, random_state=0).fit(X, y)
    fm = FMClassifier(n_factors=4, solver="als", n_iter=30, reg_linear=1.0, reg_pairwise=1.0,
                      random_state=0).fit(X, y)
    ll_ffm = log_loss(yt, ffm.predict_proba(Xt)[:, 1])
    ll_fm = log_loss(yt, fm.predict_proba(Xt)[:, 1])
    bayes = log_loss(yt, pt)
    assert ffm.early_stopping_ and ffm.best_iteration_ is not None  # 20,000 rows: "auto" on
    assert ll_ffm < ll_fm - 0.02, (ll_ffm, ll_fm)
    assert ll_ffm < bayes + 0.07, (ll_ffm, bayes)


def test_early_stopping_keeps_the_best_epoch(ctr):
    X, y, Xt, yt, _, fields = ctr
    clf = FFMClassifier(fields=fields, n_iter=25, n_iter_no_change=3, learning_rate=0.5,
                        random_state=0).fit(X[:6000], y[:6000], eval_set=(Xt, yt))
    val = clf.history_["val"]
    best = int(np.argmin(val))
    assert clf.best_iteration_ == best + 1 and clf.n_iter_ < 25  # stopped early
    assert clf.n_iter_ == best + 1 + 3 or clf.n_iter_ == 25
    # the model kept is the best epoch's: its validation log-loss is the minimum recorded
    assert log_loss(yt, clf.predict_proba(Xt)[:, 1]) == pytest.approx(val[best], rel=1e-9)
    assert clf.history_["metric"] == "log_loss" and len(clf.history_["train"]) == clf.n_iter_


def test_auc_scoring_keeps_the_epoch_of_the_best_auc(ctr):
    X, y, Xt, yt, _, fields = ctr
    from sklearn.metrics import roc_auc_score

    clf = FFMClassifier(fields=fields, n_iter=12, n_iter_no_change=2, scoring="roc_auc",
                        learning_rate=0.5, random_state=0).fit(X[:4000], y[:4000],
                                                                eval_set=(Xt, yt))
    val = clf.history_["val"]
    assert clf.history_["metric"] == "roc_auc" and clf.best_iteration_ == np.argmax(val) + 1
    assert roc_auc_score(yt, clf.decision_function(Xt)) == pytest.approx(max(val), rel=1e-12)


def test_carved_out_rows_are_the_stratified_split_and_are_not_trained_on(ctr):
    """early_stopping=True without an eval_set trains on the rows validation_split leaves and
    scores the others: the same model as a fit on those rows with the others as eval_set."""
    X, y, _, _, _, fields = ctr
    X, y = X[:3000], y[:3000]
    est = FFMClassifier(fields=fields, n_iter=6, early_stopping=True, random_state=3)
    a = clone(est).fit(X, y)
    seed = np.random.RandomState(3).randint(np.iinfo(np.int32).max)  # the plan's first seed
    train, val = validation_split(3000, 0.1, seed, np.where(y == 1, 1.0, -1.0))
    b = clone(est).fit(X[train], y[train], eval_set=(X[val], y[val]))
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert a.history_["val"] == b.history_["val"]


def test_callback_sees_the_history_and_can_stop(ctr):
    X, y, Xt, yt, _, fields = ctr
    seen = []

    def callback(epoch, history):
        seen.append((epoch, len(history["val"])))
        return epoch == 1

    clf = FFMClassifier(fields=fields, n_iter=10, early_stopping=False, random_state=0)
    clf.fit(X[:2000], y[:2000], eval_set=(Xt, yt), callback=callback)
    assert seen == [(0, 1), (1, 2)] and clf.n_iter_ == 2 and clf.best_iteration_ is None


def test_results_do_not_depend_on_threads(ctr):
    X, y, Xt, _, _, fields = ctr
    big = sp.vstack([Xt] * 15).tocsr()  # 60,000 rows: the parallel prediction
    out = []
    for n_jobs in (1, 2):
        clf = FFMClassifier(fields=fields, n_iter=3, random_state=0, n_jobs=n_jobs)
        out.append(clf.fit(X[:4000], y[:4000]).decision_function(big))
    np.testing.assert_array_equal(out[0], out[1])


def test_warm_start_five_plus_five_equals_ten(ctr):
    X, y, _, _, _, fields = ctr
    X, y = X[:3000], y[:3000]
    est = FFMClassifier(fields=fields, n_iter=5, early_stopping=False, warm_start=True,
                        random_state=1)
    est.fit(X, y).fit(X, y)
    ten = FFMClassifier(fields=fields, n_iter=10, early_stopping=False, random_state=1)
    ten.fit(X, y)
    assert est.t_ == 10
    np.testing.assert_array_equal(est.decision_function(X), ten.decision_function(X))


def test_fit_in_order_equals_partial_fit_and_fit_stream(ctr, tmp_path):
    """shuffle=False: fit is one epoch over the rows in order, as partial_fit; fit_stream
    from a libffm file gives the same batches to partial_fit."""
    X, y, _, _, _, fields = ctr
    X, y = X[:2000], y[:2000]
    params = dict(fields=fields, n_iter=1, early_stopping=False, shuffle=False,
                  init_stdev=0.3, random_state=0)
    a = FFMClassifier(**params).fit(X, y)
    b = FFMClassifier(**params).partial_fit(X, y)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    c = FFMClassifier(**params)
    for i in range(0, 2000, 500):
        c.partial_fit(X[i:i + 500], y[i:i + 500], classes=[0, 1])
    path = str(tmp_path / "train.ffm")
    save_libffm(X, y, fields, path)
    d = fmlearn.fit_stream(FFMClassifier(**params), path, batch_size=500)
    np.testing.assert_array_equal(c.decision_function(X), d.decision_function(X))
    assert d.stream_history_["rows"] == [2000]


def test_fit_stream_takes_the_field_map_from_the_file(ctr, tmp_path):
    X, y, _, _, _, fields = ctr
    path = str(tmp_path / "train.ffm.gz")
    save_libffm(X[:1000], y[:1000], fields, path)
    est = fmlearn.fit_stream(FFMClassifier(random_state=0, n_iter=1), path, classes=[0, 1])
    np.testing.assert_array_equal(est.fields_, fields[:est.n_features_in_])
    np.testing.assert_array_equal(est.fields, est.fields_)


def test_fields_from_tabular_encoder():
    from fmlearn.encoders import TabularEncoder

    rng = np.random.default_rng(0)
    rows = [{"user": f"u{u}", "ad": f"a{a}", "hour": float(h)}
            for u, a, h in zip(rng.integers(30, size=3000), rng.integers(10, size=3000),
                               rng.integers(24, size=3000), strict=True)]
    y = np.array([(int(r["user"][1:]) + int(r["ad"][1:])) % 2 for r in rows])
    enc = TabularEncoder(column_types={"hour": "categorical"})
    X = enc.fit_transform(rows)
    clf = FFMClassifier(fields=enc.groups_, n_iter=20, random_state=0).fit(X, y)
    assert clf.n_fields_ == 3 and (clf.predict(X) == y).mean() > 0.95


def test_scale_invariance_with_normalised_rows():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    clf = FFMClassifier(random_state=0).fit(X, y)
    for scale in (1e160, 1e-200):  # the norm is taken without overflow or underflow
        np.testing.assert_allclose(clf.decision_function(X * scale), clf.decision_function(X),
                                   rtol=1e-12, atol=1e-12)


def test_regressor_learns_an_interaction_and_clips():
    rng = np.random.default_rng(0)
    a, b = rng.integers(8, size=3000), rng.integers(8, size=3000)
    X = np.zeros((3000, 16))
    X[np.arange(3000), a] = 1
    X[np.arange(3000), 8 + b] = 1
    y = np.cos(a) * np.sin(b) + 3
    m = FFMRegressor(fields=[0] * 8 + [1] * 8, n_iter=30, random_state=0).fit(X, y)
    assert np.sqrt(np.mean((m.predict(X) - y) ** 2)) < 0.1 * y.std()
    assert m.y_range_ == [y.min(), y.max()]
    assert m.predict(np.zeros((1, 16)) + 50).max() <= y.max()


@pytest.mark.parametrize("fields, match", [
    ([0, 0, 1], "3 entries but X has 4 features"),
    ([0, 0, 2, 2], "field 1 has no feature"),
    ([0, -1, 1, 1], "must be >= 0"),
    ([0.5, 0, 1, 1], "integer field ids"),
    ([[0, 1], [1, 0]], "1-D array"),
])
def test_bad_field_maps_are_refused(fields, match):
    X = np.eye(4)
    with pytest.raises(ValueError, match=match):
        FFMClassifier(fields=fields).fit(X, [0, 1, 0, 1])


def test_one_field_per_feature_is_refused_on_wide_data():
    X = sp.random(10, 5000, density=0.01, format="csr", random_state=0)
    with pytest.raises(ValueError, match="fields=None gives each of the 5000 features"):
        FFMClassifier().fit(X, np.arange(10) % 2)


def test_labels_other_than_two_classes_are_refused():
    X = np.eye(6)
    with pytest.raises(ValueError, match="Only binary classification"):
        FFMClassifier().fit(X, [0, 1, 2, 0, 1, 2])
    with pytest.raises(ValueError, match="two classes"):
        FFMClassifier().fit(X, [1] * 6)


def test_failed_calls_change_nothing(ctr):
    X, y, _, _, _, fields = ctr
    clf = FFMClassifier(fields=fields, n_iter=2, random_state=0).fit(X[:1000], y[:1000])
    before, params = _state(clf), dict(vars(clf))
    bad = X[:100].toarray()
    bad[3, 2] = np.nan
    for call in (lambda: clf.fit(bad, y[:100]),
                 lambda: clf.partial_fit(bad, y[:100]),
                 lambda: clf.partial_fit(X[:100], np.full(100, 7)),  # an unknown label
                 lambda: clf.partial_fit(X[:100, :50], y[:100])):   # another width
        with pytest.raises(ValueError):
            call()
        _same_state(clf, before)
        assert set(vars(clf)) == set(params)


def test_diverging_partial_fit_restores_the_rows_it_touched():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6))
    y = X[:, 0] * X[:, 1]
    est = FFMRegressor(normalize_rows=False, learning_rate=0.05, random_state=0).fit(X, y)
    before = _state(est)
    with pytest.raises(DivergenceError, match="keeps its previous state"):
        est.partial_fit(X * 1e100, y)
    _same_state(est, before)


def test_partial_fit_one_row_at_a_time():
    rng = np.random.default_rng(0)
    X = sp.random(50, 12, density=0.4, format="csr", random_state=1)
    y = rng.integers(2, size=50)
    est = FFMClassifier(fields=np.arange(12) % 3, random_state=0, shuffle=False,
                        init_stdev=0.2, early_stopping=False, n_iter=1)
    one = clone(est)
    for i in range(50):
        one.partial_fit(X[i], y[i:i + 1], classes=[0, 1])
    whole = clone(est).fit(X, y)
    np.testing.assert_allclose(one.decision_function(X), whole.decision_function(X),
                               rtol=1e-12, atol=1e-12)
    assert one.t_ == 50


def test_save_load_round_trip_and_crafted_state_is_refused(ctr, tmp_path):
    import json
    import zipfile

    X, y, Xt, _, _, fields = ctr
    clf = FFMClassifier(fields=fields, n_iter=2, random_state=0).fit(X[:1000], y[:1000])
    path = str(tmp_path / "m.fmz")
    clf.save(path)
    loaded = fmlearn.load(path)
    np.testing.assert_array_equal(loaded.predict_proba(Xt), clf.predict_proba(Xt))
    loaded.partial_fit(X[:10], y[:10])  # the AdaGrad sums came back: learning goes on
    # a map that puts a feature in a field the model does not have, digests recomputed
    import fmlearn.io as fio

    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    meta = json.loads(members.pop(fio._META))
    bad = clf.fields_.copy()
    bad[0] = clf.n_fields_
    spec = meta["arrays"]["fields_"]
    members[spec["file"]] = fio._npy_bytes(bad)
    import hashlib

    spec["sha256"] = hashlib.sha256(members[spec["file"]]).hexdigest()
    meta["digest"] = fio.manifest_digest(meta)
    crafted = str(tmp_path / "crafted.fmz")
    with zipfile.ZipFile(crafted, "w") as zf:
        zf.writestr(fio._META, json.dumps(meta))
        for name, blob in members.items():
            zf.writestr(name, blob)
    with pytest.raises(ModelFileError, match="fields_"):
        fmlearn.load(crafted)


def test_recommend_scores_equal_predictions():
    """For an FFM without row normalisation the user x item scores are exact: one product of
    field-blocked embeddings (fmlearn.recommend)."""
    rng = np.random.default_rng(0)
    n_u, n_i, n = 15, 12, 3000
    u, i = rng.integers(n_u, size=n), rng.integers(n_i, size=n)
    X = sp.csr_matrix((np.ones(2 * n), (np.repeat(np.arange(n), 2),
                                        np.column_stack([u, n_u + i]).ravel())),
                      shape=(n, n_u + n_i))
    y = (np.sin(u) * np.cos(i) > 0).astype(int)
    fields = [0] * n_u + [1] * n_i
    for normalize in (False, True):
        m = FFMClassifier(fields=fields, normalize_rows=normalize, n_iter=5,
                          random_state=0).fit(X, y)
        top = fmlearn.recommend(m, [0, 3], None, k=n_i, user_block=(0, n_u),
                                item_block=(n_u, n_u + n_i))
        for r, user in enumerate((0, 3)):
            rows = sp.csr_matrix((np.ones(2 * n_i), (np.repeat(np.arange(n_i), 2),
                                                     np.column_stack([np.full(n_i, user),
                                                                      n_u + np.arange(n_i)])
                                                     .ravel())), shape=(n_i, n_u + n_i))
            want = m.decision_function(rows)
            np.testing.assert_allclose(top.scores[r], want[top.indices[r]], rtol=1e-10,
                                       atol=1e-10)


def test_verbose_progress_and_no_warnings(ctr, capsys):
    X, y, _, _, _, fields = ctr
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FFMClassifier(fields=fields, n_iter=2, verbose=1, random_state=0).fit(X[:500], y[:500])


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_fit_stream_resumes_from_each_checkpoint_of_a_libffm_file(ctr, tmp_path, suffix,
                                                                   monkeypatch):
    """fit_stream's checkpoints of a libffm file (byte offsets of its chunks, rows into
    them): resuming after any batch ends as the uninterrupted run, bit for bit."""
    import inspect
    import shutil

    def _same_model(a, b):
        va, vb = vars(a), vars(b)
        assert set(va) == set(vb)
        for key in va:
            if key in ("stream_history_", "_checked_params_token"):
                continue
            if isinstance(va[key], np.ndarray):
                np.testing.assert_array_equal(va[key], vb[key], err_msg=key)
            elif key not in ("fields",):
                assert va[key] == vb[key], key

    X, y, _, _, _, fields = ctr
    path = str(tmp_path / f"s.ffm{suffix}")
    save_libffm(X[:1500], y[:1500], fields, path)
    kw = dict(batch_size=200, chunk_size_bytes=9000, classes=[0, 1], n_epochs=2)
    params = dict(fields=fields, random_state=0)
    ref = fmlearn.fit_stream(FFMClassifier(**params), path, **kw)
    saved = []
    ck = tmp_path / "ck"
    original = inspect.getattr_static(FFMClassifier, "partial_fit")

    def copying(self, X, y, **k):
        if (ck / "checkpoint.fmz").exists():
            saved.append(tmp_path / f"copy{len(saved)}.fmz")
            shutil.copy(ck / "checkpoint.fmz", saved[-1])
        return original(self, X, y, **k)

    with monkeypatch.context() as mp:
        mp.setattr(FFMClassifier, "partial_fit", copying)
        fmlearn.fit_stream(FFMClassifier(**params), path, checkpoint=ck, checkpoint_every=1,
                           **kw)
    assert len(saved) == sum(ref.stream_history_["batches"]) - 1
    for copy in saved[::3]:
        shutil.copy(copy, ck / "checkpoint.fmz")
        m = fmlearn.fit_stream(FFMClassifier(**params), path, checkpoint=ck, **kw)
        _same_model(m, ref)
