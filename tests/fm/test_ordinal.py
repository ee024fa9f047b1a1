"""FMOrdinalRegressor (fmlearn.fm.ordinal): a planted ordered probit model is recovered better
than by a regression on the labels, probabilities are proper, bad labels are refused without
changing the estimator, and the model survives the safe model format."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import ndtr

import fmlearn
from fmlearn import FMOrdinalRegressor, FMRegressor
from fmlearn.exceptions import ModelFileError


def _planted(seed=0, n=3000, nu=50, ni=40, cuts=(-1.6, -1.3, -1.0, 1.2)):
    """One-hot users and items, an FM latent score, labels 1..5 cut from f + N(0, 1) at
    unevenly spaced cut-points (levels 1-4 close together): labels are not a linear scale."""
    rng = np.random.default_rng(seed)
    u, i = rng.integers(0, nu, n), rng.integers(0, ni, n)
    X = sp.csr_matrix((np.ones(2 * n), np.column_stack([u, nu + i]).ravel(),
                       np.arange(0, 2 * n + 1, 2)), shape=(n, nu + ni))
    Vu, Vi = rng.normal(0, 0.8, (nu, 2)), rng.normal(0, 0.8, (ni, 2))
    f = rng.normal(0, 0.5, nu)[u] + rng.normal(0, 0.5, ni)[i] + np.sum(Vu[u] * Vi[i], axis=1)
    t = np.array(cuts)
    y = np.searchsorted(t, f + rng.normal(size=n)) + 1
    cdf = ndtr(t[None, :] - f[:, None])
    P = np.diff(np.column_stack([np.zeros(n), cdf, np.ones(n)]), axis=1)
    return X, y.astype(np.int64), P


@pytest.fixture(scope="module")
def planted_fit():
    X, y, P = _planted()
    tr = np.arange(y.shape[0]) < 2250
    model = FMOrdinalRegressor(2, n_iter=150, random_state=0).fit(X[tr], y[tr])
    return model, X, y, P, tr


def test_planted_ordinal_model_beats_regression_on_the_labels(planted_fit):
    model, X, y, P, tr = planted_fit
    te = ~tr
    levels = np.arange(1, 6)

    def rmse(pred):
        return float(np.sqrt(np.mean((pred - y[te]) ** 2)))

    reg = FMRegressor(2, n_iter=150, random_state=0).fit(X[tr], y[tr].astype(float))
    ordinal, regression, oracle = rmse(model.predict(X[te])), rmse(reg.predict(X[te])), rmse(
        P[te] @ levels)
    # measured on 750 test rows, random_state 0-2: ordinal 0.962-0.969, regression on the
    # labels 0.990-0.991, the true model's expectation 0.918; log-loss 0.938-0.945 against
    # the true model's 0.890
    assert ordinal < regression - 0.015
    assert ordinal < oracle + 0.08
    # the class probabilities themselves: log-loss close to the true model's
    logloss = -np.mean(np.log(model.predict_proba(X[te])[np.arange(te.sum()), y[te] - 1]))
    true_logloss = -np.mean(np.log(P[te][np.arange(te.sum()), y[te] - 1]))
    assert logloss < true_logloss + 0.08
    np.testing.assert_array_equal(model.levels_, levels.astype(float))
    assert 0.5 < model.cut_point_acceptance_ <= 1.0


def test_probabilities_sum_to_one_and_expectation_matches(planted_fit):
    model, X, y, _, _ = planted_fit
    P = model.predict_proba(X[:200])
    assert P.shape == (200, 5) and np.all(P >= 0)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(model.predict(X[:200]), P @ model.levels_, rtol=1e-12)
    assert model.samples_cut_points_.shape == (model.samples_w0_.shape[0], 4)
    assert np.all(np.diff(model.samples_cut_points_, axis=1) > 0)
    assert np.all(model.samples_w0_ == 0.0) or np.max(np.abs(model.samples_w0_)) < 1e-100


def _small(seed=0, n=150):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = np.digitize(X[:, 0] + X[:, 1] * X[:, 2], [-0.8, 0.0, 0.8]) + 1
    return X, y


@pytest.mark.parametrize("labels, match", [
    (lambda y: np.where(y == 3, 4, y), r"gap: no row has the level\(s\) \[3.0\]"),
    (lambda y: np.full_like(y, 2), "only one class"),
    (lambda y: y + 0.5, "integer ordinal labels"),
])
def test_bad_labels_are_refused_and_change_nothing(labels, match):
    X, y = _small()
    model = FMOrdinalRegressor(2, n_iter=10, random_state=0).fit(X, y)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(model).items()}
    pred = model.predict(X)
    with pytest.raises(ValueError, match=match):
        model.fit(X, labels(y))
    assert vars(model).keys() == before.keys()
    for k, v in before.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(vars(model)[k], v)
    np.testing.assert_array_equal(model.predict(X), pred)
    with pytest.raises(ValueError, match=match):
        FMOrdinalRegressor(2, n_iter=10).fit(X, labels(y))


def test_same_random_state_same_result_with_any_threads():
    X, y = _small()
    a = FMOrdinalRegressor(2, n_iter=20, random_state=3, n_jobs=1).fit(X, y)
    b = FMOrdinalRegressor(2, n_iter=20, random_state=3, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


def test_save_load_round_trip_and_crafted_cut_points_refused(tmp_path):
    import fmlearn.io as fio
    from test_io import _rebuild, _set_array  # the suite's model-file helpers

    X, y = _small()
    model = FMOrdinalRegressor(2, n_iter=20, random_state=0).fit(X, y)
    path = model.save(tmp_path / "o.fmz")
    back = fmlearn.load(path)
    assert type(back) is FMOrdinalRegressor
    np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(back.levels_, model.levels_)

    def swap(meta, members):  # cut-points out of order in one kept sample
        arr = model.samples_cut_points_.copy()
        arr[0, [0, 1]] = arr[0, [1, 0]]
        _set_array(meta, members, "samples_cut_points_", fio._npy_bytes(arr))

    with pytest.raises(ModelFileError, match="cut-points"):
        fmlearn.load(_rebuild(path.read_bytes(), tmp_path / "bad.fmz", swap))


def test_warm_start_continues_the_chain():
    X, y = _small()
    long = FMOrdinalRegressor(2, n_iter=30, n_burn_in=5, n_kept_samples=8, random_state=1)
    long.fit(X, y)
    warm = FMOrdinalRegressor(2, n_iter=15, n_burn_in=5, n_kept_samples=8, random_state=1,
                              warm_start=True)
    warm.fit(X, y).fit(X, y)
    assert warm.n_iter_ == 15 and warm.chain_["t"] == 30
    # equal up to round-off: a new fit rebuilds the cached residuals (the long run every 10
    # sweeps), so the sums differ in their last bits
    np.testing.assert_allclose(warm.samples_cut_points_, long.samples_cut_points_, rtol=1e-9)
    np.testing.assert_allclose(warm.predict_proba(X), long.predict_proba(X), rtol=1e-9,
                               atol=1e-12)
    # other levels: a new chain, not the old one continued
    fresh = warm.fit(X, np.minimum(y, 3))
    assert fresh.chain_["t"] == 15 and fresh.levels_.tolist() == [1.0, 2.0, 3.0]


def test_eval_set_history_reports_the_chain_without_changing_it(planted_fit):
    from fmlearn.solvers.ordinal import ordinal_proba

    model, X, y, _, tr = planted_fit
    Xv, yv = X[~tr], y[~tr]
    m = FMOrdinalRegressor(2, n_iter=150, random_state=0).fit(X[tr], y[tr], eval_set=(Xv, yv))
    np.testing.assert_array_equal(m.samples_V_, model.samples_V_)  # scoring draws nothing
    h = m.history_
    assert len(h["val"]) == len(h["val_avg"]) == len(h["train"]) == len(h["iter_time"]) == 150
    # the last "val" is the RMSE of the expected label under the last sample
    last = ordinal_proba(Xv.indptr, Xv.indices, Xv.data, (np.zeros(1), m.w_[None], m.V_[None]),
                         m.cut_points_[None]) @ m.levels_
    np.testing.assert_allclose(h["val"][-1], np.sqrt(np.mean((last - yv) ** 2)), rtol=1e-12)
    # the running average of 150 samples' probabilities predicts better than the first sample
    assert h["val_avg"][-1] < h["val"][0]
    assert np.isfinite(h["val_rhat"]) and h["val_rhat_median"] <= h["val_rhat"]


def test_callback_ends_the_chain_as_a_shorter_run():
    X, y = _small()
    seen = []

    def stop_at_five(i, history):
        seen.append(len(history["train"]))
        return np.int64(i) == 4  # numpy's True_ stops as True does

    a = FMOrdinalRegressor(2, n_iter=30, n_burn_in=2, random_state=2).fit(X, y,
                                                                           callback=stop_at_five)
    b = FMOrdinalRegressor(2, n_iter=5, n_burn_in=2, random_state=2).fit(X, y)
    assert a.n_iter_ == 5 and seen == [1, 2, 3, 4, 5] and "val" not in a.history_
    np.testing.assert_array_equal(a.samples_V_, b.samples_V_)
    np.testing.assert_array_equal(a.samples_cut_points_, b.samples_cut_points_)


def test_bad_eval_set_is_refused_and_changes_nothing():
    X, y = _small()
    model = FMOrdinalRegressor(2, n_iter=10, random_state=0).fit(X, y)
    V = model.V_.copy()
    with pytest.raises(ValueError, match="features"):
        model.fit(X, y, eval_set=(X[:, :-1], y))
    with pytest.raises(TypeError, match="callback must be callable"):
        model.fit(X, y, callback=3)
    np.testing.assert_array_equal(model.V_, V)
