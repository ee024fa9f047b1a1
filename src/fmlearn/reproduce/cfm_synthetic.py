"""Yamada et al. 2017, Fig. 1: test RMSE per iteration on the §4.1 synthetic data, convex FM against
FM-ALS and FM-MCMC (rank 20), plus ridge on explicit quadratic features.

Protocol (§4.1): x in R^100 ~ N(0, I), y = w0 + w^T x + sum_{l<l'} W_ll' x_l x_l' with
W_ll' ~ U[0, 1]; 900 training and 100 test samples; five random draws, mean RMSE. eta is
chosen on the training data (the last fifth held out) from a small grid; FM-ALS uses the
paper's lambda_1 = 0, lambda_2 = 0.01.
"""

import numpy as np
from sklearn.metrics import root_mean_squared_error

from fmlearn import ConvexFMRegressor, FMRegressor
from fmlearn.datasets import make_cfm_regression
from fmlearn.reproduce import format_table, optional_pyplot, save_figure

ETA_GRID = (30.0, 60.0, 120.0, 240.0)


def _curve(history_val, final):
    # history_["val"][t] is recorded before step t; append the RMSE after the last step.
    return np.array(list(history_val[1:]) + [final])


def run(out_dir, quick=False):
    from sklearn.linear_model import RidgeCV
    from sklearn.preprocessing import PolynomialFeatures

    n_runs, n_iter = (2, 30) if quick else (5, 100)
    sel_iter = 20 if quick else 50
    curves = {"CFM (exact step)": [], "CFM (2/(t+2))": [], "FM-ALS": [], "FM-MCMC": []}
    finals = {k: [] for k in list(curves) + ["ridge (quadratic features)"]}
    etas = []
    for run_id in range(n_runs):
        X, y, _ = make_cfm_regression(1000, 100, random_state=run_id)
        Xtr, ytr, Xte, yte = X[:900], y[:900], X[900:], y[900:]
        scores = {}
        for eta in ETA_GRID:
            m = ConvexFMRegressor(trace_bound=eta, max_iter=sel_iter, tol=0, random_state=0,
                                  clip_predictions=False)
            scores[eta] = root_mean_squared_error(
                ytr[720:], m.fit(Xtr[:720], ytr[:720]).predict(Xtr[720:]))
        eta = min(scores, key=scores.get)
        etas.append(eta)
        for name, step in (("CFM (exact step)", "exact"), ("CFM (2/(t+2))", "standard")):
            m = ConvexFMRegressor(trace_bound=eta, max_iter=n_iter, tol=0, step=step,
                                  random_state=0, clip_predictions=False)
            m.fit(Xtr, ytr, eval_set=(Xte, yte))
            final = root_mean_squared_error(yte, m.predict(Xte))
            curves[name].append(_curve(m.history_["val"], final))
            finals[name].append(final)
        als = FMRegressor(20, solver="als", n_iter=n_iter, reg_linear=0.0, reg_pairwise=0.01,
                          random_state=run_id, clip_predictions=False)
        als.fit(Xtr, ytr, eval_set=(Xte, yte))
        curves["FM-ALS"].append(np.array(als.history_["val"]))
        finals["FM-ALS"].append(root_mean_squared_error(yte, als.predict(Xte)))
        mcmc = FMRegressor(20, solver="mcmc", n_iter=n_iter, init_stdev=0.1,
                           random_state=run_id, clip_predictions=False)
        mcmc.fit(Xtr, ytr, eval_set=(Xte, yte))
        curves["FM-MCMC"].append(np.array(mcmc.history_["val_avg"]))
        finals["FM-MCMC"].append(root_mean_squared_error(yte, mcmc.predict(Xte)))
        poly = PolynomialFeatures(2, interaction_only=True, include_bias=False)
        ridge = RidgeCV(alphas=np.logspace(-1, 4, 11)).fit(poly.fit_transform(Xtr), ytr)
        finals["ridge (quadratic features)"].append(
            root_mean_squared_error(yte, ridge.predict(poly.transform(Xte))))

    rows = [[name, float(np.mean(v)), float(np.std(v))] for name, v in finals.items()]
    print(f"Yamada et al. 2017, §4.1 synthetic: {n_runs} draws, {n_iter} iterations, eta "
          f"chosen per draw from {ETA_GRID} (chosen: {etas})")
    print(format_table(rows, ["method", "test RMSE", "std"]))
    plt = optional_pyplot("cfm_synthetic.png")
    if plt is None:
        return {"table": {r[0]: r[1] for r in rows}, "etas": etas, "figure": None}
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, cs in curves.items():
        mean = np.mean(np.stack(cs), axis=0)
        ax.plot(np.arange(1, mean.shape[0] + 1), mean, label=name)
    ax.axhline(np.mean(finals["ridge (quadratic features)"]), color="grey", ls="--",
               label="ridge (quadratic features)")
    ax.set_xlabel("iteration")
    ax.set_ylabel("test RMSE")
    ax.set_title("Yamada et al. 2017, Fig. 1: synthetic data (§4.1)")
    ax.legend()
    path = save_figure(fig, out_dir, "cfm_synthetic.png")
    print(f"figure: {path}")
    return {"table": {r[0]: r[1] for r in rows}, "etas": etas, "figure": path}
