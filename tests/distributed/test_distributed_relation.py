"""fmlearn.distributed.fit with relation blocks (Rendle 2013): the row-level features
partitioned over 2 worker processes, the blocks on every worker; ALS and the MCMC regression
chain equal the in-memory fit on the same RelationData up to summation order; bad block
indices fail clearly, naming the partition, and leave the estimator as it was."""

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn import ConvexFMClassifier, FMClassifier, FMRegressor, RelationBlock, RelationData

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from fmlearn import distributed as fd  # noqa: E402

RTOL = 1e-8


def relational(n, seed=0):
    """Row-level one-hot context (4 values), a user block (id + 3 side features) and an item
    block (id + 2), with a low-rank target."""
    rng = np.random.default_rng(seed)
    nu, ni = 30, 20
    ctx = rng.integers(0, 4, n)
    X = sp.csr_matrix((np.ones(n), ctx, np.arange(n + 1)), shape=(n, 4))
    users = sp.hstack([sp.identity(nu), sp.random(nu, 3, density=0.5, random_state=rng)],
                      format="csr")
    items = sp.hstack([sp.identity(ni), sp.random(ni, 2, density=0.5, random_state=rng)],
                      format="csr")
    u, i = rng.integers(0, nu, n), rng.integers(0, ni, n)
    a, b = rng.standard_normal((nu, 2)), rng.standard_normal((ni, 2))
    y = 3.0 + np.sum(a[u] * b[i], axis=1) + 0.2 * ctx + 0.1 * rng.standard_normal(n)
    return X, u, users, i, items, y


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def _dask(X, u, i, y, chunks):
    ch = (tuple(chunks),)
    return (da.from_array(X, chunks=(ch[0], (X.shape[1],)), asarray=False),
            da.from_array(u, chunks=ch), da.from_array(i, chunks=ch),
            da.from_array(y, chunks=ch))


@pytest.mark.parametrize("solver", ["als", "mcmc"])
def test_equals_in_memory_relational_fit(client, solver):
    X, u, users, i, items, y = relational(1500)
    Xd, ud, idd, yd = _dask(X, u, i, y, (500, 0, 600, 400))
    kw = dict(n_factors=3, solver=solver, n_iter=12, random_state=3, init_stdev=0.1)
    if solver == "als":
        kw.update(reg_linear=0.5, reg_pairwise=1.0)
    else:
        kw.update(n_burn_in=3, groups=[4, 33, 22])
    m = fd.fit(FMRegressor(**kw), Xd, yd, client=client,
               relation_blocks=[(ud, users), (idd, items)])
    Xr = RelationData(X, [RelationBlock(u, users), RelationBlock(i, items)])
    ref = FMRegressor(**kw).fit(Xr, y)
    for name in ("w_", "V_"):
        a, b = getattr(m, name), getattr(ref, name)
        assert np.max(np.abs(a - b)) <= RTOL * np.max(np.abs(b)), name
    assert m.w0_ == pytest.approx(ref.w0_, rel=RTOL)
    assert m.relation_features_ == ref.relation_features_ == [4, 33, 22]
    np.testing.assert_allclose(m.predict(Xr), ref.predict(Xr), rtol=RTOL)
    # a round moves block rows' numbers, never the samples' row states
    info = m.distributed_
    assert info["bytes_sent"] / info["rounds"] < 8 * 3 * 1500 / 4


def test_classifier_learns_and_bad_indices_change_nothing(client):
    X, u, users, i, items, y = relational(1200, seed=1)
    labels = np.where(y > np.median(y), "hi", "lo")
    Xd, ud, idd, yd = _dask(X, u, i, labels, (600, 600))
    clf = fd.fit(FMClassifier(3, n_iter=15, random_state=0), Xd, yd, client=client,
                 relation_blocks=[(ud, users), (i, items)])  # in-memory indices too
    Xr = RelationData(X, [RelationBlock(u, users), RelationBlock(i, items)])
    assert (clf.predict(Xr) == labels).mean() > 0.8
    before = clf.V_.copy()
    bad = u.copy()
    bad[700] = 99
    with pytest.raises(ValueError, match=r"relation_blocks\[0\] \(partition 1\): row 100 has "
                                         r"block index 99, outside \[0, 30\)"):
        fd.fit(clf, Xd, yd, client=client,
               relation_blocks=[(da.from_array(bad, chunks=600), users), (idd, items)])
    np.testing.assert_array_equal(clf.V_, before)
    with pytest.raises(ValueError, match="checkpoints"):
        fd.fit(clf, Xd, yd, client=client, checkpoint="ck",
               relation_blocks=[(ud, users), (idd, items)])
    np.testing.assert_array_equal(clf.V_, before)
    # the convex FM has no relational solver: refused, not fitted on X alone
    with pytest.raises(TypeError, match="FMRegressor or FMClassifier"):
        fd.fit(ConvexFMClassifier(), Xd, yd, client=client,
               relation_blocks=[(ud, users), (idd, items)])
