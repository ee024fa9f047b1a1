"""Peer online FMs on a stream written by ``bench_online.py`` (run with the peers' Python).

River's ``facto.FMRegressor`` / ``FMClassifier`` (predict_one, then learn_one per row) and
Vowpal Wabbit with ``--lrq`` (its own driver on a text file; its progressive loss is the
prequential loss). Prints one JSON object per peer. River and Vowpal Wabbit live in a separate
virtual environment and are never imported by fmlearn.

Usage: python _peers_online.py STREAM.npz VW_FILE TASK K [MAX_ROWS]
"""

import json
import sys
import time

import numpy as np


def river_run(indptr, indices, data, y, task, k, max_rows):
    from river import facto

    n = min(y.shape[0], max_rows)
    rows = [{int(indices[p]): float(data[p]) for p in range(indptr[i], indptr[i + 1])}
            for i in range(n)]
    # River's defaults (SGD steps 0.01 on weights and factors), k factors
    if task == "regression":
        model = facto.FMRegressor(n_factors=k, seed=0)
    else:
        model = facto.FMClassifier(n_factors=k, seed=0)
    pred = np.empty(n)
    t_cpu = time.process_time()
    t_wall = time.perf_counter()
    for i in range(n):
        x = rows[i]
        if task == "regression":
            pred[i] = model.predict_one(x)
            model.learn_one(x, float(y[i]))
        else:
            pred[i] = model.predict_proba_one(x).get(True, 0.0)
            model.learn_one(x, bool(y[i] > 0))
    cpu = time.process_time() - t_cpu
    wall = time.perf_counter() - t_wall
    out = {"peer": f"River facto k={k}", "rows": n, "cpu_s": cpu, "wall_s": wall,
           "rows_per_s_cpu": n / cpu}
    if task == "regression":
        out["prequential_rmse"] = float(np.sqrt(np.mean((np.clip(pred, 1, 5) - y[:n]) ** 2)))
    else:
        out["prequential_error_rate"] = float(np.mean((pred > 0.5) != (y[:n] > 0)))
        out["prequential_auc"] = _auc(y[:n] > 0, pred)
    return out


def _auc(pos, score):
    """Area under the ROC curve by the rank-sum (Mann-Whitney) formula, ties averaged."""
    order = np.argsort(score, kind="mergesort")
    s = score[order]
    ranks = np.empty(s.shape[0])
    i = 0
    while i < s.shape[0]:
        j = i
        while j + 1 < s.shape[0] and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = 0.5 * (i + j) + 1.0
        i = j + 1
    r = np.empty_like(ranks)
    r[order] = ranks
    n_pos = int(pos.sum())
    n_neg = pos.shape[0] - n_pos
    return float((r[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def vw_run(vw_file, task, k, n):
    from vowpalwabbit import pyvw

    lrq = f"ui{k}" if task == "regression" else f"ff{k}"
    args = f"-d {vw_file} --lrq {lrq} -b 20 --quiet --holdout_off"
    if task == "classification":
        args += " --loss_function logistic --binary"
    t_cpu = time.process_time()
    t_wall = time.perf_counter()
    vw = pyvw.Workspace(args)
    vw.run_parser()
    loss = vw.get_sum_loss() / max(vw.get_weighted_examples(), 1.0)
    vw.finish()
    cpu = time.process_time() - t_cpu
    wall = time.perf_counter() - t_wall
    out = {"peer": f"Vowpal Wabbit --lrq {lrq}", "rows": n, "cpu_s": cpu, "wall_s": wall,
           "rows_per_s_cpu": n / cpu}
    if task == "regression":
        out["prequential_rmse"] = float(np.sqrt(loss))  # progressive squared loss
    else:
        out["prequential_error_rate"] = float(loss)  # --binary: progressive 0/1 loss
    return out


def main(argv):
    path, vw_file, task, k = argv[1], argv[2], argv[3], int(argv[4])
    max_rows = int(argv[5]) if len(argv) > 5 else 10**12
    z = np.load(path)
    indptr, indices, data, y = z["indptr"], z["indices"], z["data"], z["y"]
    for run in (lambda: river_run(indptr, indices, data, y, task, k, max_rows),
                lambda: vw_run(vw_file, task, k, y.shape[0])):
        try:
            print(json.dumps(run()), flush=True)
        except ImportError as exc:
            print(json.dumps({"peer": "unavailable", "error": str(exc)}), flush=True)


if __name__ == "__main__":
    main(sys.argv)
