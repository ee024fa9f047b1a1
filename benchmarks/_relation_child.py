"""One fit of ``bench_relation.py`` in a fresh process: fmlearn on relational data
(``fmlearn``), fmlearn on the same features expanded into one flat sparse matrix (``flat``),
or myFM with its relation blocks (``myfm``, run with the peers' Python).

Reads the split written by the harness (an ``.npz``: the date one-hot of the train and test
samples, the user and item blocks, each sample's user and item, the targets, the group
sizes), fits MCMC, predicts the test samples, writes the predictions to ``--out`` and prints
one result line (``_sbs_child.report``) with the fit's CPU and wall seconds and the test RMSE.
Standard library, NumPy and SciPy at the top, so that it runs in either environment.
"""

import json
import time

import numpy as np
import scipy.sparse as sp
from _sbs_child import parser, report


def _load(path):
    z = np.load(path)

    def csr(name):
        return sp.csr_matrix((z[f"{name}_data"], z[f"{name}_indices"], z[f"{name}_indptr"]),
                             shape=tuple(z[f"{name}_shape"]))

    return {"date_train": csr("date_train"), "date_test": csr("date_test"),
            "user": csr("user"), "item": csr("item"),
            "u_train": z["u_train"], "i_train": z["i_train"], "u_test": z["u_test"],
            "i_test": z["i_test"], "y_train": z["y_train"], "y_test": z["y_test"],
            "group_sizes": z["group_sizes"]}


def _clock():
    return time.process_time(), time.perf_counter()


def _since(t):
    return time.process_time() - t[0], time.perf_counter() - t[1]


def run_fmlearn(d, args, flat):
    from fmlearn import FMRegressor, RelationBlock, RelationData

    def data(part):
        u, i = d[f"u_{part}"], d[f"i_{part}"]
        return RelationData(d[f"date_{part}"], [RelationBlock(u, d["user"]),
                                                 RelationBlock(i, d["item"])])

    Xtr, Xte = data("train"), data("test")
    if flat:
        Xtr, Xte = Xtr.to_csr(), Xte.to_csr()
    params = json.loads(args.params)
    est = FMRegressor(n_factors=args.rank, solver="mcmc", n_iter=args.n_iter,
                      random_state=args.seed, groups=d["group_sizes"], **params)
    # the kernels compile (or load from numba's cache) outside the timed fit
    t = _clock()
    FMRegressor(n_factors=args.rank, solver="mcmc", n_iter=1, random_state=0,
                groups=d["group_sizes"], **params).fit(Xtr[:200], d["y_train"][:200]).predict(
        Xte[:10])
    kernels = _since(t)
    t = _clock()
    est.fit(Xtr, d["y_train"])
    fit = _since(t)
    t = _clock()
    pred = est.predict(Xte)
    predict = _since(t)
    return pred, fit, predict, {"kernels_cpu": kernels[0]}


def run_myfm(d, args):
    import myfm
    from myfm import RelationBlock

    blocks_tr = [RelationBlock(d["u_train"], d["user"]), RelationBlock(d["i_train"], d["item"])]
    blocks_te = [RelationBlock(d["u_test"], d["user"]), RelationBlock(d["i_test"], d["item"])]
    fm = myfm.MyFMRegressor(rank=args.rank, init_stdev=0.1, random_seed=args.seed)
    t = _clock()
    fm.fit(d["date_train"], d["y_train"], X_rel=blocks_tr, n_iter=args.n_iter,
           n_kept_samples=args.n_kept, group_shapes=[int(g) for g in d["group_sizes"]])
    fit = _since(t)
    t = _clock()
    pred = fm.predict(d["date_test"], X_rel=blocks_te)
    predict = _since(t)
    return pred, fit, predict, {}


def main():
    p, sub = parser(__doc__)
    for mode in ("fmlearn", "flat", "myfm"):
        s = sub.add_parser(mode)
        s.add_argument("--data", required=True)
        s.add_argument("--out", required=True)
        s.add_argument("--rank", type=int, default=8)
        s.add_argument("--n-iter", type=int, default=200)
        s.add_argument("--n-kept", type=int, default=190)
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--params", default="{}")
    args = p.parse_args()
    d = _load(args.data)
    if args.mode == "myfm":
        pred, fit, predict, extra = run_myfm(d, args)
    else:
        pred, fit, predict, extra = run_fmlearn(d, args, flat=args.mode == "flat")
    pred = np.asarray(pred, dtype=np.float64)
    np.savetxt(args.out, pred, fmt="%.10g")
    lo, hi = d["y_train"].min(), d["y_train"].max()
    rmse = float(np.sqrt(np.mean((np.clip(pred, lo, hi) - d["y_test"]) ** 2)))
    report({"fit_cpu": fit[0], "fit_wall": fit[1], "predict_cpu": predict[0],
            "predict_wall": predict[1], "rmse": rmse, **extra})


if __name__ == "__main__":
    main()
