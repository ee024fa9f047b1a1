"""One measurement of ``bench_ffm.py`` in a fresh process: fmlearn's FFM (fit, predict,
partial_fit, streaming), fmlearn's FM, or River's FFMClassifier (in the peers' Python).

Standard library only at the top, so that it loads in either environment; a mode imports what
it measures. Each mode reports one JSON line after ``RESULT_TAG`` (``_sbs_child``): CPU seconds
(``time.process_time``) and wall seconds of the measured part, measured after a warm-up that
loads or compiles the kernels, and the figures the mode computes.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sbs_child import parser, report  # noqa: E402


def _clock():
    return time.process_time(), time.perf_counter()


def _since(t):
    c, w = _clock()
    return c - t[0], w - t[1]


def _scores(y, p):
    from sklearn.metrics import log_loss, roc_auc_score

    return {"log_loss": float(log_loss(y, p, labels=[0, 1])),
            "auc": float(roc_auc_score(y, p))}


def _dtype(name):
    import numpy as np

    return np.float32 if name == "float32" else np.float64


def mode_fit(a):
    """fmlearn's FFMClassifier: read train (+ valid, test) with one map, fit, score test."""
    import numpy as np

    from fmlearn import FFMClassifier
    from fmlearn.datasets import load_libffm_files

    t = _clock()
    paths = [a.train] + ([a.valid] if a.valid else []) + [a.test]
    data = load_libffm_files(paths, dtype=_dtype(a.dtype))
    load_cpu, _ = _since(t)
    X, y, fields = data[0], data[1], data[-1]
    Xt, yt = data[-3], data[-2]
    eval_set = (data[2], data[3]) if a.valid else None
    params = dict(n_factors=a.k, fields=fields, n_iter=a.epochs, random_state=a.seed,
                  early_stopping=bool(a.valid), shuffle=True, learning_rate=a.lr,
                  reg_linear=a.lam, reg_pairwise=a.lam)
    FFMClassifier(**{**params, "n_iter": 1}).fit(X[:300], y[:300], eval_set=eval_set)
    FFMClassifier(**{**params, "n_iter": 1}).fit(X[:300], y[:300]).predict_proba(Xt[:10])
    t = _clock()
    clf = FFMClassifier(**params).fit(X, y, eval_set=eval_set)
    fit_cpu, fit_wall = _since(t)
    t = _clock()
    p = clf.predict_proba(Xt)[:, 1]
    pred_cpu, pred_wall = _since(t)
    if a.save:
        clf.save(a.save)
    report({"load_cpu": load_cpu, "fit_cpu": fit_cpu, "fit_wall": fit_wall,
            "predict_cpu": pred_cpu, "predict_wall": pred_wall, "n_iter": clf.n_iter_,
            "best_iteration": clf.best_iteration_, "val": clf.history_.get("val"),
            "rows": int(X.shape[0]), **_scores(yt, p),
            "epoch_time": float(np.median(clf.history_["iter_time"]))})


def mode_predict(a):
    """fmlearn: load a saved FFM, read a libffm file, predict, write P(click) per line."""
    import numpy as np

    import fmlearn
    from fmlearn.datasets import load_libffm

    model = fmlearn.load(a.model)
    Xw, _, _ = load_libffm(a.test, fields=model.known_fields_,
                           dtype=np.dtype(model.dtype_).type)
    model.predict_proba(Xw[:10])  # kernels loaded from numba's cache
    t = _clock()
    X, y, _ = load_libffm(a.test, fields=model.known_fields_, dtype=np.dtype(model.dtype_).type)
    p = model.predict_proba(X)[:, 1]
    with open(a.out, "w") as fh:
        fh.write("\n".join(f"{v:.6f}" for v in p) + "\n")
    all_cpu, all_wall = _since(t)
    t = _clock()
    model.predict_proba(X)
    pred_cpu, pred_wall = _since(t)
    report({"read_predict_write_cpu": all_cpu, "read_predict_write_wall": all_wall,
            "predict_cpu": pred_cpu, "predict_wall": pred_wall, "rows": int(X.shape[0])})


def _read_rows(path, n):
    rows, ys = [], []
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            ys.append(1 if float(parts[0]) > 0 else 0)
            rows.append([tuple(t.split(":")) for t in parts[1:]])
            if len(rows) == n:
                break
    return rows, ys


def mode_river(a):
    """River's FFMClassifier, one learn_one per row of the stream, then the held-out
    log-loss. A row is a dict {field: value} of categorical strings: River one-hot encodes
    them as ``field_value`` and takes the field from the name, as its docs show."""
    from river import facto, optim

    rows, ys = _read_rows(a.train, a.rows)
    trows, tys = _read_rows(a.test, 10**9)

    def as_dict(r):
        return {f"f{f}": j for f, j, _ in r}

    X = [as_dict(r) for r in rows]
    Xt = [as_dict(r) for r in trows]
    kw = {}
    if a.config == "adagrad":  # LIBFFM's learner: AdaGrad 0.2, rows of unit norm
        kw = dict(weight_optimizer=optim.AdaGrad(0.2), latent_optimizer=optim.AdaGrad(0.2),
                  sample_normalization=True, l2_weight=2e-5, l2_latent=2e-5)
    model = facto.FFMClassifier(n_factors=a.k, seed=a.seed, **kw)
    for x, y in zip(X[:50], ys[:50], strict=True):  # warm-up (nothing to compile)
        facto.FFMClassifier(n_factors=a.k, seed=a.seed, **kw).learn_one(x, y)
    t = _clock()
    for x, y in zip(X, ys, strict=True):
        model.learn_one(x, bool(y))
    cpu, wall = _since(t)
    p = [model.predict_proba_one(x).get(True, 0.0) for x in Xt]
    report({"cpu": cpu, "wall": wall, "rows": len(X), **_scores(tys, p)})


def mode_partial(a):
    """fmlearn's FFMClassifier.partial_fit over the same stream in its order, ``--batch``
    rows per call, then the held-out log-loss."""
    import numpy as np

    from fmlearn import FFMClassifier
    from fmlearn.datasets import load_libffm_files

    X, y, Xt, yt, fields = load_libffm_files([a.train, a.test], dtype=_dtype(a.dtype))
    X, y = X[:a.rows], y[:a.rows]
    batches = [(X[i:i + a.batch], y[i:i + a.batch]) for i in range(0, X.shape[0], a.batch)]
    warm = FFMClassifier(n_factors=a.k, fields=fields, random_state=a.seed)
    warm.partial_fit(X[:2], y[:2], classes=[0, 1])
    warm.partial_fit(X[2:3], y[2:3])
    clf = FFMClassifier(n_factors=a.k, fields=fields, random_state=a.seed)
    t = _clock()
    first = True
    for Xb, yb in batches:
        if first:
            clf.partial_fit(Xb, yb, classes=[0, 1])
            first = False
        else:
            clf.partial_fit(Xb, yb)
    cpu, wall = _since(t)
    p = clf.predict_proba(Xt)[:, 1]
    report({"cpu": cpu, "wall": wall, "rows": int(X.shape[0]), "batch": a.batch,
            **_scores(np.asarray(yt), p)})


def mode_fm(a):
    """fmlearn's classic FMClassifier on the same split."""
    import numpy as np

    from fmlearn import FMClassifier
    from fmlearn.datasets import load_libffm_files

    X, y, Xv, yv, Xt, yt, _ = load_libffm_files([a.train, a.valid, a.test])
    params = json.loads(a.params)
    FMClassifier(**{**params, "n_iter": 2}).fit(X[:300], y[:300]).predict_proba(Xt[:10])
    t = _clock()
    clf = FMClassifier(random_state=a.seed, **params).fit(X, y)
    cpu, wall = _since(t)
    report({"fit_cpu": cpu, "fit_wall": wall, **_scores(np.asarray(yt),
                                                         clf.predict_proba(Xt)[:, 1]),
            "val_log_loss": _scores(np.asarray(yv), clf.predict_proba(Xv)[:, 1])["log_loss"]})


def mode_scale(a):
    """fmlearn on the large synthetic stream: in memory (read, then ``fit`` of ``--epochs``
    epochs) or streamed (one ``fit_stream`` call of ``--epochs`` epochs, one chunk in memory;
    ``stream`` with its binary cache of the parsed chunks, ``stream-text`` parsing the text
    every epoch). Reports the last epoch alone and, streamed, the first."""
    import numpy as np

    from fmlearn import FFMClassifier, fit_stream
    from fmlearn.datasets import hashed_fields, load_libffm

    fields = hashed_fields(a.fields, a.buckets)
    params = dict(n_factors=a.k, fields=fields, n_iter=a.epochs, early_stopping=False,
                  random_state=0)
    rng = np.random.default_rng(0)
    import scipy.sparse as sp

    cols = (np.arange(a.fields) * a.buckets + rng.integers(a.buckets, size=(64, a.fields)))
    Xw = sp.csr_matrix((np.ones(64 * a.fields, np.float32), cols.ravel(),
                        np.arange(0, 64 * a.fields + 1, a.fields)),
                       shape=(64, a.fields * a.buckets))
    yw = np.arange(64) % 2
    FFMClassifier(**{**params, "n_iter": 1}).fit(Xw, yw)
    FFMClassifier(**{**params, "n_iter": 1}).partial_fit(Xw, yw)
    t = _clock()
    if a.mode_ == "memory":
        X, y, _ = load_libffm(a.path, fields=fields, dtype=np.float32)
        read_cpu, read_wall = _since(t)
        marks = []

        def callback(epoch, history):
            marks.append(_clock())

        t = _clock()
        FFMClassifier(**params).fit(X, y, callback=callback)
        cpu, wall = _since(t)
        rows = int(X.shape[0])
        # the last epoch alone: from the end of the one before (fit's set-up excluded)
        epoch_cpu = marks[-1][0] - marks[-2][0] if len(marks) > 1 else cpu
        epoch_wall = marks[-1][1] - marks[-2][1] if len(marks) > 1 else wall
    else:
        import functools

        read_cpu = read_wall = 0.0
        est = FFMClassifier(**params)
        kw = dict(batch_size=a.batch, classes=[0, 1], dtype=np.float32,
                  chunk_size_bytes=a.chunk_mb * 2**20, cache=a.mode_ == "stream")
        # one call of --epochs epochs (with the cache, epoch 1 parses the text and writes
        # the cache, the later ones read it); the clocks after each partial_fit call give
        # the epochs apart: an epoch runs from the end of the previous epoch's last call
        # to the end of its own (reading and parsing its chunks included)
        marks = []
        learn = est.partial_fit

        @functools.wraps(learn)
        def timed(X, y, **k):
            out = learn(X, y, **k)
            marks.append((X.shape[0], *_clock()))
            return out

        est.partial_fit = timed
        t = _clock()
        fit_stream(est, a.path, n_epochs=a.epochs, **kw)
        cpu, wall = _since(t)
        rows = int(est.stream_history_["rows"][0])
        ends = []
        done = 0
        for n, c, w in marks:
            done += n
            if done % rows == 0:
                ends.append((c, w))
        starts = [t] + ends[:-1]
        epoch_cpu = ends[-1][0] - starts[-1][0]
        epoch_wall = ends[-1][1] - starts[-1][1]
        first_epoch_cpu = ends[0][0] - starts[0][0]
        first_epoch_wall = ends[0][1] - starts[0][1]
    report({"read_cpu": read_cpu, "read_wall": read_wall, "cpu": cpu, "wall": wall,
            "epoch_cpu": epoch_cpu, "epoch_wall": epoch_wall, "rows": rows,
            "epochs": a.epochs, **({"first_epoch_cpu": first_epoch_cpu,
                                   "first_epoch_wall": first_epoch_wall}
                                  if a.mode_ != "memory" else {})})


def main(argv=None):
    p, sub = parser(__doc__)
    s = sub.add_parser("fit")
    for opt in ("--train", "--test"):
        s.add_argument(opt, required=True)
    s.add_argument("--valid")
    s.add_argument("--save")
    s.add_argument("--k", type=int, default=4)
    s.add_argument("--epochs", type=int, default=50)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--dtype", default="float32")
    s.add_argument("--lam", type=float, default=2e-5, help="LIBFFM's -l")
    s.add_argument("--lr", type=float, default=0.2, help="LIBFFM's -r")
    s = sub.add_parser("predict")
    for opt in ("--model", "--test", "--out"):
        s.add_argument(opt, required=True)
    for name in ("river", "partial"):
        s = sub.add_parser(name)
        for opt in ("--train", "--test"):
            s.add_argument(opt, required=True)
        s.add_argument("--rows", type=int, default=10**9)
        s.add_argument("--k", type=int, default=4)
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--config", default="adagrad")
        s.add_argument("--batch", type=int, default=1)
        s.add_argument("--dtype", default="float32")
    s = sub.add_parser("fm")
    for opt in ("--train", "--valid", "--test", "--params"):
        s.add_argument(opt, required=True)
    s.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("scale")
    s.add_argument("--path", required=True)
    s.add_argument("--mode", dest="mode_", choices=["memory", "stream", "stream-text"],
                   required=True, help="in memory; fit_stream with its binary cache; "
                                       "fit_stream parsing the text every epoch")
    s.add_argument("--fields", type=int, required=True)
    s.add_argument("--buckets", type=int, required=True)
    s.add_argument("--k", type=int, default=4)
    s.add_argument("--epochs", type=int, default=1)
    s.add_argument("--batch", type=int, default=None)
    s.add_argument("--chunk-mb", type=int, default=64)
    a = p.parse_args(argv)
    {"fit": mode_fit, "predict": mode_predict, "river": mode_river, "partial": mode_partial,
     "fm": mode_fm, "scale": mode_scale}[a.mode](a)


if __name__ == "__main__":
    main()
