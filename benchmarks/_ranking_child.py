"""One system's run of ``bench_ranking.py``, in a fresh process: fmlearn (in fmlearn's Python)
or a peer (LightFM, implicit; in the peers' Python).

    python _ranking_child.py SPEC.json

The spec names the system, the data file (an ``.npz`` written by the harness) and what to
do: ``fit`` (fit, report fit CPU and wall seconds, save the score matrix for the harness to
evaluate), ``topk`` (fit untimed, then time the top 10 of every user), ``epoch`` (time the
epochs of a large fit), ``check`` (the peers' evaluation functions on given scores). Every
system runs on one thread (the harness sets the thread variables; LightFM ``num_threads=1``,
implicit ``num_threads=1``). Standard library, NumPy and SciPy only at import, so that it
loads in either environment.
"""

import json
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sbs_child import report  # noqa: E402


def _csr(z, prefix, shape):
    return sp.csr_matrix((z[prefix + "_data"], z[prefix + "_indices"], z[prefix + "_indptr"]),
                         shape=shape)


def _load(path):
    z = np.load(path)
    d = {key: z[key] for key in z.files}
    d["n_users"] = int(d["n_users"])
    d["n_items"] = int(d["n_items"])
    return d


def _matrix(users, items, n_users, n_items, dtype=np.float32):
    M = sp.csr_matrix((np.ones(users.shape[0], dtype=dtype), (users, items)),
                      shape=(n_users, n_items))
    M.sum_duplicates()
    M.data[:] = 1
    return M


def _item_features(d, with_identity=True, cold=None):
    """Item feature rows [identity | side] (cold items: side only); None without side."""
    if "if_data" not in d:
        return None
    F = _csr(d, "if", (d["n_items"], int(d["n_item_features"])))
    if not with_identity:
        return F
    ident = sp.identity(d["n_items"], format="csr")
    if cold is not None and cold.size:
        keep = np.ones(d["n_items"])
        keep[cold] = 0.0
        ident = sp.diags(keep) @ ident
    return sp.hstack([ident, F], format="csr")


class _Clock:
    def __enter__(self):
        self.c0, self.w0 = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.cpu = time.process_time() - self.c0
        self.wall = time.perf_counter() - self.w0
        return False


# -- fmlearn ----------------------------------------------------------------------------------
def _fmlearn_model(spec, d, cold=None):
    from fmlearn.ranking import FMRanker, Interactions

    F = None
    if spec.get("item_features") and "if_data" in d:
        F = _csr(d, "if", (d["n_items"], int(d["n_item_features"])))
    data = Interactions(d["train_users"], d["train_items"], n_users=d["n_users"],
                        n_items=d["n_items"], item_features=F)
    return FMRanker(random_state=spec["seed"], **spec["params"]), data


def _fmlearn_scores(model, data, items=None):
    from fmlearn.recommender import embed_rows, feature_embeddings

    e = feature_embeddings(model)
    u = embed_rows(model, data.user_rows())
    i = embed_rows(model, data.item_rows(items))
    return e.bias + u.part[:, None] + i.part[None, :] + u.query @ i.key.T


def fmlearn_fit(spec, d):
    model, data = _fmlearn_model(spec, d)
    with _Clock() as load:  # the numba cache (a cold cache compiles): a one-epoch fit
        from sklearn.base import clone

        clone(model).set_params(n_iter=1).fit(data.subset(np.arange(min(len(data), 200))))
    with _Clock() as c:
        model.fit(data)
    items = d.get("cold")
    np.save(spec["scores"], _fmlearn_scores(model, data, items))
    return {"fit_cpu": c.cpu, "fit_wall": c.wall, "load_cpu": load.cpu, "n_iter": model.n_iter_}


def fmlearn_topk(spec, d):
    from fmlearn import recommend

    model, data = _fmlearn_model(spec, d)
    model.fit(data)
    users, items = data.user_rows(), data.item_rows()
    seen = data.matrix()
    recommend(model, users[:2], items, k=10, exclude=seen[:2])  # load the kernels
    times = []
    for _ in range(spec.get("inner", 3)):
        with _Clock() as c:
            top = recommend(model, users, items, k=10, exclude=seen)
        times.append((c.cpu, c.wall))
    np.save(spec["scores"], top.indices)
    cpu, wall = min(times)
    return {"topk_cpu": cpu, "topk_wall": wall, "n_users": int(users.shape[0])}


def fmlearn_epoch(spec, d):
    from fmlearn.ranking import FMRanker, Interactions

    data = Interactions(d["train_users"], d["train_items"], n_users=d["n_users"],
                        n_items=d["n_items"])
    model = FMRanker(random_state=spec["seed"], **spec["params"])
    from sklearn.base import clone

    clone(model).set_params(n_iter=1).fit(data.subset(np.arange(200)))  # load the kernels
    with _Clock() as c:
        model.fit(data)
    return {"fit_cpu": c.cpu, "fit_wall": c.wall,
            "epoch_cpu": float(np.median(model.history_["iter_time"])),
            "n_iter": model.n_iter_}


# -- peers ------------------------------------------------------------------------------------
def _lightfm(spec, d):
    from lightfm import LightFM

    p = spec["params"]
    model = LightFM(no_components=p["n_factors"], loss=p["loss"],
                    random_state=np.random.RandomState(spec["seed"]),
                    **{k: v for k, v in p.items() if k not in ("n_factors", "loss", "epochs")})
    return model


def lightfm_fit(spec, d):
    model = _lightfm(spec, d)
    M = _matrix(d["train_users"], d["train_items"], d["n_users"], d["n_items"]).tocoo()
    cold = d.get("cold")
    F = _item_features(d, cold=cold) if spec.get("item_features") else None
    with _Clock() as c:
        model.fit(M, item_features=F, epochs=spec["params"]["epochs"], num_threads=1)
    n_u, n_i = d["n_users"], d["n_items"]
    items = np.arange(n_i) if cold is None else cold
    uid = np.repeat(np.arange(n_u), items.shape[0]).astype(np.int32)
    iid = np.tile(items, n_u).astype(np.int32)
    S = model.predict(uid, iid, item_features=F, num_threads=1).reshape(n_u, items.shape[0])
    np.save(spec["scores"], S.astype(np.float64))
    return {"fit_cpu": c.cpu, "fit_wall": c.wall}


def _implicit(spec):
    p = dict(spec["params"])
    algo = p.pop("algo")
    if algo == "als":
        from implicit.cpu.als import AlternatingLeastSquares as cls
    else:
        from implicit.cpu.bpr import BayesianPersonalizedRanking as cls
    return cls(factors=p.pop("n_factors"), random_state=spec["seed"], num_threads=1, **p)


def implicit_fit(spec, d):
    from threadpoolctl import threadpool_limits

    model = _implicit(spec)
    M = _matrix(d["train_users"], d["train_items"], d["n_users"], d["n_items"])
    with threadpool_limits(1):
        with _Clock() as c:
            model.fit(M, show_progress=False)
    S = np.asarray(model.user_factors, np.float64) @ np.asarray(model.item_factors,
                                                                np.float64).T
    np.save(spec["scores"], S)
    return {"fit_cpu": c.cpu, "fit_wall": c.wall}


def implicit_topk(spec, d):
    from threadpoolctl import threadpool_limits

    model = _implicit(spec)
    M = _matrix(d["train_users"], d["train_items"], d["n_users"], d["n_items"])
    users = np.arange(d["n_users"])
    with threadpool_limits(1):
        model.fit(M, show_progress=False)
        model.recommend(users[:2], M[:2], N=10, filter_already_liked_items=True)
        times = []
        for _ in range(spec.get("inner", 3)):
            with _Clock() as c:
                ids, _ = model.recommend(users, M, N=10, filter_already_liked_items=True)
            times.append((c.cpu, c.wall))
    np.save(spec["scores"], np.asarray(ids))
    cpu, wall = min(times)
    return {"topk_cpu": cpu, "topk_wall": wall, "n_users": int(users.shape[0])}


def lightfm_epoch(spec, d):
    model = _lightfm(spec, d)
    M = sp.coo_matrix((np.ones(d["train_users"].shape[0], np.float32),
                       (d["train_users"], d["train_items"])), shape=(d["n_users"], d["n_items"]))
    times = []
    with _Clock() as c:
        for _ in range(spec["params"]["epochs"]):
            t0 = time.process_time()
            model.fit_partial(M, epochs=1, num_threads=1)
            times.append(time.process_time() - t0)
    return {"fit_cpu": c.cpu, "fit_wall": c.wall, "epoch_cpu": float(np.median(times[1:] or
                                                                                times))}


def implicit_epoch(spec, d):
    from threadpoolctl import threadpool_limits

    model = _implicit(spec)
    M = _matrix(d["train_users"], d["train_items"], d["n_users"], d["n_items"])
    with threadpool_limits(1):
        with _Clock() as c:
            model.fit(M, show_progress=False)
    return {"fit_cpu": c.cpu, "fit_wall": c.wall,
            "epoch_cpu": c.cpu / max(1, spec["params"].get("iterations", 1))}


def peers_check(spec, d):
    """LightFM's and implicit's evaluation functions on the score matrix ``spec['scores']``
    (float32, as both keep their factors): a model whose user factors are the score rows and
    whose item factors are the identity scores every pair exactly with those scores."""
    from implicit.cpu.als import AlternatingLeastSquares
    from implicit.evaluation import ranking_metrics_at_k
    from lightfm import LightFM
    from lightfm.evaluation import auc_score, precision_at_k, recall_at_k

    S = np.load(spec["scores"]).astype(np.float32)
    n_u, n_i = S.shape
    train = _matrix(d["train_users"], d["train_items"], n_u, n_i)
    test = _matrix(d["test_users"], d["test_items"], n_u, n_i)
    k = spec.get("k", 10)
    lfm = LightFM(no_components=n_i)
    lfm._initialize(n_i, n_i, n_u)
    lfm.user_embeddings[:] = S
    lfm.item_embeddings[:] = np.eye(n_i, dtype=np.float32)
    lfm.user_biases[:] = 0
    lfm.item_biases[:] = 0
    out = {
        "lightfm_precision": float(precision_at_k(lfm, test.tocoo(), train.tocoo(), k=k,
                                                  num_threads=1).mean()),
        "lightfm_recall": float(recall_at_k(lfm, test.tocoo(), train.tocoo(), k=k,
                                            num_threads=1).mean()),
        "lightfm_auc": float(auc_score(lfm, test.tocoo(), train.tocoo(), num_threads=1).mean()),
    }
    als = AlternatingLeastSquares(factors=n_i, num_threads=1)
    als.user_factors = S
    als.item_factors = np.eye(n_i, dtype=np.float32)
    r = ranking_metrics_at_k(als, train, test, K=k, show_progress=False, num_threads=1)
    out.update({f"implicit_{key}": float(v) for key, v in r.items()})
    return out


MODES = {
    ("fmlearn", "fit"): fmlearn_fit, ("fmlearn", "topk"): fmlearn_topk,
    ("fmlearn", "epoch"): fmlearn_epoch,
    ("lightfm", "fit"): lightfm_fit, ("lightfm", "epoch"): lightfm_epoch,
    ("implicit", "fit"): implicit_fit, ("implicit", "topk"): implicit_topk,
    ("implicit", "epoch"): implicit_epoch,
    ("peers", "check"): peers_check,
}


def main():
    with open(sys.argv[1]) as fh:
        spec = json.load(fh)
    d = _load(spec["data"])
    out = MODES[(spec["system"], spec["mode"])](spec, d)
    report(out)


if __name__ == "__main__":
    main()
