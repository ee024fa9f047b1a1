"""The Python peers' side of the side-by-side harness: myFM, River, Vowpal Wabbit.

Run by ``sbs.py`` with the peers' Python (``--peers-python`` / ``$FMLEARN_PEERS_PYTHON``), a
separate virtual environment: fmlearn never imports these packages. Each mode prints one line
``SBS-RESULT {json}``; CPU seconds come from ``time.process_time`` around the peer's own work.

Modes::

    myfm   --train F --test F --out PRED --rank K --n-iter N --n-kept S --seed S [--groups META]
    river  --stream NPZ --task r|c --rank K [--max-rows N]
    vw     --vw-file F --task r|c --rank K --rows N

``myfm``: ``myfm.MyFMRegressor(rank, init_stdev=0.1, random_seed)`` fitted by Gibbs sampling
(``n_iter`` sweeps, the last ``n_kept_samples`` kept; with ``--groups``, the per-feature
groups of a libFM ``-meta`` file as ``grouping``), then ``predict`` (the posterior mean) on
one thread; predictions are written unclipped (the harness clips every system alike).
``river``: ``facto.FMRegressor`` / ``FMClassifier`` (defaults), ``predict_one`` then
``learn_one`` per row. ``vw``: Vowpal Wabbit ``--lrq`` driven by its own parser on a text file;
its progressive loss is the prequential loss.
"""

import time

import numpy as np
from _sbs_child import files_mode, parser, report


def mode_myfm(a):
    import myfm
    import scipy.sparse as sp
    from sklearn.datasets import load_svmlight_file

    c0 = time.process_time()
    X, y = load_svmlight_file(a.train, zero_based=True)
    Xt, _ = load_svmlight_file(a.test, zero_based=True)
    d = max(X.shape[1], Xt.shape[1])
    X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d))
    Xt = sp.csr_matrix((Xt.data, Xt.indices, Xt.indptr), shape=(Xt.shape[0], d))
    kw = {}
    if a.groups:
        kw["grouping"] = np.loadtxt(a.groups, dtype=np.int64).tolist()[:d]
    c1 = time.process_time()
    w1 = time.perf_counter()
    model = myfm.MyFMRegressor(rank=a.rank, init_stdev=0.1, random_seed=a.seed)
    model.fit(X, y, n_iter=a.n_iter, n_kept_samples=a.n_kept, **kw)
    c2 = time.process_time()
    w2 = time.perf_counter()
    pred = model.predict(Xt, n_workers=1)
    c3 = time.process_time()
    np.savetxt(a.out, pred, fmt="%.12g")
    report({"read_cpu": c1 - c0, "fit_cpu": c2 - c1, "fit_wall": w2 - w1, "predict_cpu": c3 - c2,
            "version": myfm.__version__})


def mode_river(a):
    from river import __version__, facto

    z = np.load(a.stream)
    indptr, indices, data, y = z["indptr"], z["indices"], z["data"], z["y"]
    n = min(y.shape[0], a.max_rows or y.shape[0])
    rows = [{int(indices[p]): float(data[p]) for p in range(indptr[i], indptr[i + 1])}
            for i in range(n)]
    reg = a.task == "r"
    model = (facto.FMRegressor if reg else facto.FMClassifier)(n_factors=a.rank, seed=0)
    pred = np.empty(n)
    c0, w0 = time.process_time(), time.perf_counter()
    for i in range(n):
        x = rows[i]
        if reg:
            pred[i] = model.predict_one(x)
            model.learn_one(x, float(y[i]))
        else:
            pred[i] = model.predict_proba_one(x).get(True, 0.0)
            model.learn_one(x, bool(y[i] > 0))
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    rec = {"rows": n, "learn_cpu": cpu, "learn_wall": wall, "rows_per_s_cpu": n / cpu,
           "version": __version__}
    if reg:
        rec["prequential_rmse"] = float(np.sqrt(np.mean((np.clip(pred, 1, 5) - y[:n]) ** 2)))
    else:
        rec["prequential_error_rate"] = float(np.mean((pred > 0.5) != (y[:n] > 0)))
        rec["prequential_auc"] = _auc(y[:n] > 0, pred)
    report(rec)


def _auc(pos, score):
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(pos, score))


def mode_vw(a):
    from vowpalwabbit import pyvw

    lrq = f"ui{a.rank}" if a.task == "r" else f"ff{a.rank}"
    args = f"-d {a.vw_file} --lrq {lrq} -b 20 --quiet --holdout_off"
    if a.task == "c":
        args += " --loss_function logistic --binary"
    c0, w0 = time.process_time(), time.perf_counter()
    vw = pyvw.Workspace(args)
    vw.run_parser()
    loss = vw.get_sum_loss() / max(vw.get_weighted_examples(), 1.0)
    vw.finish()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    rec = {"rows": a.rows, "learn_cpu": cpu, "learn_wall": wall, "rows_per_s_cpu": a.rows / cpu,
           "lrq": lrq}
    if a.task == "r":
        rec["prequential_rmse"] = float(np.sqrt(loss))  # progressive squared loss
    else:
        rec["prequential_error_rate"] = float(loss)  # --binary: progressive 0/1 loss
    report(rec)


def main(argv=None):
    p, sub = parser(__doc__)
    s = files_mode(sub, "myfm")
    s.add_argument("--rank", type=int, default=8)
    s.add_argument("--n-iter", type=int, required=True)
    s.add_argument("--n-kept", type=int, required=True)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--groups", default=None)
    s = sub.add_parser("river")
    s.add_argument("--stream", required=True)
    s.add_argument("--task", choices=["r", "c"], required=True)
    s.add_argument("--rank", type=int, default=8)
    s.add_argument("--max-rows", type=int, default=None)
    s = sub.add_parser("vw")
    s.add_argument("--vw-file", required=True)
    s.add_argument("--task", choices=["r", "c"], required=True)
    s.add_argument("--rank", type=int, default=8)
    s.add_argument("--rows", type=int, required=True)
    a = p.parse_args(argv)
    {"myfm": mode_myfm, "river": mode_river, "vw": mode_vw}[a.mode](a)


if __name__ == "__main__":
    main()
