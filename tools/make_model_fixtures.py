"""Write the model files of ``tests/fixtures/models`` (read by tests/test_model_files.py).

Each file is a small model fitted and saved by the fmlearn on ``PYTHONPATH`` (run it with an
older checkout's ``src`` to freeze that version's files: the test then checks that files
written before a change load and predict the same). ``inputs.npz`` holds the rows the test
predicts on and, per model, the predictions the writing version made::

    git -C /path/to/repo archive <commit> src | tar -x -C /tmp/oldsrc
    PYTHONPATH=/tmp/oldsrc/src python tools/make_model_fixtures.py tests/fixtures/models
"""

import json
import pathlib
import sys

import numpy as np
import scipy.sparse as sp


def _data(n=300, d=16, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.5)
    y = 1.0 + X[:, 0] - 0.5 * X[:, 1] + X[:, 2] * X[:, 3] - X[:, 4] * X[:, 5] \
        + 0.1 * rng.normal(size=n)
    return X, y


def models():
    """(file name, fitted estimator, what the test compares)."""
    import fmlearn

    X, y = _data()
    ycls = np.where(y > np.median(y), "up", "down")
    Xs = sp.csr_matrix(X)
    C = (sp.eye(299, 300) - sp.eye(299, 300, k=1)).tocsr()
    out = [
        ("fm_mcmc.fmz", fmlearn.FMRegressor(2, solver="mcmc", n_iter=20, random_state=0)
         .fit(Xs, y), "predict"),
        ("fm_als_groups.fmz", fmlearn.FMRegressor(2, solver="als", n_iter=10, reg_linear=0.1,
                                                  reg_pairwise=[0.5, 1.0],
                                                  groups=[0] * 8 + [1] * 8, random_state=0)
         .fit(Xs, y), "predict"),
        ("fm_sgd_float32.fmz", fmlearn.FMRegressor(2, solver="sgd", n_iter=10,
                                                   learning_rate=0.02, random_state=0)
         .fit(Xs.astype(np.float32), y), "predict"),
        ("fm_contrasts_als.fmz", fmlearn.FMRegressor(2, solver="als", n_iter=10,
                                                     reg_linear=0.1, reg_pairwise=0.1,
                                                     random_state=0)
         .fit(Xs, C @ y, contrasts=C), "predict"),
        ("fmc_mcmc.fmz", fmlearn.FMClassifier(2, solver="mcmc", n_iter=20, random_state=0)
         .fit(Xs, ycls), "predict_proba"),
        ("fmc_sgd.fmz", fmlearn.FMClassifier(2, solver="sgd", n_iter=10, learning_rate=0.05,
                                             random_state=0).fit(Xs, ycls), "decision_function"),
        ("gfm.fmz", fmlearn.GFMRegressor(2, random_state=0).fit(X, y), "predict"),
        ("ifm.fmz", fmlearn.IFMRegressor(2, random_state=0).fit(X, y), "predict"),
        ("convex.fmz", fmlearn.ConvexFMRegressor(trace_bound=2.0, max_iter=10, tol=0,
                                                 random_state=0).fit(X, y), "predict"),
        ("online_fm.fmz", fmlearn.OnlineFMRegressor(n_factors=2, random_state=0).fit(X, y),
         "predict"),
    ]
    return out, X[:40]


def main(folder):
    import warnings

    import fmlearn

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted, X = models()
    arrays = {"X": X}
    index = {}
    for name, est, method in fitted:
        est.save(folder / name)
        arrays[name] = np.asarray(getattr(est, method)(X))
        index[name] = {"class": type(est).__name__, "method": method}
    np.savez(folder / "inputs.npz", **arrays)
    meta = {"fmlearn_version": fmlearn.__version__, "models": index}
    (folder / "index.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/models")
