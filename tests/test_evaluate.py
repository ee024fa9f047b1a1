"""Prequential evaluation and the streaming metrics."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.metrics import log_loss, mean_absolute_error, roc_auc_score

from fmlearn import CCFMClassifier, CCFMRegressor, OnlineFMRegressor, evaluate_prequential
from fmlearn.metrics import METRICS, make_metric


def _data(n=500, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X[:, 0] * X[:, 1] + X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


# -- streaming metrics equal the batch metrics of scikit-learn -------------------------------

def test_streaming_metrics_equal_batch_metrics_for_any_split():
    rng = np.random.default_rng(1)
    y = rng.normal(size=300)
    s = y + rng.normal(size=300)
    lab = np.where(rng.random(300) < 0.4, 1.0, -1.0)
    marg = lab * 0.5 + rng.normal(size=300)
    w = rng.random(300)
    cuts = [0, 7, 100, 101, 300]
    ms = {name: make_metric(name) for name in METRICS}
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        for m in ms.values():
            if m.task == "regression":
                m.update(y[a:b], s[a:b], w[a:b])
            else:
                m.update(lab[a:b], marg[a:b], w[a:b])
    assert ms["rmse"].value == pytest.approx(np.sqrt(np.average((s - y) ** 2, weights=w)))
    assert ms["mae"].value == pytest.approx(mean_absolute_error(y, s, sample_weight=w))
    err = np.average(np.where(marg > 0, 1.0, -1.0) != lab, weights=w)
    assert ms["error_rate"].value == pytest.approx(err)
    p = 1 / (1 + np.exp(-marg))
    assert ms["log_loss"].value == pytest.approx(log_loss(lab > 0, p, sample_weight=w))
    assert ms["auc"].value == pytest.approx(roc_auc_score(lab, marg, sample_weight=w))


def test_metric_edge_cases():
    assert np.isnan(make_metric("rmse").value)
    auc = make_metric("auc").update(np.ones(3), np.arange(3.0))
    assert np.isnan(auc.value)  # one class only: undefined
    with pytest.raises(ValueError, match="unknown metric"):
        make_metric("accuracy")


# -- evaluate_prequential ----------------------------------------------------------------------

def test_fast_path_equals_predict_then_learn_row_by_row():
    X, y = _data()
    # standardize=False: its statistics come from the first batch, 64 rows here, 1 row below
    res = evaluate_prequential(CCFMRegressor(trace_bound=3.0, clip_predictions=False,
                                             standardize=False), (X, y),
                               metrics=["rmse", "mae"], batch_size=64, keep_predictions=True)
    ref = CCFMRegressor(trace_bound=3.0, clip_predictions=False, standardize=False)
    expected = []
    for i in range(X.shape[0]):
        expected.append(ref.predict(X[i:i + 1])[0] if i else 0.0)
        ref.partial_fit(X[i:i + 1], y[i:i + 1])
    np.testing.assert_allclose(res.predictions, expected, atol=1e-10)
    assert res.metrics["rmse"] == pytest.approx(np.sqrt(np.mean((res.predictions - y) ** 2)))
    assert res.metrics["mae"] == pytest.approx(np.mean(np.abs(res.predictions - y)))
    # curves: one point per batch, the last equal to the final metrics
    assert res.n_rows.tolist() == list(range(64, 500, 64)) + [500]
    assert res.curves["rmse"][-1] == res.metrics["rmse"]
    assert np.all(np.diff(res.elapsed) >= 0) and res.rows_per_second > 0


def test_an_iterable_of_batches_equals_a_tuple():
    X, y = _data(seed=2)
    a = evaluate_prequential(OnlineFMRegressor(random_state=0), (X, y), batch_size=100)
    batches = ((X[i:i + 100], y[i:i + 100]) for i in range(0, 500, 100))
    b = evaluate_prequential(OnlineFMRegressor(random_state=0), batches, total=500)
    assert a.metrics == b.metrics
    np.testing.assert_array_equal(a.curves["rmse"], b.curves["rmse"])


def test_classifier_metrics_and_labels():
    X, y = _data(n=600, seed=3)
    labels = np.where(y > 0, "pos", "neg")
    res = evaluate_prequential(CCFMClassifier(trace_bound=20.0, gamma_power=1.0), (X, labels),
                               batch_size=100, keep_predictions=True)
    assert set(res.metrics) == {"error_rate", "auc"}
    enc = np.where(labels == "pos", 1.0, -1.0)
    np.testing.assert_array_equal(res.labels, enc)
    assert res.metrics["auc"] == pytest.approx(roc_auc_score(enc, res.predictions))
    assert res.metrics["error_rate"] < 0.35  # it learns (the mean label is ~0.5)


def test_first_batch_with_one_class_needs_classes():
    X, y = _data(n=200, seed=4)
    lab = np.where(np.arange(200) < 50, 1, 0)  # the first batch holds one class
    with pytest.raises(ValueError, match="two classes"):
        evaluate_prequential(CCFMClassifier(), (X, lab), batch_size=50)
    res = evaluate_prequential(CCFMClassifier(), (X, lab), batch_size=50, classes=[0, 1])
    assert res.n_rows[-1] == 200


def test_generic_path_for_other_estimators():
    # scikit-learn's online estimators: predict (when fitted), then partial_fit, row by row;
    # the unpredictable first row is left out of the metrics
    X, y = _data(n=120, seed=5)
    res = evaluate_prequential(SGDRegressor(random_state=0), (X, y), batch_size=40,
                               keep_predictions=True)
    assert np.isnan(res.predictions[0]) and np.all(np.isfinite(res.predictions[1:]))
    r = res.predictions[1:] - y[1:]
    assert res.metrics["rmse"] == pytest.approx(np.sqrt(np.mean(r**2)))
    res = evaluate_prequential(SGDClassifier(random_state=0), (X, y > 0),
                               metrics=["error_rate"], batch_size=40, classes=[False, True])
    assert 0 <= res.metrics["error_rate"] <= 1


def test_sparse_stream_and_sample_weights():
    X, y = _data(n=300, seed=6)
    w = np.random.default_rng(0).integers(1, 3, size=300).astype(float)
    # standardize=False: "auto" standardises the dense X and leaves the sparse one as given
    a = evaluate_prequential(CCFMRegressor(trace_bound=3.0, standardize=False),
                             (sp.csr_matrix(X), y, w),
                             batch_size=50)
    b = evaluate_prequential(CCFMRegressor(trace_bound=3.0, standardize=False), (X, y, w),
                             batch_size=50)
    assert a.metrics["rmse"] == pytest.approx(b.metrics["rmse"])


def test_bad_arguments():
    X, y = _data(n=20)
    with pytest.raises(TypeError, match="partial_fit"):
        from sklearn.linear_model import Ridge

        evaluate_prequential(Ridge(), (X, y))
    with pytest.raises(ValueError, match="classification"):
        evaluate_prequential(CCFMRegressor(), (X, y), metrics=["auc"])
    with pytest.raises(ValueError, match="batch_size"):
        evaluate_prequential(CCFMRegressor(), (X, y), batch_size=0)
    with pytest.raises(ValueError, match="yields"):
        evaluate_prequential(CCFMRegressor(), iter([X]))
    with pytest.raises(ValueError, match="empty"):
        evaluate_prequential(CCFMRegressor(), iter([]))


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    X, y = _data(n=200)
    res = evaluate_prequential(CCFMRegressor(trace_bound=3.0), (X, y), batch_size=20)
    path = tmp_path / "curve.png"
    res.plot(path, title="test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("make", [
    lambda: OnlineFMRegressor("ftrl", n_factors=3, random_state=0),
    lambda: CCFMRegressor("ocg", trace_bound=20.0),
])
def test_warm_up_is_timed_apart_and_changes_nothing(make):
    # the warm-up runs a copy on the first rows: same predictions and final model as without
    # it, its seconds in compile_time, not in elapsed
    X, y = _data(300)
    est_a, est_b = make(), make()
    a = evaluate_prequential(est_a, (X, y), batch_size=100, keep_predictions=True)
    b = evaluate_prequential(est_b, (X, y), batch_size=100, keep_predictions=True,
                             warm_up=False)
    np.testing.assert_array_equal(a.predictions, b.predictions)
    np.testing.assert_array_equal(est_a.predict(X), est_b.predict(X))
    assert a.compile_time > 0 and b.compile_time == 0
    assert a.rows_per_second == a.n_rows[-1] / a.elapsed[-1]


def test_warm_up_leaves_errors_to_the_real_call():
    X, y = _data(50)
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        evaluate_prequential(OnlineFMRegressor("ftrl", random_state=0), (X, y))
