"""fmlearn.distributed.fit: exact data-parallel ALS / MCMC of the classic FM on a local cluster
of 2 worker processes. The fit equals the in-memory fit (same random_state) up to summation
order; a killed worker does not change it; a killed client resumes from its checkpoint and
ends bit-identical; bad input fails clearly and leaves the estimator as it was."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn import FMClassifier, FMRegressor

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from fmlearn import distributed as fd  # noqa: E402
from fmlearn.distributed import _fm  # noqa: E402

RTOL = 1e-8
N_USERS, N_ITEMS, N_CTX = 40, 25, 5
D = N_USERS + N_ITEMS + N_CTX


def one_hot(n, seed=0):
    """User / item / context one-hot rows (three colour classes) and a low-rank target."""
    rng = np.random.default_rng(seed)
    u, i, c = rng.integers(0, N_USERS, n), rng.integers(0, N_ITEMS, n), rng.integers(0, N_CTX, n)
    cols = np.column_stack([u, N_USERS + i, N_USERS + N_ITEMS + c]).ravel()
    X = sp.csr_matrix((np.ones(3 * n), cols, np.arange(0, 3 * n + 1, 3)), shape=(n, D))
    a, b = rng.standard_normal((N_USERS, 2)), rng.standard_normal((N_ITEMS, 2))
    y = 3.0 + np.sum(a[u] * b[i], axis=1) + 0.3 * c + 0.1 * rng.standard_normal(n)
    return X, y


def dask_rows(X, y, chunks, sw=None):
    chunks = (tuple(chunks),)
    out = [da.from_array(X, chunks=(chunks[0], (X.shape[1],)), asarray=False),
           da.from_array(y, chunks=chunks)]
    if sw is not None:
        out.append(da.from_array(sw, chunks=chunks))
    return out


def kill_worker(client, victim=None):
    """SIGKILL the worker process ``victim`` (an address; default: the first one) and wait (at
    most 60 s, no assertion on the time) until the scheduler has seen it go; returns it."""
    pids = client.run(os.getpid)
    victim = sorted(pids)[0] if victim is None else victim
    os.kill(pids[victim], signal.SIGKILL)
    deadline = time.time() + 60
    while victim in client.scheduler_info()["workers"] and time.time() < deadline:
        time.sleep(0.05)
    return victim


@contextlib.contextmanager
def two_workers():
    """A client of a LocalCluster of 2 single-threaded worker processes."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def client():
    with two_workers() as c:
        yield c


def assert_same_model(m, ref, rtol=RTOL):
    for name in ("w_", "V_"):
        a, b = getattr(m, name), getattr(ref, name)
        scale = max(np.max(np.abs(b)), 1e-300)
        assert np.max(np.abs(a - b)) <= rtol * scale, name
    assert m.w0_ == pytest.approx(ref.w0_, rel=rtol, abs=rtol)
    assert m.n_iter_ == ref.n_iter_


def test_als_equals_in_memory_with_weights_and_empty_partition(client):
    """ALS, sample weights (some 0), one empty partition: the in-memory fit to 1e-8."""
    X, y = one_hot(3000)
    sw = np.random.default_rng(1).integers(0, 3, 3000).astype(float)
    Xd, yd, wd = dask_rows(X, y, (900, 0, 1100, 1000), sw)
    kw = dict(n_factors=3, solver="als", n_iter=12, reg_linear=0.5, reg_pairwise=2.0,
              random_state=3)
    m = fd.fit(FMRegressor(**kw), Xd, yd, wd, client=client)
    ref = FMRegressor(**kw).fit(X, y, sample_weight=sw)
    assert_same_model(m, ref)
    assert m.y_range_ == ref.y_range_
    np.testing.assert_allclose(m.predict(X), ref.predict(X), rtol=1e-8)
    # Communication per round is O(class size), not O(rows): the round arguments sent in
    # all (per partition) are below the bytes of one copy of the rows' cache per round.
    info = m.distributed_
    assert info["bytes_sent"] / info["rounds"] < 8 * 3 * 3000 / 4


@pytest.mark.parametrize("groups, relax, n_iter", [
    (None, 0.0, 20), ([N_USERS, N_ITEMS, N_CTX], 0.0, 20), ([N_USERS, N_ITEMS, N_CTX], -0.9, 40)],
    ids=["plain", "groups", "groups-overrelaxed"])
def test_mcmc_equals_in_memory_chain(client, groups, relax, n_iter):
    """MCMC regression: the same chain as in memory (last sample, kept samples,
    hyper-parameters) to 1e-8, with and without feature groups, and with draws over-relaxed
    once the chain has settled (at the same sweep, 22 here: 18 over-relaxed sweeps)."""
    X, y = one_hot(2500, seed=2)
    Xd, yd = dask_rows(X, y, (800, 900, 800))
    kw = dict(n_factors=3, solver="mcmc", n_iter=n_iter, n_burn_in=5, groups=groups,
              overrelaxation=relax, random_state=7)
    m = fd.fit(FMRegressor(**kw), Xd, yd, client=client)
    ref = FMRegressor(**kw).fit(X, y)
    assert_same_model(m, ref)
    for name in ("samples_w0_", "samples_w_", "samples_V_"):
        np.testing.assert_allclose(getattr(m, name), getattr(ref, name), rtol=RTOL,
                                   atol=RTOL * np.max(np.abs(getattr(ref, name))))
    for key in ("alpha", "lambda_w", "mu_w", "lambda_v", "mu_v"):
        np.testing.assert_allclose(m.chain_[key], ref.chain_[key], rtol=1e-7, atol=1e-9)
    assert m.chain_["t"] == ref.chain_["t"] == n_iter
    assert m.chain_["settled_at"] == ref.chain_["settled_at"]
    if relax:
        assert 0 < ref.chain_["settled_at"] < n_iter
    np.testing.assert_allclose(m.predict(X), ref.predict(X), rtol=1e-8)


def test_classifier(client, tmp_path):
    """Logistic ALS equals the in-memory fit; the probit MCMC (latent targets drawn on the
    workers: another chain) reaches the in-memory error rate; the result saves and loads."""
    X, y = one_hot(2400, seed=4)
    labels = np.where(y > np.median(y), "hi", "lo")
    Xd, yd = dask_rows(X, labels, (1200, 1200))
    kw = dict(n_factors=2, solver="als", n_iter=8, reg_linear=1.0, reg_pairwise=1.0,
              random_state=0)
    m = fd.fit(FMClassifier(**kw), Xd, yd, client=client)
    ref = FMClassifier(**kw).fit(X, labels)
    assert list(m.classes_) == list(ref.classes_)
    assert_same_model(m, ref)
    kw = dict(n_factors=2, solver="mcmc", n_iter=30, random_state=0)
    mc = fd.fit(FMClassifier(**kw), Xd, yd, client=client)
    err = np.mean(mc.predict(X) != labels)
    ref_err = np.mean(FMClassifier(**kw).fit(X, labels).predict(X) != labels)
    assert err <= ref_err + 0.03 and err < 0.25
    path = mc.save(tmp_path / "m.fmz")
    from fmlearn import load

    np.testing.assert_array_equal(load(path).predict_proba(X), mc.predict_proba(X))


@pytest.mark.parametrize("channel", ["socket", "dask"])
def test_killed_worker_does_not_change_the_result(client, monkeypatch, channel):
    """A worker process killed (SIGKILL) in sweep 4: its partitions' rows are recomputed from
    the source, every cache rebuilt from the model of the sweep's start, the sweep rerun with
    the same random numbers; the chain equals the in-memory one to 1e-8. Whether the rounds
    go over the sockets to the workers or through Dask's connections."""
    if channel == "dask":
        monkeypatch.setattr(_fm._Cluster, "_connect", lambda self, addr, actor: None)
    X, y = one_hot(2000, seed=5)
    Xd, yd = dask_rows(X, y, (500, 500, 500, 500))
    kw = dict(n_factors=2, solver="mcmc", n_iter=8, n_burn_in=2, random_state=1)
    original = _fm._Sweeper._sweep
    killed = []

    def sweep(self, cluster, pending):
        if self.chain.t == 4 and not killed:
            killed.append(kill_worker(client, cluster.where[0]))
        return original(self, cluster, pending)

    monkeypatch.setattr(_fm._Sweeper, "_sweep", sweep)
    m = fd.fit(FMRegressor(**kw), Xd, yd, client=client)
    assert killed and m.distributed_["restarts"] >= 1
    assert m.distributed_["messages"][channel] > 0
    assert_same_model(m, FMRegressor(**kw).fit(X, y))
    client.wait_for_workers(2, timeout=60)


def test_rounds_over_sockets_or_dask_give_the_same_model(client, monkeypatch):
    """A round is one message per worker (not a task per partition): over a socket to the
    worker's Rounds actor, or, when there is none (TLS, unreachable listener), through Dask's
    connection. Both give the same model bit for bit (the sums are added in partition order
    either way), and it equals the in-memory fit to 1e-8."""
    X, y = one_hot(2000, seed=6)
    Xd, yd = dask_rows(X, y, (700, 600, 700))
    kw = dict(n_factors=2, solver="als", n_iter=4, reg_linear=1.0, reg_pairwise=1.0,
              random_state=2)
    fast = fd.fit(FMRegressor(**kw), Xd, yd, client=client)
    msgs = fast.distributed_["messages"]
    rounds = fast.distributed_["rounds"]
    assert msgs["dask"] == msgs["tasks"] == 0
    # over sockets the class rounds run between the workers: the client sends each worker
    # two messages a sweep (w0's round, then the passes), and two to connect them
    assert msgs["socket"] == 2 * 2 * (kw["n_iter"] + 1) and msgs["peer"] > 0
    monkeypatch.setattr(_fm._Cluster, "_connect", lambda self, addr, actor: None)
    slow = fd.fit(FMRegressor(**kw), Xd, yd, client=client)
    smsgs = slow.distributed_["messages"]
    assert smsgs["socket"] == smsgs["peer"] == 0
    assert slow.distributed_["rounds"] == rounds
    assert rounds <= smsgs["dask"] <= 2 * rounds  # one per worker holding partitions
    for name in ("w_", "V_"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name))
    assert fast.w0_ == slow.w0_
    assert_same_model(fast, FMRegressor(**kw).fit(X, y))


def _die_at_step(n):
    """Run in a worker: SIGKILL this worker process at its ``n``-th class step (the class
    rounds between the workers step the classes on the workers)."""
    from fmlearn.distributed import _fm_worker

    step = _fm_worker.class_step
    calls = [0]

    def dying(*args):
        calls[0] += 1
        if calls[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return step(*args)

    _fm_worker.class_step = dying


def test_worker_killed_in_the_rounds_between_workers(client):
    """A worker killed in the middle of a sweep's class rounds between the workers (its
    peer waits for its sums): the peer ends the sweep, the client restarts it from the
    sweep's start on fresh connections, and the chain equals the in-memory one to 1e-8."""
    X, y = one_hot(2000, seed=8)
    Xd, yd = dask_rows(X, y, (500, 500, 500, 500))
    kw = dict(n_factors=2, solver="mcmc", n_iter=8, n_burn_in=2, random_state=4)
    victim = sorted(client.scheduler_info()["workers"])[0]
    client.run(_die_at_step, 3 * 9 + 4, workers=[victim])  # sweep 4 (9 class rounds each)
    m = fd.fit(FMRegressor(**kw), Xd, yd, client=client)
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.scheduler_info()["workers"]
    assert m.distributed_["restarts"] >= 1 and m.distributed_["messages"]["peer"] > 0
    assert_same_model(m, FMRegressor(**kw).fit(X, y))


def test_rounds_between_workers_give_the_clients_model(client, solver="mcmc"):
    """The class rounds run between the workers (each adds all partitions' sums in partition
    order and steps the class on its copy of the model; one worker holds two partitions)
    give the model and the kept samples of rounds through the client bit for bit, with sample
    weights and feature groups (MCMC: the random numbers and hyper-parameters reach the
    workers; ALS: test_rounds_over_sockets_or_dask_give_the_same_model)."""
    X, y = one_hot(2000, seed=9)
    sw = np.random.default_rng(9).uniform(0.5, 2.0, X.shape[0])
    Xd, yd, swd = dask_rows(X, y, (700, 600, 700), sw)
    groups = np.repeat([0, 1, 2], [N_USERS, N_ITEMS, N_CTX])
    kw = dict(n_factors=3, solver=solver, n_iter=12, random_state=5, groups=groups)
    peers = fd.fit(FMRegressor(**kw), Xd, yd, swd, client=client)
    through = fd.fit(FMRegressor(**kw), Xd, yd, swd, client=client, rounds="client")
    assert peers.distributed_["messages"]["peer"] > 0
    assert through.distributed_["messages"]["peer"] == 0
    for name in ("w_", "V_"):
        np.testing.assert_array_equal(getattr(peers, name), getattr(through, name))
    assert peers.w0_ == through.w0_
    if solver == "mcmc":  # the kept samples too
        np.testing.assert_array_equal(peers.samples_V_, through.samples_V_)


@pytest.mark.parametrize("solver", ["als", "mcmc"])
def test_compact_rounds_give_the_full_rounds_model(client, monkeypatch, solver):
    """Compact rounds (each worker keeps a copy of the model and receives only the new values
    of the class stepped last; one worker holds two partitions, so its copy must change once
    per round) give the model of full rounds (the client sends previous values, changes, the
    next factor's and the gathered class's values) bit for bit, with sample weights and
    feature groups, and fewer bytes."""
    X, y = one_hot(2000, seed=7)
    sw = np.random.default_rng(7).uniform(0.5, 2.0, X.shape[0])
    Xd, yd, swd = dask_rows(X, y, (700, 600, 700), sw)
    groups = np.repeat([0, 1, 2], [N_USERS, N_ITEMS, N_CTX])
    kw = dict(n_factors=3, solver=solver, n_iter=12, random_state=3, groups=groups)
    compact = fd.fit(FMRegressor(**kw), Xd, yd, swd, client=client)
    monkeypatch.setattr(_fm._Sweeper, "compact", False)
    full = fd.fit(FMRegressor(**kw), Xd, yd, swd, client=client)
    for name in ("w_", "V_"):
        np.testing.assert_array_equal(getattr(compact, name), getattr(full, name))
    assert compact.w0_ == full.w0_
    assert compact.distributed_["bytes_sent"] < full.distributed_["bytes_sent"] / 2


_CLIENT_SCRIPT = """
import sys, time
sys.path.insert(0, {tests!r})
from fmlearn import _checkpoint
from test_distributed_fm import resumable_fit

if {hang}:  # the first checkpoint written, the client hangs until it is killed
    write = _checkpoint.Checkpointer.write
    def hang(self, *a, **k):
        out = write(self, *a, **k)
        print("checkpoint", flush=True)
        time.sleep(600)
        return out
    _checkpoint.Checkpointer.write = hang
est = resumable_fit({directory!r})
est.save({out!r})
print("resumed_at", est.distributed_["resumed_at"], flush=True)
"""


def resumable_fit(directory):
    """The call of the killed-client test (local scheduler: the client is the process)."""
    X, y = one_hot(1500, seed=6)
    Xd, yd = dask_rows(X, y, (700, 800))
    est = FMRegressor(2, solver="mcmc", n_iter=12, n_burn_in=2, random_state=4)
    with dask.config.set(scheduler="synchronous"):
        return fd.fit(est, Xd, yd, checkpoint=directory, checkpoint_every=5)


def _client_script(tmp_path, hang):
    script = _CLIENT_SCRIPT.format(tests=os.path.dirname(__file__), hang=hang,
                                   directory=str(tmp_path / "ck"), out=str(tmp_path / "ck.fmz"))
    return [sys.executable, "-c", textwrap.dedent(script)]


def test_killed_client_resumes_bit_identical(tmp_path):
    """The client (a subprocess) is SIGKILLed after its first checkpoint; the same call run
    again resumes from sweep 5 and ends bit-identical to an uninterrupted run."""
    from fmlearn import load

    proc = subprocess.Popen(_client_script(tmp_path, True), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "checkpoint"
        assert os.path.exists(tmp_path / "ck" / "checkpoint.fmz")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    out = subprocess.run(_client_script(tmp_path, False), capture_output=True, text=True,
                         check=True).stdout
    assert "resumed_at 5" in out
    assert not os.path.exists(tmp_path / "ck" / "checkpoint.fmz")  # removed at the end
    b = resumable_fit(tmp_path / "plain")
    assert b.distributed_["resumed_at"] == 0
    a = load(tmp_path / "ck.fmz")
    for name in ("w_", "V_", "samples_w0_", "samples_w_", "samples_V_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.w0_ == b.w0_ and a.chain_ == b.chain_


def _bad_block(X):
    # A CSR block whose stored column index is outside the matrix (would crash a kernel).
    bad = X.copy()
    bad.indices = bad.indices.copy()
    bad.indices[4] = 10 * D
    return bad


@pytest.mark.parametrize("case", ["malformed", "nan_y", "widths", "labels"])
def test_bad_input_fails_clearly_and_atomically(client, case):
    """Bad input is refused by the validation layer on the workers with a message naming
    the problem and the partition; the fitted estimator is left exactly as it was."""
    X, y = one_hot(1000, seed=8)
    est = FMRegressor(2, solver="als", n_iter=3, random_state=0)
    if case == "labels":
        est = FMClassifier(2, solver="als", n_iter=3, random_state=0)
        yy = np.where(y > 3, 1, 0)
        est.fit(X, yy)
        y = yy.copy()
        y[7] = 2
    else:
        est.fit(X, y)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(est).items()}
    parts = [X[:500], X[500:]]
    ys = [y[:500], y[500:]]
    if case == "malformed":
        parts[1] = _bad_block(parts[1])
        match = "partition 1.*column index"
    elif case == "nan_y":
        ys[0] = ys[0].astype(float)
        ys[0][3] = np.nan
        match = "NaN.*partition 0"
    elif case == "widths":
        parts[1] = parts[1][:, :D - 1]
        match = "partition 1 has 69 columns.*same width"
    else:
        match = "exactly two classes"
    Xd = da.concatenate([da.from_delayed(dask.delayed(p), shape=(500, D), dtype=float,
                                         meta=sp.csr_matrix((0, D))) for p in parts])
    yd = da.concatenate([da.from_array(v, chunks=500) for v in ys])
    with pytest.raises(ValueError, match=match):
        fd.fit(est, Xd, yd, client=client)
    after = vars(est)
    assert set(after) == set(before)
    for k, v in before.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(after[k], v)
        else:
            assert after[k] == v


def test_svmlight_partitions_read_on_the_workers(client, tmp_path):
    """read_svmlight: one partition per file, read on the workers; files of different widths
    refused unless n_features is given; with it, the fit equals the in-memory one."""
    from sklearn.datasets import dump_svmlight_file

    X, y = one_hot(1200, seed=9)
    paths = []
    for a, b in ((0, 600), (600, 1200)):
        paths.append(str(tmp_path / f"part{a}.svm"))
        dump_svmlight_file(X[a:b], y[a:b], paths[-1], zero_based=False)
    # The rows of the second file never use the last feature: it is narrower.
    Xn = X.tolil()
    Xn[600:, D - 1] = 0
    Xn = Xn.tocsr()
    Xn.eliminate_zeros()
    dump_svmlight_file(Xn[600:], y[600:], paths[1], zero_based=False)
    with pytest.raises(ValueError, match="different widths"):
        fd.fit(FMRegressor(2, solver="als", n_iter=2), fd.read_svmlight(paths), client=client)
    kw = dict(n_factors=2, solver="als", n_iter=5, reg_linear=1.0, reg_pairwise=1.0,
              random_state=0)
    m = fd.fit(FMRegressor(**kw), fd.read_svmlight(paths, n_features=D), client=client)
    Xm = sp.vstack([X[:600], Xn[600:]]).tocsr()
    assert_same_model(m, FMRegressor(**kw).fit(Xm, y))


@pytest.mark.parametrize("bad, problem", [("4 1:1 2:nan", "NaN or infinite"),
                                          ("4 0:1 2:1", "Invalid index 0")])
def test_svmlight_bad_line_names_file_and_line(client, tmp_path, bad, problem):
    """A file is read on its worker by fmlearn's validating reader: a NaN value or an index
    outside the file's base in one part file is refused naming that file and line."""
    good, broken = tmp_path / "part0.svm", tmp_path / "part1.svm"
    good.write_text("3 1:1 5:1\n2 2:1 4:1\n")
    broken.write_text("1 1:1 4:1\n2 3:1 5:1\n" + bad + "\n")
    est = FMRegressor(2, solver="als", n_iter=2)
    with pytest.raises(ValueError, match=f"part1.svm'?, line 3.*{problem}"):
        fd.fit(est, fd.read_svmlight([str(good), str(broken)], n_features=6), client=client)
    assert not hasattr(est, "w_")


def test_rejects_other_estimators_and_solvers():
    X, y = one_hot(100)
    Xd, yd = dask_rows(X, y, (100,))
    with pytest.raises(ValueError, match="solver='sgd' has no per-group"):
        fd.fit(FMRegressor(solver="sgd", groups=[N_USERS, N_ITEMS, N_CTX]), Xd, yd)
    from fmlearn import GFMRegressor

    with pytest.raises(TypeError, match="FMRegressor or FMClassifier"):
        fd.fit(GFMRegressor(2), Xd, yd)
    with pytest.raises(TypeError, match="Dask array"):
        fd.fit(FMRegressor(solver="als"), X, y)


def test_rounds_other_than_workers_or_client_are_refused():
    X, y = one_hot(200, seed=1)
    Xd, yd = dask_rows(X, y, (100, 100))
    est = FMRegressor(n_factors=2, solver="als", n_iter=2)
    with pytest.raises(ValueError, match="rounds must be 'workers' or 'client'"):
        fd.fit(est, Xd, yd, rounds="peers")
    assert not hasattr(est, "w_")
