"""OCCFM and CCFM-FTRL on a wide sparse stream: rounds per second along the stream, memory of
the learner's state, and the accuracy cost of sketching the accumulated gradient S.

Stream: ``make_ccfm_stream`` with 10,000 one-hot features in 50 fields of 200 (50 nonzeros per
row), a planted rank-4 model, 20,000 rounds in the given order. Each learner runs one
``partial_fit`` per block of 2,000 rounds (a tenth); the report gives, per tenth, rounds per
second (wall and CPU), the bytes of the ``state_*_`` arrays and whether S is sketched.

``--accuracy`` runs OCCFM on a planted sparse Gaussian stream (d = 200, about 20 nonzeros per
row, 24,000 rows) where the exact S fits, with the exact S and with S forced into sketches of
32 and 64 rows per sign; it reports the prequential RMSE, the RMSE on the last sixth of the rows
(held out), the mean predictor's and the sketch's error bound.

    python benchmarks/bench_online_flat.py [--rounds 20000] [--accuracy] [--ftrl]
"""

import argparse
import json
import os
import time

import numpy as np

from fmlearn import CCFMRegressor, evaluate_prequential
from fmlearn.datasets import make_ccfm_stream


def stream(n, d, fields, seed=0):
    X, y, _ = make_ccfm_stream(n, d, rank=4, trace_norm=20.0, fields=[d // fields] * fields,
                               noise=0.3, random_state=seed)
    return X.tocsr(), y


def state_bytes(m):
    return sum(v.nbytes for k, v in vars(m).items()
               if k.startswith("state_") and isinstance(v, np.ndarray))


def along_the_stream(make, X, y, blocks=10):
    """Rounds/s (wall, CPU) and state size per block of rounds."""
    n = X.shape[0]
    m = make()
    m.partial_fit(X[:20], y[:20])  # compile outside the timing
    m = make()
    out = []
    edges = np.linspace(0, n, blocks + 1).astype(int)
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        w0, c0 = time.perf_counter(), time.process_time()
        m.partial_fit(X[a:b], y[a:b])
        w1, c1 = time.perf_counter(), time.process_time()
        out.append({"rounds": int(b), "rounds_per_s_wall": (b - a) / (w1 - w0),
                    "rounds_per_s_cpu": (b - a) / (c1 - c0),
                    "state_mb": state_bytes(m) / 2**20,
                    "sketch": bool(m.info_.get("gradient_sketch")),
                    "sketch_error_bound": m.info_.get("sketch_error_bound"),
                    "load_average": os.getloadavg()[0]})
        print(json.dumps(out[-1]), flush=True)
    first, last = out[0]["rounds_per_s_cpu"], out[-1]["rounds_per_s_cpu"]
    print(json.dumps({"last_over_first_cpu": last / first,
                      "last_over_first_wall": out[-1]["rounds_per_s_wall"]
                      / out[0]["rounds_per_s_wall"]}), flush=True)
    return out


def accuracy(n=24000, d=200, density=0.1, seed=2):
    """Held-out RMSE of OCCFM with the exact S against the sketched S on one planted sparse
    Gaussian stream (rows with about density * d nonzeros), next to the mean predictor. The
    sketch is forced (by default S this small stays exact)."""
    import fmlearn.solvers._online_common as common

    X, y, _ = make_ccfm_stream(n, d, rank=3, trace_norm=4.0, density=density, noise=0.1,
                               random_state=seed)
    X = X.tocsr()
    cut = n * 5 // 6
    res = {"rows": n, "features": d, "density": density,
           "mean_predictor_rmse": float(np.std(y[cut:]))}
    minimum = common.SKETCH_MIN_ENTRIES
    for label, size in (("exact", "auto"), ("sketch 32", 32), ("sketch 64", 64)):
        common.SKETCH_MIN_ENTRIES = minimum if label == "exact" else 0
        m = CCFMRegressor(trace_bound=4.0, gamma_power=1.0, sketch_size=size, shuffle=False)
        w0, c0 = time.perf_counter(), time.process_time()
        r = evaluate_prequential(m, (X[:cut], y[:cut]), metrics=["rmse"], batch_size=2000)
        res[label] = {"prequential_rmse": r.metrics["rmse"],
                      "held_out_rmse": float(np.sqrt(np.mean((m.predict(X[cut:]) - y[cut:])
                                                             ** 2))),
                      "sketch": m.info_["gradient_sketch"],
                      "sketch_error_bound": m.info_["sketch_error_bound"],
                      "seconds_wall": time.perf_counter() - w0,
                      "seconds_cpu": time.process_time() - c0}
        print(json.dumps({label: res[label]}), flush=True)
    common.SKETCH_MIN_ENTRIES = minimum
    return res


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20000)
    p.add_argument("--features", type=int, default=10000)
    p.add_argument("--fields", type=int, default=50)
    p.add_argument("--accuracy", action="store_true")
    p.add_argument("--ftrl", action="store_true", help="also CCFM-FTRL (trace bound 30, step 10)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    results = {"load_average_start": os.getloadavg()}
    X, y = stream(args.rounds, args.features, args.fields)
    print(f"== OCCFM, d = {args.features}, {args.fields} nonzeros per row", flush=True)
    results["occfm"] = along_the_stream(
        lambda: CCFMRegressor(trace_bound=20.0, gamma_power=1.0, shuffle=False), X, y)
    if args.ftrl:
        print("== CCFM-FTRL, trace_bound 30, learning_rate 10", flush=True)
        results["ccfm_ftrl"] = along_the_stream(
            lambda: CCFMRegressor("ftrl", trace_bound=30.0, learning_rate=10.0, shuffle=False),
            X, y)
    if args.accuracy:
        print("== accuracy: exact S against its sketch", flush=True)
        results["accuracy"] = accuracy()
    results["load_average_end"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
