"""Defaults that learn (issue 14, item 2): the online estimators with their
default parameters beat the trivial baseline (the training mean / majority class) by 10% on
held-out rows of generated data of several feature and target scales and class balances;
``trace_bound="auto"`` is equivariant where the model is; OnlineFM's FTRL steps are derived
from the data (``x_scale_``, ``learning_rate_``), so that an imbalanced sparse text set gets a
default decision with positives in it."""

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn import (
    CCFMClassifier,
    CCFMRegressor,
    OnlineCFMClassifier,
    OnlineCFMRegressor,
    OnlineFMClassifier,
    OnlineFMRegressor,
)

N_TRAIN, N_TEST, D = 3000, 1500, 6


def _features(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_TRAIN + N_TEST, D))
    X[rng.random(X.shape) < 0.3] = 0.0  # some sparsity
    return X, rng


def regression(x_scale, y_scale, seed=0):
    """y = 5 + <beta, x> + x0 x1 + noise: an intercept, a linear part and an interaction."""
    X, rng = _features(seed)
    beta = rng.normal(size=D)
    y = 5.0 + X @ beta + X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=X.shape[0])
    return X * x_scale, y * y_scale


def classification(pos_rate, x_scale, seed=0):
    """Labels from a linear + interaction score thresholded at its (1 - pos_rate) quantile."""
    X, rng = _features(seed)
    score = X @ rng.normal(size=D) + 0.5 * X[:, 0] * X[:, 1]
    y = (score > np.quantile(score, 1.0 - pos_rate)).astype(int)
    return X * x_scale, y


def _split(X, y):
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]


@pytest.mark.parametrize("cls", [CCFMRegressor, OnlineCFMRegressor, OnlineFMRegressor])
@pytest.mark.parametrize("x_scale", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("y_scale", [1e-2, 1.0, 1e2])
def test_regressor_defaults_beat_the_mean(cls, x_scale, y_scale):
    Xtr, ytr, Xte, yte = _split(*regression(x_scale, y_scale))
    m = cls(random_state=0).fit(Xtr, ytr)
    rmse = np.sqrt(np.mean((m.predict(Xte) - yte) ** 2))
    baseline = np.sqrt(np.mean((ytr.mean() - yte) ** 2))
    assert rmse <= 0.9 * baseline, (rmse, baseline, vars(m).get("trace_bound_"))


# OnlineCFMClassifier at 3% positives predicts too few positives (at least 15 of the 45 are
# asked): its default alpha (0.5) is small for log-odds of -3.5. A known limit, not a result of
# ``standardize``, which leaves these (already standard) rows nearly as they are: over
# random_state 0-5 it predicted 17, 19, 15, 11, 12, 12 positives before ``standardize`` and 13,
# 20, 13, 13, 13, 12 with it (learning_rate=1.0: 30). Strict: a fix makes these cases pass.
_FEW_POSITIVES = pytest.mark.xfail(strict=True, reason="OnlineCFMClassifier's default alpha "
                                   "is small for a 3% positive rate (comment above)")


def _classifier_cases():
    for pos_rate in (0.5, 0.1, 0.03):
        for x_scale in (1e-3, 1.0, 1e3):
            for cls in (CCFMClassifier, OnlineCFMClassifier, OnlineFMClassifier):
                marks = (_FEW_POSITIVES,) if (cls is OnlineCFMClassifier
                                              and pos_rate == 0.03) else ()
                yield pytest.param(cls, x_scale, pos_rate, marks=marks)


@pytest.mark.parametrize("cls, x_scale, pos_rate", list(_classifier_cases()))
def test_classifier_defaults_beat_the_majority(cls, x_scale, pos_rate):
    Xtr, ytr, Xte, yte = _split(*classification(pos_rate, x_scale))
    m = cls(random_state=0).fit(Xtr, ytr)
    pred = m.predict(Xte)
    err = np.mean(pred != yte)
    majority = np.mean(yte != np.bincount(ytr).argmax())
    assert err <= 0.9 * majority, (err, majority, vars(m).get("trace_bound_"))
    # the default decision is not the majority class: positives of the order of the true ones
    assert yte.sum() / 3 <= pred.sum() <= 3 * yte.sum(), (pred.sum(), yte.sum())


@pytest.mark.parametrize("cls", [CCFMRegressor, OnlineCFMRegressor])
def test_auto_rule_is_equivariant_in_the_scales_of_x_and_y(cls):
    """X -> 1000 X, y -> 100 y: the rows are rescaled to mean squared norm 1, and what the
    rule derives from y (the bound, the intercept, OnlineCFM's linear rate) scales with y.
    (The learners' paths are equivariant in exact arithmetic only: OCCFM's eigenvector choice
    flips on near ties, so rounding differences of 1e-16 change its path; predictions are
    compared by their errors.)"""
    X, y = regression(1.0, 1.0)
    Xtr, ytr, Xte, yte = _split(X, y)
    a = cls(standardize=False, random_state=0).fit(Xtr, ytr)
    b = cls(standardize=False, random_state=0).fit(Xtr * 1e3, ytr * 1e2)
    np.testing.assert_allclose(b.trace_bound_, 100 * a.trace_bound_, rtol=1e-12)
    if cls is CCFMRegressor:  # the choice to divide the columns is scale-free too
        assert ("col_scale_" in vars(a)) == ("col_scale_" in vars(b))
    if "col_scale_" in vars(a):  # the columns' divisors take the factor, the rows' scale stays
        np.testing.assert_allclose(b.col_scale_, 1e3 * a.col_scale_, rtol=1e-12)
        np.testing.assert_allclose(b.x_scale_, a.x_scale_, rtol=1e-12)
    else:
        np.testing.assert_allclose(b.x_scale_, a.x_scale_ / 1e3, rtol=1e-12)
    np.testing.assert_allclose(b.intercept_, 100 * a.intercept_, rtol=1e-12)
    if cls is OnlineCFMRegressor:
        np.testing.assert_allclose(b.learning_rate_, 100 * a.learning_rate_, rtol=1e-12)
    rmse_a = np.sqrt(np.mean((a.predict(Xte) - yte) ** 2))
    rmse_b = np.sqrt(np.mean((b.predict(Xte * 1e3) / 100 - yte) ** 2))
    assert abs(rmse_b - rmse_a) <= 0.2 * rmse_a, (rmse_a, rmse_b)


def test_auto_bound_is_chosen_by_prequential_loss_among_the_documented_candidates():
    """The resolved bound is one of delta0 x 4^k (delta0 = the targets' standard deviation
    on rows of mean squared norm 1), and an explicit bound is kept as given. The columns,
    of scales 1 to 1e3, are divided by their root mean squares of non-zero values."""
    Xtr, ytr, _, _ = _split(*regression(1.0, 1.0))
    Xtr = Xtr * np.logspace(0, 3, D)
    m = CCFMRegressor(standardize=False, random_state=0).fit(Xtr, ytr)
    ratios = m.trace_bound_ / ytr.std() / 4.0 ** np.arange(6)
    assert np.isclose(ratios, 1.0, rtol=1e-9).any(), m.trace_bound_
    rms = np.sqrt(np.sum(Xtr ** 2, axis=0) / np.count_nonzero(Xtr, axis=0))
    np.testing.assert_allclose(m.col_scale_, rms, rtol=1e-12)
    Xc = Xtr / rms
    np.testing.assert_allclose(m.x_scale_, 1 / np.sqrt(np.mean(np.sum(Xc ** 2, axis=1))))
    e = CCFMRegressor(standardize=False, trace_bound=7.0, random_state=0).fit(Xtr, ytr)
    assert e.trace_bound_ == 7.0 and e.x_scale_ == 1.0 and "col_scale_" not in vars(e)


@pytest.mark.parametrize("cls", [CCFMRegressor, CCFMClassifier])
def test_intercept_is_the_running_constant_of_the_targets(cls):
    """fit_intercept: the intercept after the rows is the mean of y (regression) or the
    add-one log-odds of the classes (classification), and predictions include it."""
    X, y = (regression(1.0, 1.0) if cls is CCFMRegressor else classification(0.1, 1.0))
    m = cls(random_state=0).fit(X, y)
    if cls is CCFMRegressor:
        assert np.isclose(m.intercept_, y.mean(), rtol=1e-12)
    else:
        assert np.isclose(m.intercept_, np.log((y.sum() + 1) / ((1 - y).sum() + 1)))
    off = cls(fit_intercept=False, trace_bound=m.trace_bound_, random_state=0).fit(X, y)
    assert off.intercept_ == 0.0


@pytest.mark.parametrize("cls, kw", [(CCFMRegressor, {}), (OnlineCFMRegressor, {}),
                                     (OnlineFMRegressor, {}),
                                     (CCFMClassifier, {"learning_rate": "auto"})])
def test_resolved_values_round_trip_and_crafted_ones_are_refused(cls, kw, tmp_path):
    import json
    import zipfile

    import fmlearn
    from fmlearn.exceptions import ModelFileError
    from fmlearn.io import manifest_digest

    data = classification(0.1, 1e3) if cls is CCFMClassifier else regression(1e3, 1e2)
    Xtr, ytr, Xte, _ = _split(*data)
    m = cls(random_state=0, **kw).fit(Xtr[:500], ytr[:500])
    m.save(tmp_path / "m.fmz")
    back = fmlearn.load(tmp_path / "m.fmz")
    resolved = [k for k in ("trace_bound_", "x_scale_", "learning_rate_", "calibration_scale_",
                            "calibration_offset_") if k in vars(m)]
    assert len(resolved) >= 2
    assert all(getattr(back, k) == getattr(m, k) for k in resolved)
    np.testing.assert_array_equal(back.predict(Xte), m.predict(Xte))
    with zipfile.ZipFile(tmp_path / "m.fmz") as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    bad_values = {"trace_bound_": -1.0, "x_scale_": 0.0, "learning_rate_": float("inf"),
                  "intercept_stats_": [-1.0, 0.0], "calibration_scale_": -1.0,
                  "calibration_offset_": float("nan")}
    for name, bad in bad_values.items():
        if name not in vars(m):
            continue
        meta = json.loads(members["fmlearn.json"])
        meta["attributes"][name] = bad
        meta["digest"] = manifest_digest(meta)
        path = tmp_path / f"{name}.fmz"
        with zipfile.ZipFile(path, "w") as zf:
            for n, blob in members.items():
                zf.writestr(n, json.dumps(meta) if n == "fmlearn.json" else blob)
        with pytest.raises(ModelFileError, match=name):
            fmlearn.load(path)


def sparse_text(n=3600, d=8000, nnz=40, pos_rate=0.05, seed=0):
    """tf-idf-like rows (Zipf word counts times idf, unit norm: values about 0.15) of an
    imbalanced set (issue 14): labels from a linear + pairwise score over 20 keywords,
    thresholded at its (1 - pos_rate) quantile."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, d + 1) ** 1.1
    cols = rng.choice(d, size=(n, nnz), p=p / p.sum())
    counts = rng.poisson(1.0, size=(n, nnz)) + 1.0
    X = sp.csr_matrix((counts.ravel(), cols.ravel(), np.arange(0, n * nnz + 1, nnz)),
                      shape=(n, d))
    X.sum_duplicates()
    X = sp.csr_matrix(X @ sp.diags(np.log(n / (1.0 + np.bincount(X.indices, minlength=d)))))
    X = sp.csr_matrix(sp.diags(1.0 / np.sqrt(X.multiply(X).sum(axis=1).A.ravel())) @ X)
    keys = rng.choice(np.arange(5, 200), 20, replace=False)
    w = np.zeros(d)
    w[keys] = 4.0 * rng.normal(size=20)
    V = np.zeros((d, 4))
    V[keys] = rng.normal(size=(20, 4))
    q = X @ V
    score = X @ w + 0.5 * ((q ** 2).sum(axis=1) - X.multiply(X) @ (V ** 2).sum(axis=1))
    return X, (score > np.quantile(score, 1.0 - pos_rate)).astype(int)


def test_ccfm_auto_step_gives_positives_on_an_imbalanced_text_set():
    """Issue 14: with OCCFM's constant eta = 1 the model tracks the minimiser of
    eta <S_t, C> + ||C||_F^2, a ridge of weight 2 / eta on C whatever the data: it ranks
    well (AUC 0.99) and predicts no positive. ``learning_rate="auto"`` (not the default)
    derives eta from the bound and the gradients' scale (``auto_step``): the held-out
    decision then has positives within a factor 2 of the true count and beats the majority
    class, and eta is the documented rule's. ``self_interaction=False``: with the x_j^2
    terms the positives' count is bimodal in eta (docstring of ``_rows_scaled``)."""
    from sklearn.metrics import roc_auc_score

    from fmlearn.online._trace import row_norms2
    from fmlearn.online.ccfm import AUTO_STEP_FACTOR

    X, y = sparse_text(d=1000)
    Xtr, ytr, Xte, yte = X[:3000], y[:3000], X[3000:], y[3000:]
    kw = {"self_interaction": False, "random_state": 0, "calibration": None}
    m = CCFMClassifier(learning_rate="auto", **kw).fit(Xtr, ytr)
    pred = m.predict(Xte)
    assert roc_auc_score(yte, m.decision_function(Xte)) > 0.9
    assert yte.sum() / 2 <= pred.sum() <= 2 * yte.sum(), (pred.sum(), yte.sum())
    assert np.mean(pred != yte) <= 0.9 * yte.mean()
    # the rule: G^2 = p (1 - p) E (||x^||^2 / 2)^2 on the learner's rows, p the positives'
    # add-one share, T = 3000 rounds
    # unit-norm rows: their columns are left as given (the module docstring, step 0)
    assert "col_scale_" not in vars(m) and m.x_scale_ == 1.0
    b = (row_norms2(Xtr) * m.x_scale_ ** 2 + 1.0) / 2.0
    p = (ytr.sum() + 1.0) / (3000 + 2.0)
    g = np.sqrt(p * (1 - p) * np.mean(b ** 2))
    np.testing.assert_allclose(m.learning_rate_,
                               AUTO_STEP_FACTOR * 2 * m.trace_bound_ / (g * np.sqrt(3000)))
    # without the rule (the default eta = 1): far too few positives
    old = CCFMClassifier(**kw).fit(Xtr, ytr)
    assert "learning_rate_" not in vars(old)
    assert old.predict(Xte).sum() < yte.sum() / 2
    # partial_fit resolves the same step from its first batch: one call equals fit in order
    a = CCFMClassifier(learning_rate="auto", shuffle=False, **kw).fit(Xtr[:1000], ytr[:1000])
    c = CCFMClassifier(learning_rate="auto", **kw).partial_fit(Xtr[:1000], ytr[:1000],
                                                               classes=[0, 1])
    assert c.learning_rate_ == a.learning_rate_
    np.testing.assert_array_equal(c.decision_function(Xte), a.decision_function(Xte))
    # a regressor has no such rule: "auto" is refused by name; so are the other learners',
    # and the refused call leaves the estimator unfitted
    with pytest.raises(ValueError, match="learning_rate"):
        CCFMRegressor(learning_rate="auto").fit(Xtr[:100], ytr[:100])
    for learner in ("ftrl", "ogd", "pa"):
        bad = CCFMClassifier(learner, learning_rate="auto")
        with pytest.raises(ValueError, match="learner='ocg' only"):
            bad.fit(Xtr[:100], ytr[:100])
        assert not hasattr(bad, "n_features_in_")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ccfm_default_link_gives_positives_on_an_imbalanced_text_set(seed):
    """Issue 14: CCFMClassifier's final C ranks well but its scores are compressed (not
    shifted): the decision y^(x) predicts no positive. The default link a y^(x) + b, fitted
    by Platt's logistic regression on the training scores, predicts a held-out count within
    a factor 2 of the true one for every row order; the same model's decision without it
    (``calibration=None``: y^(x)) predicts fewer than half, for every order."""
    from sklearn.metrics import roc_auc_score

    X, y = sparse_text(n=2000, d=1000)
    Xtr, ytr, Xte, yte = X[:1666], y[:1666], X[1666:], y[1666:]
    m = CCFMClassifier(random_state=seed).fit(Xtr, ytr)
    assert roc_auc_score(yte, m.decision_function(Xte)) > 0.85
    assert yte.sum() / 2 <= m.predict(Xte).sum() <= 2 * yte.sum(), (m.predict(Xte).sum(),
                                                                      yte.sum())
    assert m.calibration_scale_ > 1.0  # the scores are compressed, not only shifted
    raw = m.set_params(calibration=None).decision_function(Xte)
    assert np.sum(raw > 0) < yte.sum() / 2


def test_online_fm_default_decision_has_positives_on_an_imbalanced_text_set():
    """Issue 14: with alpha = 0.1 on the raw values (about 0.15) OnlineFMClassifier() ranked
    well but predicted no positive: FTRL moves a weight by about alpha per round, so keyword
    weights stayed far below the log-odds they need against the intercept's -2.9. With the
    steps derived from the data (rows at unit typical value, alpha in log-odds) the held-out
    decision has positives of the order of the true count and beats the majority class."""
    from sklearn.metrics import roc_auc_score

    X, y = sparse_text()
    Xtr, ytr, Xte, yte = X[:3000], y[:3000], X[3000:], y[3000:]
    m = OnlineFMClassifier(random_state=0).fit(Xtr, ytr)
    pred = m.predict(Xte)
    assert roc_auc_score(yte, m.decision_function(Xte)) >= 0.9
    assert yte.sum() / 2.5 <= pred.sum() <= 2 * yte.sum(), (pred.sum(), yte.sum())
    assert np.mean(pred != yte) <= 0.9 * yte.mean()
    np.testing.assert_allclose(m.x_scale_, 1 / np.sqrt(np.mean(Xtr.data ** 2)), rtol=1e-12)
    assert m.learning_rate_ == 0.5  # AUTO_LINEAR_RATE x 1 log-odds
    # an explicit rate keeps its meaning: the rows as given (and here, no positive at all)
    old = OnlineFMClassifier(learning_rate=0.1, random_state=0).fit(Xtr, ytr)
    assert old.x_scale_ == 1.0 and "learning_rate_" not in vars(old)
    assert old.predict(Xte).sum() < yte.sum() / 2.5


@pytest.mark.parametrize("cls", [OnlineFMRegressor, OnlineFMClassifier])
def test_online_fm_auto_steps_are_invariant_to_the_scale_of_x(cls):
    """x_scale_ = 1 / rms of the non-zero values: X and 1000 X give the same learner rows, hence
    the same predictions and the same model in the coordinates of X (w_, V_ carry x_scale_).
    (``shuffle=False``: the shuffled ``fit`` first merges identical rows into an order of their
    values, which X and 1000 X need not share.)"""
    X, y = (regression(1.0, 1.0) if cls is OnlineFMRegressor else classification(0.1, 1.0))
    Xtr, ytr, Xte, _ = _split(X, y)
    a = cls(standardize=False, shuffle=False, random_state=0).fit(Xtr, ytr)
    b = cls(standardize=False, shuffle=False, random_state=0).fit(Xtr * 1e3, ytr)
    np.testing.assert_allclose(b.x_scale_, a.x_scale_ / 1e3, rtol=1e-12)
    np.testing.assert_allclose(b.decision_function(Xte * 1e3) if cls is OnlineFMClassifier
                               else b.predict(Xte * 1e3),
                               a.decision_function(Xte) if cls is OnlineFMClassifier
                               else a.predict(Xte), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(b.w_ * 1e3, a.w_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(b.V_ * 1e3, a.V_, rtol=1e-7, atol=1e-9)
    # the model in X's coordinates: w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l
    q = Xte @ a.V_
    f = a.w0_ + Xte @ a.w_ + 0.5 * ((q ** 2).sum(axis=1) - (Xte ** 2) @ (a.V_ ** 2).sum(axis=1))
    got = a.decision_function(Xte) if cls is OnlineFMClassifier else a.predict(Xte)
    if cls is OnlineFMRegressor:
        f = np.clip(f, *a.y_range_)
    np.testing.assert_allclose(got, f, rtol=1e-9, atol=1e-9)


def one_hot(n=1500, users=40, items=60, seed=0):
    """User + item one-hot rows (of skewed frequencies) and ratings from biases and a rank-2
    interaction: the shape of MovieLens."""
    rng = np.random.default_rng(seed)
    u = np.minimum(rng.zipf(1.5, size=n) - 1, users - 1)
    i = users + np.minimum(rng.zipf(1.3, size=n) - 1, items - 1)
    X = sp.csr_matrix((np.ones(2 * n), np.column_stack([u, i]).ravel(),
                       np.arange(0, 2 * n + 1, 2)), shape=(n, users + items))
    P = rng.normal(size=(users + items, 2))
    b = rng.normal(size=users + items)
    y = 3.5 + b[u] + b[i] + np.sum(P[u] * P[i], axis=1) + 0.3 * rng.normal(size=n)
    return X, y


@pytest.mark.parametrize("learner", ["ocg", "ogd"])
def test_ccfm_auto_is_invariant_to_column_scaling_on_one_hot_data(learner):
    """trace_bound="auto" rescales each column to a unit root mean square of its non-zero
    values (``col_scale_``): on one-hot data, columns multiplied by arbitrary positive factors
    (as standardising does: 1 / sqrt(p (1 - p))) give the same predictions, in ``fit`` and in
    a later ``partial_fit``. ``shuffle=False``: ``fit``'s shuffled order is a hash of the rows'
    values (merged duplicates), which the factors change."""
    X, y = one_hot()
    seen = np.diff(X[:1000].tocsc().indptr) > 0
    assert 0 < seen.sum() < X.shape[1]
    # a column without a non-zero in the first batch keeps scale 1: its factor is not undone
    factors = np.where(seen, np.random.default_rng(1).uniform(0.01, 100.0, X.shape[1]), 1.0)
    Xs = X @ sp.diags(factors)
    Xtr, ytr, Xte = X[:1000], y[:1000], X[1000:]
    Str, Ste = Xs[:1000].tocsr(), Xs[1000:].tocsr()
    a = CCFMRegressor(learner, shuffle=False).fit(Xtr, ytr)
    b = CCFMRegressor(learner, shuffle=False).fit(Str, ytr)
    assert "col_scale_" not in vars(a)  # already even rows: their columns are left as given
    np.testing.assert_allclose(b.col_scale_[seen], factors[seen], rtol=1e-12)
    assert np.all(b.col_scale_[~seen] == 1.0)
    assert b.trace_bound_ == a.trace_bound_
    np.testing.assert_allclose(b.predict(Ste), a.predict(Xte), rtol=0, atol=1e-8)
    a.partial_fit(Xte[:200], y[1000:1200])
    b.partial_fit(Ste[:200], y[1000:1200])
    np.testing.assert_allclose(b.predict(Ste), a.predict(Xte), rtol=0, atol=1e-8)
    # the rule is what makes the difference: without it the scaled columns change the model
    if learner == "ocg":
        raw = CCFMRegressor(learner, trace_bound=a.trace_bound_, shuffle=False)
        assert "col_scale_" not in vars(raw.fit(Xtr, ytr))
        assert not np.allclose(raw.fit(Str, ytr).predict(Ste), raw.fit(Xtr, ytr).predict(Xte))


def test_ccfm_col_scale_round_trips_and_a_crafted_one_is_refused(tmp_path):
    import fmlearn
    from fmlearn.exceptions import ModelFileError

    X, y = one_hot()
    # columns of several scales (as standardised one-hot columns): "auto" divides them
    X = (X @ sp.diags(np.random.default_rng(1).uniform(0.5, 5.0, X.shape[1]))).tocsr()
    m = CCFMRegressor(random_state=0).fit(X[:800] * 3.0, y[:800])
    m.save(tmp_path / "m.fmz")
    back = fmlearn.load(tmp_path / "m.fmz")
    np.testing.assert_array_equal(back.col_scale_, m.col_scale_)
    np.testing.assert_array_equal(back.predict(X[800:]), m.predict(X[800:]))
    for bad in (-m.col_scale_, m.col_scale_[:-1], np.full_like(m.col_scale_, np.inf)):
        crafted = CCFMRegressor(random_state=0).fit(X[:800] * 3.0, y[:800])
        crafted.col_scale_ = bad
        crafted.save(tmp_path / "bad.fmz")
        with pytest.raises(ModelFileError, match="col_scale_"):
            fmlearn.load(tmp_path / "bad.fmz")


def test_ccfm_auto_leaves_rows_of_one_norm_as_given():
    """trace_bound="auto" divides CCFM's columns by their root mean squares of non-zero values
    only when that brings the rows to a common norm (``evens_rows``): tf-idf rows, already of
    unit norm, keep their columns and their scale (no ``col_scale_``, ``x_scale_`` exactly 1),
    so the default fit is the fit with the chosen bound given, bit for bit (dividing them cost
    CCFMClassifier("ftrl") 0.980 -> 0.966 AUC on tf-idf Reuters R8, benchmarks/
    bench_online_defaults.py); one-hot rows whose columns carry factors (standardised one-hot
    data) are still divided, and plain one-hot rows (already even) are not."""
    from sklearn.metrics import roc_auc_score

    from fmlearn.online._trace import column_scale, evens_rows, norm_spread

    X, y = sparse_text(n=1800, d=1000)
    Xtr, ytr, Xte, yte = X[:1200], y[:1200], X[1200:], y[1200:]
    w = np.ones(1200)
    assert norm_spread(Xtr, w) < 1e-12 < norm_spread(Xtr, w, column_scale(Xtr, w))
    assert not evens_rows(Xtr, column_scale(Xtr, w), w)
    m = CCFMClassifier("ftrl", random_state=0).fit(Xtr, ytr)
    assert "col_scale_" not in vars(m) and m.x_scale_ == 1.0
    given = CCFMClassifier("ftrl", trace_bound=m.trace_bound_, random_state=0).fit(Xtr, ytr)
    np.testing.assert_array_equal(m.decision_function(Xte), given.decision_function(Xte))
    assert roc_auc_score(yte, m.decision_function(Xte)) > 0.9
    # one-hot rows: as given they are even (every column's scale is 1: nothing to divide);
    # times column factors they are not, and dividing evens them exactly
    H, _ = one_hot()
    v = np.ones(H.shape[0])
    assert not evens_rows(H, column_scale(H, v), v)
    Hf = (H @ sp.diags(np.random.default_rng(1).uniform(0.01, 100.0, H.shape[1]))).tocsr()
    assert evens_rows(Hf, column_scale(Hf, v), v)
    assert norm_spread(Hf, v, column_scale(Hf, v)) < 1e-12
