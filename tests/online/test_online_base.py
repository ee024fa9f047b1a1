"""What every online estimator shares (fmlearn.online._base): fit equals partial_fit, sparse
equals dense, save/load, weights, labels, the live learner, failure atomicity, crafted model
files, the doctests and the CLI."""

import doctest
import os
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from online_cases import (
    ALL_LEARNERS,
    CLASSIFIERS,
    CRAFTED,
    ESTIMATORS,
    MUTATIONS,
    assert_same_dict,
    crafted,
    scores,
    snapshot_dict,
)
from sklearn.base import clone, is_classifier

from fmlearn import load
from fmlearn.datasets import make_ccfm_stream
from fmlearn.exceptions import DivergenceError
from fmlearn.online import ESTIMATORS as _BY_MODEL

CCFMRegressor, CCFMClassifier = _BY_MODEL["ccfm"]
OnlineFMRegressor, OnlineFMClassifier = _BY_MODEL["fm"]
OnlineCFMRegressor, OnlineCFMClassifier = _BY_MODEL["cfm"]


@pytest.mark.parametrize("est", ESTIMATORS, ids=repr)
def test_fit_without_shuffle_equals_partial_fit_batches(est, regression_data):
    X, y = regression_data()
    base = clone(est).set_params(shuffle=False, random_state=0)
    a = clone(base).fit(X, y)
    b = clone(base)
    for start in range(0, 400, 70):
        b.partial_fit(X[start:start + 70], y[start:start + 70])
    c = clone(base)
    for i in range(0, 40):  # single rows equal a batch of the same rows
        c.partial_fit(X[i:i + 1], y[i:i + 1])
    d = clone(base).partial_fit(X[:40], y[:40])
    np.testing.assert_allclose(scores(a, X), scores(b, X), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(scores(c, X), scores(d, X), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("est", ESTIMATORS + CLASSIFIERS, ids=repr)
def test_sparse_equals_dense_and_float32_close(est, regression_data):
    X, y = regression_data(seed=1)
    if is_classifier(est):
        y = np.where(y > 0, "pos", "neg")
    a = est.__class__(**est.get_params()).set_params(random_state=0).fit(X, y)
    b = est.__class__(**est.get_params()).set_params(random_state=0).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(scores(a, X), scores(b, X), atol=1e-10)
    # float32 rows hash differently, so the shuffled order differs: compare in given order
    a = est.__class__(**est.get_params()).set_params(shuffle=False, random_state=0).fit(X, y)
    c = est.__class__(**est.get_params()).set_params(shuffle=False, random_state=0).fit(
        X.astype(np.float32), y)
    np.testing.assert_allclose(scores(a, X), scores(c, X), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("est", ESTIMATORS + CLASSIFIERS, ids=repr)
def test_save_load_continues_learning_identically(est, tmp_path, regression_data):
    X, y = regression_data(seed=2)
    if is_classifier(est):
        y = np.where(y > 0, 1, -1)
    a = est.__class__(**est.get_params()).set_params(shuffle=False).fit(X[:200], y[:200])
    path = os.fspath(tmp_path / "m.fmz")
    a.save(path)
    b = load(path)
    np.testing.assert_array_equal(scores(a, X), scores(b, X))
    a.partial_fit(X[200:], y[200:])
    b.partial_fit(X[200:], y[200:])
    np.testing.assert_array_equal(scores(a, X), scores(b, X))
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(scores(a, X), scores(c, X))


@pytest.mark.parametrize("est", ESTIMATORS[:4] + ESTIMATORS[7:], ids=repr)
def test_weights_equal_repeated_rows(est, regression_data):
    X, y = regression_data(n=120, seed=3)
    w = np.random.default_rng(0).integers(0, 4, size=120)
    a = est.__class__(**est.get_params()).set_params(random_state=0).fit(X, y, sample_weight=w)
    Xr, yr = np.repeat(X, w, axis=0), np.repeat(y, w)
    perm = np.random.default_rng(1).permutation(Xr.shape[0])
    b = est.__class__(**est.get_params()).set_params(random_state=0).fit(Xr[perm], yr[perm])
    np.testing.assert_allclose(scores(a, X), scores(b, X), atol=1e-9)


@pytest.mark.parametrize("cls", [CCFMClassifier, OnlineFMClassifier, OnlineCFMClassifier])
def test_classifier_any_two_labels_and_probabilities(cls, regression_data):
    X, y = regression_data(seed=8)
    labels = np.where(y > 0, "up", "down")
    m = cls(standardize=False, random_state=0).fit(X, labels)
    assert set(m.predict(X)) <= {"up", "down"}
    P = m.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert np.array_equal(m.classes_, np.array(["down", "up"]))
    assert np.mean(m.predict(X) == labels) > 0.6
    part = cls(standardize=False, random_state=0).partial_fit(X[:1], labels[:1],
                                                        classes=["up", "down"])
    assert part.classes_.tolist() == ["down", "up"]


def test_learning_beats_the_mean_on_a_planted_stream():
    # a planted model without self-interactions, which every model family can represent
    X, y, _ = make_ccfm_stream(12000, 30, rank=2, trace_norm=4.0, density=0.2, noise=0.1,
                               self_interaction=False, random_state=14)
    for est in [CCFMRegressor(trace_bound=4.0, gamma_power=1.0),
                CCFMRegressor("ogd", trace_bound=4.0),
                CCFMRegressor("ftrl", trace_bound=4.0), OnlineFMRegressor(n_factors=4, n_iter=3),
                OnlineCFMRegressor(trace_bound=4.0, n_iter=3)]:
        est.set_params(random_state=0).fit(X[:10000], y[:10000])
        rmse = np.sqrt(np.mean((est.predict(X[10000:]) - y[10000:]) ** 2))
        assert rmse < 0.7 * y.std(), est


def test_doctests_of_the_online_modules():
    import fmlearn.datasets._synthetic_ccfm as synth
    import fmlearn.evaluate as evaluate
    import fmlearn.metrics as metrics
    import fmlearn.online.ccfm as ccfm
    import fmlearn.online.cfm as cfm
    import fmlearn.online.fm as fm

    for mod in (ccfm, fm, cfm, evaluate, metrics, synth):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, mod.__name__
        assert result.attempted > 0, mod.__name__


def test_cli_online_learns_saves_and_reports(tmp_path, capsys):
    from fmlearn.cli import main
    from fmlearn.datasets import save_svmlight

    X, y, _ = make_ccfm_stream(600, 8, rank=2, trace_norm=20.0, density=0.5,
                               task="classification", random_state=15)
    train, test = os.fspath(tmp_path / "train.svm"), os.fspath(tmp_path / "test.svm")
    save_svmlight(X[:500], y[:500], train)
    save_svmlight(X[500:], y[500:], test)
    model, curve = os.fspath(tmp_path / "m.fmz"), os.fspath(tmp_path / "c.tsv")
    rc = main(["online", train, "--model", "ccfm", "--learner", "ocg", "--loss", "logistic",
               "--trace-bound", "20", "--test", test, "--save", model, "--curve", curve,
               "--batch-size", "100", "--seed", "0", "--json"])
    assert rc == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["rounds"] == 500
    # the first call's compilation is reported on its own, not as learning time
    assert report["compiled kernels in"].endswith("s (not learning time)")
    assert report["rows per second"] > 0
    assert 0 <= report["prequential error_rate"] <= 1 and 0 <= report["test auc"] <= 1
    m = load(model)
    assert isinstance(m, CCFMClassifier) and m.n_rounds_ == 500
    rows = open(curve).read().splitlines()
    assert rows[0].split("\t") == ["rows", "seconds", "error_rate", "auc"] and len(rows) == 6
    assert main(["online", train, "--model", "fm", "--learner", "ocg"]) == 2
    assert "learners" in capsys.readouterr().err


@pytest.mark.parametrize("est", ALL_LEARNERS, ids=repr)
def test_one_row_calls_keep_the_live_learner_without_copying_its_state(est, regression_data):
    # the state attributes are the live learner's arrays: a partial_fit changes them in place
    # (no per-call copy of the O(d k) state), and a save finds them by name
    X, y = regression_data(n=60, seed=11, sparse=True)
    if is_classifier(est):
        y = np.where(y > 0, 1, -1)
    m = clone(est).set_params(shuffle=False)
    m.partial_fit(X[:20], y[:20])
    arrays = {k: v for k, v in vars(m).items() if k.startswith("state_") and v.size > 1}
    for i in range(20, 25):
        m.partial_fit(X[i:i + 1], y[i:i + 1])
    for k, v in arrays.items():
        if k in ("state_S_indptr_", "state_S_indices_", "state_S_data_"):
            continue  # the exact pattern of S grows when a row brings new feature pairs
        assert getattr(m, k) is v, k
    assert m.n_rounds_ == 25


@pytest.mark.parametrize("est", ALL_LEARNERS, ids=repr)
@pytest.mark.parametrize("failure", ["divergence", "bad_input", "interrupt"])
def test_a_failed_call_leaves_every_attribute_as_it_was(est, failure, monkeypatch, regression_data):
    X, y = regression_data(n=80, seed=12)
    if is_classifier(est):
        y = np.where(y > 0, 1, -1)
    m = clone(est).set_params(shuffle=False, random_state=0)
    m.partial_fit(X[:40], y[:40])
    before = snapshot_dict(m)
    pred = scores(m, X)
    if failure == "divergence":
        # a limit that a later row's prediction exceeds: the call learns some rows, then stops
        monkeypatch.setattr(type(m), "_limit", lambda self, yy: 1e-3)
        expected = DivergenceError
        Xb, yb = X[40:].copy(), y[40:]
        Xb[:3] = 0.0  # rows of zeros: predicted near 0 and learned before the stop
    elif failure == "bad_input":
        expected = ValueError
        Xb, yb = X[40:].copy(), y[40:]
        Xb[-1, 0] = np.nan
    else:
        from fmlearn.solvers._online_common import OnlineLearner

        real = OnlineLearner.learn
        calls = []

        def interrupted(self, *args, **kw):
            real(self, *args, **kw)  # the rows are learned, then Ctrl-C arrives
            calls.append(1)
            raise KeyboardInterrupt

        monkeypatch.setattr(OnlineLearner, "learn", interrupted)
        expected = KeyboardInterrupt
        Xb, yb = X[40:], y[40:]
    with pytest.raises(expected):
        m.partial_fit(Xb, yb)
    monkeypatch.undo()
    assert_same_dict(m, before)
    np.testing.assert_array_equal(scores(m, X), pred)
    # and the model goes on learning as if the failed call never happened
    ref = clone(est).set_params(shuffle=False, random_state=0).partial_fit(X[:40], y[:40])
    m.partial_fit(X[40:60], y[40:60])
    ref.partial_fit(X[40:60], y[40:60])
    np.testing.assert_array_equal(scores(m, X), scores(ref, X))


@pytest.mark.parametrize("est, mutation", [(e, m) for e, ms in CRAFTED for m in ms], ids=repr)
def test_crafted_state_is_refused_before_any_kernel_runs(est, mutation, tmp_path, regression_data):
    from fmlearn.exceptions import ModelFileError

    X, y = regression_data(n=50, d=8, seed=14)
    m = clone(est).set_params(shuffle=False).fit(X, y)
    key, change = MUTATIONS[mutation]
    path = crafted(tmp_path, m, lambda arrays: (key, change(arrays[key])))
    with pytest.raises(ModelFileError, match="inconsistent model state|cannot predict"):
        load(path)


def test_a_version_1_file_is_refused_with_the_remedy(tmp_path, regression_data):
    import json
    import zipfile

    from fmlearn.exceptions import ModelFileError
    from fmlearn.io import manifest_digest

    X, y = regression_data(n=30)
    CCFMRegressor().fit(X, y).save(tmp_path / "m.fmz")
    with zipfile.ZipFile(tmp_path / "m.fmz") as zf:
        meta = json.loads(zf.read("fmlearn.json"))
        blobs = {n: zf.read(n) for n in zf.namelist() if n != "fmlearn.json"}
    meta["format_version"] = 1
    meta["digest"] = manifest_digest(meta)
    with zipfile.ZipFile(tmp_path / "old.fmz", "w") as zf:
        zf.writestr("fmlearn.json", json.dumps(meta))
        for n, b in blobs.items():
            zf.writestr(n, b)
    with pytest.raises(ModelFileError, match="version 1.*fit the model again"):
        load(tmp_path / "old.fmz")



def _dense_oracle(m, X):
    """Scores of a convex online model from its dense matrix (NumPy)."""
    Xd = X.toarray()
    if isinstance(m, (CCFMRegressor, CCFMClassifier)):
        C = m.augmented_matrix()  # [[Z, w], [w', 2 w0]]
        Xh = np.column_stack([Xd, np.ones(Xd.shape[0])])
        quad = np.einsum("ij,jk,ik->i", Xh, C, Xh)
        if not m.self_interaction:
            quad -= (Xd * Xd) @ np.diag(C)[:-1]
        return m.intercept_ + 0.5 * quad
    W = m.interaction_matrix()
    quad = np.einsum("ij,jk,ik->i", Xd, W, Xd) - (Xd * Xd) @ np.diag(W)
    return m.intercept_ + m.w0_ + Xd @ m.w_ + 0.5 * quad


@pytest.mark.parametrize("est", [CCFMRegressor(trace_bound=3.0),
                                 CCFMRegressor("ftrl", trace_bound=3.0, self_interaction=False),
                                 OnlineCFMRegressor(trace_bound=3.0)], ids=repr)
def test_batch_prediction_in_parallel_equals_the_dense_oracle_on_any_thread_count(est):
    # predict runs the rows in parallel (raw arrays or flat records): the same numbers as the
    # dense model, bit for bit the same on one thread and on all of them
    import numba

    X, y, _ = make_ccfm_stream(400, 30, rank=3, trace_norm=3.0, density=0.2, noise=0.1,
                               random_state=4)
    m = clone(est).set_params(random_state=0).fit(X[:300], y[:300])
    Xt = sp.csr_matrix(X[300:])
    np.testing.assert_allclose(m._scores(Xt), _dense_oracle(m, Xt), rtol=1e-9, atol=1e-9)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = m._scores(Xt)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one, m._scores(Xt))
