"""Hazan's convex FM on Dask (fmlearn.distributed.fit_convex, issue 13 deliverable 2): on two
worker processes the fit equals the in-memory fit to 1e-8 (regressor and classifier, with the
linear part's options), an empty partition changes nothing, partitions of different widths are
refused with a clear error, and a failed call leaves the estimator as it was."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from fmlearn import ConvexFMClassifier, ConvexFMRegressor, FMRegressor

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

from fmlearn.distributed import fit_convex  # noqa: E402
from test_atomicity import _snapshot, assert_unchanged  # noqa: E402

RTOL = 1e-8


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


def _sparse_chunks(X, y, sizes, sw=None):
    """Dask array of CSR blocks with the given row-chunk sizes (0 allowed), and y (and sw)."""
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    assert bounds[-1] == X.shape[0]
    blocks = [da.from_delayed(dask.delayed(sp.csr_matrix)(X[a:b]), shape=(b - a, X.shape[1]),
                              dtype=X.dtype, meta=sp.csr_matrix((0, X.shape[1])))
              for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    Xd = da.concatenate(blocks, axis=0)
    out = [Xd, da.from_array(y, chunks=(tuple(sizes),))]
    if sw is not None:
        out.append(da.from_array(sw, chunks=(tuple(sizes),)))
    return out


def _problem(n=500, d=30, seed=0):
    """Sparse rows (30% non-zeros), y from a planted rank-2 PSD W, a linear part and noise."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, format="csr", random_state=seed,
                  data_rvs=rng.standard_normal)
    U = rng.standard_normal((d, 2)) / np.sqrt(d)
    XU = X @ U
    sq = X.multiply(X) @ (U * U).sum(1)
    y = 0.5 + X @ rng.standard_normal(d) * 0.3 + ((XU ** 2).sum(1) - sq)
    return X, y + 0.05 * rng.standard_normal(n)


def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


def assert_same_fit(m, ref, X, rtol=RTOL):
    assert m.n_iter_ == ref.n_iter_ and m.n_atoms_ == ref.n_atoms_ and m.t_ == ref.t_
    assert m.n_features_in_ == ref.n_features_in_ and m.dtype_ == ref.dtype_
    assert _rel(m.interaction_matrix(), ref.interaction_matrix()) < rtol
    assert _rel(m.w_, ref.w_) < rtol
    assert m.w0_ == pytest.approx(ref.w0_, rel=rtol, abs=rtol)
    assert _rel(m.atom_weights_, ref.atom_weights_) < rtol
    for key in ("objective", "gap", "step", "train"):
        np.testing.assert_allclose(m.history_[key], ref.history_[key], rtol=1e-7, atol=1e-12)
    raw = m.decision_function(X) if hasattr(m, "classes_") else m.predict(X)
    raw_ref = ref.decision_function(X) if hasattr(ref, "classes_") else ref.predict(X)
    assert _rel(raw, raw_ref) < rtol


def test_in_process_without_client():
    """Without a distributed client the partitions are kept in this process: same result."""
    X, y = _problem(seed=8, n=300)
    est = ConvexFMRegressor(trace_bound=3.0, max_iter=4, tol=0, random_state=0)
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("error")
        m = fit_convex(clone(est), *_sparse_chunks(X, y, (100, 200)))
    assert_same_fit(m, clone(est).fit(X, y), X)


@pytest.mark.parametrize("params", [
    {},
    {"reg_linear": 0.5, "linear_features": np.arange(20)},
    # (corrective steps group by group, squared loss: the classifier's test has them ungrouped)
    {"interaction_groups": [np.arange(0, 10), np.arange(10, 30)], "corrective_steps": 1,
     "max_iter": 4},
])
def test_regressor_equals_in_memory(client, params):
    X, y = _problem()
    sw = np.random.default_rng(1).uniform(0.5, 2.0, X.shape[0])
    est = ConvexFMRegressor(**{"trace_bound": 3.0, "max_iter": 8, "tol": 0, "random_state": 0,
                               **params})
    ref = clone(est).fit(X, y, sample_weight=sw)
    m = fit_convex(clone(est), *_sparse_chunks(X, y, (170, 0, 200, 130), sw), client=client)
    assert_same_fit(m, ref, X)
    # and it learned something: the training RMSE below that of the mean
    assert ref.history_["train"][-1] < 0.8 * np.std(y)


def test_classifier_equals_in_memory(client):
    X, y = _problem(seed=2)
    labels = np.where(y > np.median(y), "hi", "lo")
    est = ConvexFMClassifier(trace_bound=3.0, max_iter=6, tol=0, random_state=3)
    ref = clone(est).fit(X, labels)
    m = fit_convex(clone(est), *_sparse_chunks(X, labels, (250, 250)), client=client)
    assert list(m.classes_) == list(ref.classes_)
    assert_same_fit(m, ref, X)
    np.testing.assert_array_equal(m.predict(X), ref.predict(X))
    assert ref.history_["train"][-1] < 0.35  # error rate well under the 0.5 of a coin


def test_warm_start_continues_like_fit(client):
    X, y = _problem(seed=4)
    est = ConvexFMRegressor(trace_bound=3.0, max_iter=4, tol=0, warm_start=True, random_state=0)
    ref = clone(est).fit(X, y).fit(X, y)
    m = clone(est).fit(X, y)
    fit_convex(m, *_sparse_chunks(X, y, (200, 300)), client=client)
    assert_same_fit(m, ref, X)


def test_empty_partition_changes_nothing(client):
    """Partitions (300, 0, 200) and (500,) give the same model as each other and in memory."""
    X, y = _problem(seed=5)
    est = ConvexFMRegressor(trace_bound=3.0, max_iter=5, tol=0, random_state=0)
    a = fit_convex(clone(est), *_sparse_chunks(X, y, (300, 0, 200)), client=client)
    b = fit_convex(clone(est), *_sparse_chunks(X, y, (500,)), client=client)
    assert_same_fit(a, b, X)
    assert_same_fit(a, clone(est).fit(X, y), X)


def test_different_widths_refused(client):
    X, y = _problem(seed=6)
    parts = [dask.delayed((X[:250], y[:250])),
             dask.delayed((sp.hstack([X[250:], sp.csr_matrix((250, 3))]).tocsr(), y[250:]))]
    with pytest.raises(ValueError, match=r"different widths \[30, 33\]"):
        fit_convex(ConvexFMRegressor(max_iter=2), parts, client=client)


def test_failure_leaves_the_estimator_as_it_was(client):
    X, y = _problem(seed=7)
    est = ConvexFMRegressor(trace_bound=3.0, max_iter=3, tol=0, warm_start=True, random_state=0)
    fit_convex(est, *_sparse_chunks(X, y, (250, 250)), client=client)
    before = _snapshot(est)
    bad = X.copy()
    bad.data[-1] = np.nan  # in the last partition, found on its worker
    with pytest.raises(ValueError, match=r"NaN or infinity \(partition 1\)"):
        fit_convex(est, *_sparse_chunks(bad, y, (250, 250)), client=client)
    assert_unchanged(before, est)
    # wider data: n_features_in_ is reset before the solver, then the eval_set (of the old
    # width) is refused; the reset must be undone
    wider = sp.hstack([X, sp.csr_matrix((500, 2))]).tocsr()
    with pytest.raises(ValueError, match="features"):
        fit_convex(est, *_sparse_chunks(wider, y, (250, 250)), eval_set=(X[:50], y[:50]),
                   client=client)
    assert_unchanged(before, est)
    # an estimator that is not a convex FM
    with pytest.raises(TypeError, match="ConvexFMRegressor"):
        fit_convex(FMRegressor(), *_sparse_chunks(X, y, (500,)), client=client)


def test_distributed_fit_dispatches_convex_fms_with_files(client, tmp_path):
    """fmlearn.distributed.fit(ConvexFM..., read_svmlight(files)) is fit_convex: a file a
    partition read on the workers, equal to the in-memory fit of the rows; files of different
    widths (no n_features) refused; checkpoint= refused clearly."""
    from fmlearn import distributed as fd
    from fmlearn.datasets import save_svmlight

    X, y = _problem(seed=9)
    paths = []
    for i, (a, b) in enumerate(((0, 200), (200, 500))):
        paths.append(str(tmp_path / f"part{i}.libfm"))
        save_svmlight(X[a:b], y[a:b], paths[-1])
    est = ConvexFMRegressor(trace_bound=3.0, max_iter=5, tol=0, random_state=0)
    m = fd.fit(clone(est), fd.read_svmlight(paths, n_features=30, zero_based=True),
               client=client)
    # the text files keep 16 significant digits: compare with the rows read back
    from fmlearn.datasets import load_svmlight

    parts = [load_svmlight(p, n_features=30, zero_based=True) for p in paths]
    Xr, yr = sp.vstack([p[0] for p in parts]).tocsr(), np.concatenate([p[1] for p in parts])
    assert_same_fit(m, clone(est).fit(Xr, yr), Xr)
    narrow = str(tmp_path / "narrow.libfm")
    save_svmlight(X[:100, :20], y[:100], narrow)
    with pytest.raises(ValueError, match="different widths"):
        fd.fit(clone(est), fd.read_svmlight([paths[0], narrow], zero_based=True),
               client=client)
    with pytest.raises(ValueError, match="checkpoint= is not supported for the convex FM"):
        fd.fit(clone(est), fd.read_svmlight(paths, n_features=30, zero_based=True),
               client=client, checkpoint=str(tmp_path / "ck"))
