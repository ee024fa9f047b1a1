"""Lin et al. 2019, §4.1, Figure 1 (a-c): test RMSE versus iteration of the classic FM and of iFM on
labels from a conventional FM, the same labels with their sign flipped, and mixed-sign labels.

Setup of the paper: d = 100, k = 5; w*, U*, V* and x with i.i.d. N(0, 1/d) entries; 30 k d
training rows, 10,000 test rows, 10 trials.

* (a) conventional: y = x^T w* + x^T (U* U*^T - diag(U* U*^T)) x  (Lin et al. 2019, Eq. 1-2);
* (b) sign-flipped: -y of (a);
* (c) mixed-sign: M* = (U* V*^T + V* U*^T)/2 minus its diagonal (eigenvalues of both signs;
  rank up to 2k, so iFM uses n_factors = 2k there, the classic FM its k).

Models: the classic FM (:class:`fmlearn.FMRegressor`, ALS, one iteration = one sweep; its
PSD factorisation V V^T cannot represent negative interactions) and iFM
(:class:`fmlearn.IFMRegressor`, the whole training set as one batch, one iteration = one pass:
the first pass is the one-pass step, later passes re-use the data with the safeguarded step).
The seed does not say which FM solver it used; ALS is deterministic and converges in a few
sweeps, so its curve shows the model's limit rather than the optimiser's.
"""

import time

import numpy as np

from ..datasets import make_fm_labels
from ..fm import FMRegressor
from ..gfm.ifm import IFMRegressor

__all__ = ["run"]

KINDS = ("conventional", "sign_flipped", "mixed_sign")


def _trial(kind, d, k, n_train, n_test, n_iter, seed):
    X, y, truth = make_fm_labels(n_train + n_test, d, k, kind=kind, random_state=seed)
    Xtr, ytr, Xte, yte = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    out = {}
    t0 = time.perf_counter()
    fm = FMRegressor(k, solver="als", n_iter=n_iter, reg_linear=1e-4, reg_pairwise=1e-4,
                     clip_predictions=False, random_state=seed)
    fm.fit(Xtr, ytr, eval_set=(Xte, yte))
    out["FM (ALS)"] = (np.array(fm.history_["val"]), time.perf_counter() - t0)
    t0 = time.perf_counter()
    kk = 2 * k if kind == "mixed_sign" else k
    ifm = IFMRegressor(kk, batch_size=n_train, max_iter=n_iter, tol=None, random_state=seed)
    ifm.fit(Xtr, ytr, eval_set=(Xte, yte))
    out[f"iFM (k={kk})"] = (np.array(ifm.history_["val"]), time.perf_counter() - t0)
    out["std(y_test)"] = float(yte.std())
    return out


def run(out_dir, quick=False):
    """Print the table and write ``ifm_vs_fm.png`` into ``out_dir``."""
    from . import format_table, optional_pyplot, save_figure

    d, k = (40, 3) if quick else (100, 5)
    n_train, n_test = 30 * k * d, (2000 if quick else 10000)
    n_trials = 2 if quick else 10
    n_iter = 10 if quick else 30
    curves = {}
    rows = []
    for kind in KINDS:
        per_model = {}
        stds = []
        for trial in range(n_trials):
            res = _trial(kind, d, k, n_train, n_test, n_iter, seed=trial)
            stds.append(res.pop("std(y_test)"))
            for name, (curve, sec) in res.items():
                per_model.setdefault(name, ([], []))
                per_model[name][0].append(curve)
                per_model[name][1].append(sec)
        curves[kind] = {}
        for name, (cs, secs) in per_model.items():
            C = np.vstack(cs)
            curves[kind][name] = C
            final = C[:, -1]
            rows.append([kind, name, float(final.mean()), float(final.std()),
                         float(final.mean() / np.mean(stds)), float(np.mean(secs))])
    print(f"\nLin et al. 2019, Fig. 1: d = {d}, k = {k}, {n_train} train / {n_test} test rows, "
          f"{n_trials} trials, {n_iter} iterations")
    print(format_table(rows, ["labels", "model", "test RMSE", "sd", "RMSE/std(y)", "s/fit"],
                       floatfmt=".3g"))

    plt = optional_pyplot("ifm_vs_fm.png")
    if plt is None:
        return curves
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, kind, tag in zip(axes, KINDS, "abc", strict=False):
        for name, C in curves[kind].items():
            it = np.arange(1, C.shape[1] + 1)
            ax.semilogy(it, C.mean(axis=0), marker=".", label=name)
            ax.fill_between(it, C.min(axis=0), C.max(axis=0), alpha=0.2)
        ax.set(title=f"({tag}) {kind.replace('_', '-')} labels", xlabel="iteration",
               ylabel="test RMSE")
        ax.legend()
    fig.suptitle(f"iFM vs FM (Lin et al. 2019, Fig. 1), mean and range over {n_trials} trials")
    path = save_figure(fig, out_dir, "ifm_vs_fm.png")
    print(f"\nfigure: {path}")
    return curves
