"""fmlearn's side of the side-by-side harness: one measurement per fresh process.

Run by ``sbs.py`` with the Python of the fmlearn environment under test (``--fmlearn-python``,
or another checkout's venv with ``--also``), never imported. Each mode prints one line
``SBS-RESULT {json}`` with what it measured inside the process (CPU seconds from
``time.process_time``, wall seconds from ``time.perf_counter``); the harness adds what it
measures from outside (the whole process's CPU, wall and peak memory).

Modes::

    fit     --train F --test F --out PRED --params JSON [--groups META]
    epochs  --train F --params JSON --epochs E
    online  --stream NPZ --learner LABEL --task r|c [--max-rows N] [--batch B]
    compile
    memory  --rows N --users U --items I --params JSON

``fit``: read the two libFM files with fmlearn's reader, load the compiled kernels with a tiny
fit of the same configuration (the numba cache; on a cold cache this compiles), fit, predict
the test file and write the predictions one per line (unclipped by the harness: the estimator
clips to the training range as libFM does). Reported apart: ``import_cpu``, ``read_cpu``,
``kernels_cpu``, ``fit_cpu`` / ``fit_wall`` (learning only), ``predict_cpu``.

``epochs``: the marginal cost of one epoch: fits of 1 and 1 + E epochs on the same rows,
``epoch_cpu = (CPU(1 + E) - CPU(1)) / E`` (set-up such as validation and duplicate merging
cancels out), and the median ``history_["iter_time"]``.

``online``: one online learner predict-then-learn over a stream (``evaluate_prequential``),
compiled beforehand on a throw-away copy; ``learn_cpu`` and ``rows_per_s_cpu``.

``compile``: the first call of each family's kernels (tiny fit + predict), CPU seconds each;
run it with an empty ``NUMBA_CACHE_DIR`` for the cold-cache cost and again for the warm one.

``memory``: peak memory of one fit above the process's level after imports, data and
kernels: ``traced_mb`` (tracemalloc's peak, NumPy buffers included) and ``hwm_mb`` (the rise
of ``VmHWM`` after resetting it through ``/proc/self/clear_refs``).
"""

import time

_CPU0 = time.process_time()

import inspect  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

from _sbs_child import files_mode, parser, report  # noqa: E402


class Clock:
    """CPU and wall seconds of consecutive phases."""

    def __init__(self):
        self.cpu, self.wall = time.process_time(), time.perf_counter()

    def lap(self):
        cpu, wall = time.process_time(), time.perf_counter()
        out = (cpu - self.cpu, wall - self.wall)
        self.cpu, self.wall = cpu, wall
        return out


def _read_pair(train, test):
    import numpy as np
    import scipy.sparse as sp

    from fmlearn.datasets import load_svmlight

    X, y = load_svmlight(train, zero_based=True, dtype=np.float64)
    if test is None:
        return X, y, None, None
    Xt, yt = load_svmlight(test, zero_based=True, dtype=np.float64)
    d = max(X.shape[1], Xt.shape[1])  # libFM sizes the model for both files

    def widen(A):
        return sp.csr_matrix((A.data, A.indices, A.indptr), shape=(A.shape[0], d))

    return widen(X), y, widen(Xt), yt


def _estimator(params, groups=None):
    from fmlearn import FMRegressor

    params = {"n_jobs": 1, **params}
    if groups is not None:
        if "groups" not in FMRegressor().get_params():
            report({"unsupported": "FMRegressor has no groups= parameter"})
            sys.exit(3)
        params["groups"] = groups
    return FMRegressor(**params)


def mode_fit(a):
    import numpy as np

    from fmlearn import FMRegressor  # noqa: F401  (what the fit below needs)
    from fmlearn.datasets import load_svmlight  # noqa: F401

    rec = {"startup_cpu": _CPU0, "import_cpu": time.process_time() - _CPU0}
    clock = Clock()
    X, y, Xt, _ = _read_pair(a.train, a.test)
    rec["read_cpu"] = clock.lap()[0]
    params = json.loads(a.params)
    groups = np.loadtxt(a.groups, dtype=np.int64) if a.groups else None
    small = _estimator({**params, "n_iter": 2}, groups).fit(X[:200], y[:200])
    small.predict(Xt[:10])
    rec["kernels_cpu"] = clock.lap()[0]
    est = _estimator(params, groups)
    est.fit(X, y)
    rec["fit_cpu"], rec["fit_wall"] = clock.lap()
    pred = est.predict(Xt)
    rec["predict_cpu"] = clock.lap()[0]
    np.savetxt(a.out, pred, fmt="%.12g")
    rec["n_train"], rec["n_features"] = int(X.shape[0]), int(X.shape[1])
    report(rec)


def mode_epochs(a):
    clock = Clock()
    import numpy as np

    X, y, _, _ = _read_pair(a.train, None)
    rec = {"read_cpu": clock.lap()[0], "n_train": int(X.shape[0]), "n_features": int(X.shape[1])}
    params = json.loads(a.params)
    _estimator({**params, "n_iter": 1}).fit(X[:200], y[:200]).predict(X[:10])
    rec["kernels_cpu"] = clock.lap()[0]
    rec["hwm_read_mb"] = _status_mb("VmHWM")  # the peak so far (the reset below drops it)
    rss = _reset_peak()
    # The process's first fit pays the first touch of every page it allocates; a later fit
    # reuses pages the process has freed, so its set-up is cheaper (8,000,000 rows: by
    # 0.2-0.7 CPU s). The epoch is the difference of two later fits (1 and 1 + E sweeps), the
    # first fit's set-up its CPU less one epoch, a later fit's likewise.
    _estimator({**params, "n_iter": 1}).fit(X, y)
    first_cpu, _ = clock.lap()
    _estimator({**params, "n_iter": 1}).fit(X, y)
    one_cpu, one_wall = clock.lap()
    est = _estimator({**params, "n_iter": 1 + a.epochs}).fit(X, y)
    more_cpu, more_wall = clock.lap()
    if rss is not None:  # the fits' peak above the process with its rows (Linux)
        rec["fit_peak_mb"] = _status_mb("VmHWM") - rss
    rec["epoch_cpu"] = (more_cpu - one_cpu) / a.epochs
    rec["epoch_wall"] = (more_wall - one_wall) / a.epochs
    rec["setup_cpu"] = first_cpu - rec["epoch_cpu"]
    rec["setup_later_cpu"] = one_cpu - rec["epoch_cpu"]
    rec["iter_time_median"] = float(np.median(est.history_["iter_time"]))
    report(rec)


# -- online learners --------------------------------------------------------------------------
def online_learners(task, d):
    """label -> (factory, row limit) of the fmlearn online learners for a task."""
    import fmlearn

    reg = task == "r"
    ccfm = fmlearn.CCFMRegressor if reg else fmlearn.CCFMClassifier
    fm = fmlearn.OnlineFMRegressor if reg else fmlearn.OnlineFMClassifier
    cfm = fmlearn.OnlineCFMRegressor if reg else fmlearn.OnlineCFMClassifier
    sgd = fmlearn.FMRegressor if reg else fmlearn.FMClassifier
    delta = 30.0 if reg else 300.0
    slow = None if d < 200 else 5000  # projections on d = 2625 cost milliseconds per round
    return {
        "OCCFM": (lambda: ccfm("ocg", trace_bound=delta, gamma_power=1.0), None),
        "OCCFM eig_max_iter=0": (
            lambda: ccfm("ocg", trace_bound=delta, gamma_power=1.0, eig_max_iter=0), None),
        "CCFM-OGD": (lambda: ccfm("ogd", trace_bound=delta), slow),
        "CCFM-PA": (lambda: ccfm("pa", trace_bound=delta), slow),
        "CCFM-FTRL": (lambda: ccfm("ftrl", trace_bound=delta), slow),
        "FM-FTRL": (lambda: fm("ftrl", n_factors=8, random_state=0), None),
        "FM-OGD": (lambda: fm("ogd", n_factors=8, random_state=0), None),
        "FM-PA": (lambda: fm("pa", n_factors=8, random_state=0), None),
        "FM-SGD": (lambda: sgd(8, solver="sgd", random_state=0, n_jobs=1), None),
        "CFM-FTRL": (lambda: cfm("ftrl", trace_bound=delta), slow),
    }


def mode_online(a):
    import numpy as np
    import scipy.sparse as sp

    from fmlearn import evaluate_prequential

    z = np.load(a.stream)
    y = z["y"]
    X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=(y.shape[0], int(z["d"])))
    factory, limit = online_learners(a.task, X.shape[1])[a.learner]
    n = min(X.shape[0], limit or X.shape[0], a.max_rows or X.shape[0])
    X, y = X[:n], y[:n]
    metrics = ["rmse"] if a.task == "r" else ["error_rate", "auc"]
    classes = None if a.task == "r" else np.unique(y)
    clock = Clock()
    warm = factory()
    if not hasattr(warm, "_prequential"):  # FMRegressor(solver="sgd"): partial_fit in batches
        kw = {} if a.task == "r" else {"classes": classes}
        warm.partial_fit(X[:200], y[:200], **kw)
        compile_cpu = clock.lap()[0]
        est = factory()
        for start in range(0, n, a.batch):
            est.partial_fit(X[start:start + a.batch], y[start:start + a.batch], **kw)
        learn_cpu, learn_wall = clock.lap()
        report({"rows": n, "compile_cpu": compile_cpu, "learn_cpu": learn_cpu,
                "learn_wall": learn_wall, "rows_per_s_cpu": n / learn_cpu})
        return
    kw = {}
    if "warm_up" in inspect.signature(evaluate_prequential).parameters:
        kw["warm_up"] = False  # compiled just below, outside the timing
    evaluate_prequential(warm, (X[:200], y[:200]), metrics=metrics, batch_size=200,
                         classes=classes, **kw)
    compile_cpu = clock.lap()[0]
    res = evaluate_prequential(factory(), (X, y), metrics=metrics, batch_size=a.batch,
                               classes=classes, **kw)
    learn_cpu, learn_wall = clock.lap()
    rec = {"rows": n, "compile_cpu": compile_cpu, "learn_cpu": learn_cpu,
           "learn_wall": learn_wall, "rows_per_s_cpu": n / learn_cpu,
           "rows_per_s_elapsed": float(res.rows_per_second)}
    rec.update({f"prequential_{k}": float(v) for k, v in res.metrics.items()})
    report(rec)


# -- first-call compile cost ------------------------------------------------------------------
def mode_compile(a):
    clock = Clock()
    import numpy as np
    import scipy.sparse as sp

    import fmlearn
    from fmlearn import CCFMRegressor, FMRegressor, OnlineFMRegressor  # noqa: F401

    rec = {"import_cpu": clock.lap()[0]}  # the classes, their modules, numba: not compiling
    rng = np.random.default_rng(0)
    X = sp.random(60, 12, density=0.3, format="csr", random_state=0)
    y = 1.0 + 4.0 * rng.random(60)
    for solver in ("sgd", "als", "mcmc"):
        fmlearn.FMRegressor(4, solver=solver, n_iter=2, random_state=0, n_jobs=1).fit(
            X, y).predict(X)
        rec[f"fm_{solver}_cpu"] = clock.lap()[0]
    fmlearn.OnlineFMRegressor("ftrl", n_factors=4, random_state=0).partial_fit(X, y).predict(X)
    rec["online_fm_ftrl_cpu"] = clock.lap()[0]
    fmlearn.CCFMRegressor("ocg", trace_bound=10.0).partial_fit(X, y).predict(X)
    rec["ccfm_ocg_cpu"] = clock.lap()[0]
    report(rec)


# -- memory above the baseline ----------------------------------------------------------------
def _status_mb(key):
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def _reset_peak():
    """Reset the process's peak resident size (``VmHWM := VmRSS``, Linux) after a garbage
    collection; returns the resident MB (None where this is not available)."""
    import gc

    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return None
    return _status_mb("VmRSS")


def mode_memory(a):
    import gc
    import tracemalloc

    from fmlearn.datasets import make_recommendation

    data = make_recommendation(a.users, a.items, a.rows, rank=8, random_state=0)
    X, y = data.X.tocsr(), data.y
    del data
    params = json.loads(a.params)
    _estimator({**params, "n_iter": 1}).fit(X[:200], y[:200]).predict(X[:10])
    gc.collect()
    with open("/proc/self/clear_refs", "w") as fh:  # VmHWM := VmRSS
        fh.write("5")
    base = _status_mb("VmRSS")
    tracemalloc.start()
    est = _estimator(params).fit(X, y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    hwm = _status_mb("VmHWM")
    k = est.V_.shape[1]
    report({"rows": int(X.shape[0]), "n_features": int(X.shape[1]), "nnz": int(X.nnz),
            "dk": int(X.shape[1] * k), "data_mb": (X.data.nbytes + X.indices.nbytes
                                                   + X.indptr.nbytes + y.nbytes) / 2**20,
            "traced_mb": peak / 2**20, "hwm_mb": hwm - base, "baseline_rss_mb": base})


def main(argv=None):
    p, sub = parser(__doc__)
    s = files_mode(sub, "fit")
    s.add_argument("--params", required=True)
    s.add_argument("--groups", default=None)
    s = sub.add_parser("epochs")
    s.add_argument("--train", required=True)
    s.add_argument("--params", required=True)
    s.add_argument("--epochs", type=int, default=5)
    s = sub.add_parser("online")
    s.add_argument("--stream", required=True)
    s.add_argument("--learner", required=True)
    s.add_argument("--task", choices=["r", "c"], required=True)
    s.add_argument("--max-rows", type=int, default=None)
    s.add_argument("--batch", type=int, default=10000)
    sub.add_parser("compile")
    s = sub.add_parser("memory")
    s.add_argument("--rows", type=int, required=True)
    s.add_argument("--users", type=int, required=True)
    s.add_argument("--items", type=int, required=True)
    s.add_argument("--params", required=True)
    a = p.parse_args(argv)
    {"fit": mode_fit, "epochs": mode_epochs, "online": mode_online, "compile": mode_compile,
     "memory": mode_memory}[a.mode](a)


if __name__ == "__main__":
    main()
