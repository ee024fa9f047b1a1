"""Slow NumPy oracles for the compiled kernels and solver steps (tests only).

Each oracle is written from the model's definition, not from the kernel's algebra: predictions
sum over explicit pairs j < l, gradients come from the definition of the FM, coordinate steps
minimise the 1-D objective written out in full.
"""

import numpy as np


def fm_predict(X, w0, w, V):
    """f(x) = w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l, by explicit pairs."""
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
    n, d = X.shape
    out = np.full(n, float(w0)) + X @ w
    G = V.astype(np.float64) @ V.T.astype(np.float64)
    for i in range(n):
        nz = np.flatnonzero(X[i])
        for a in range(len(nz)):
            for b in range(a + 1, len(nz)):
                j, l = nz[a], nz[b]
                out[i] += G[j, l] * X[i, j] * X[i, l]
    return out


def fm_gradient(x, w0, w, V):
    """d f(x) / d(w0, w, V) from the definition (dense x)."""
    x = np.asarray(x, dtype=np.float64)
    q = V.T @ x
    gV = np.outer(x, q) - V * (x**2)[:, None]
    return 1.0, x.copy(), gV


def sgd_epoch(X, y, sw, order, w0, w, V, lr, reg, loss="squared", clip=(-np.inf, np.inf),
              implicit=True):
    """Plain per-row SGD as in libFM, with the implicit step normalisation (dense X)."""
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
    w, V = w.astype(np.float64).copy(), V.astype(np.float64).copy()
    L = 1.0 if loss == "squared" else 0.25
    for i in order:
        if sw[i] <= 0:
            continue
        reps = max(1, int(np.ceil(sw[i])))
        s = sw[i] / reps
        for _ in range(reps):
            x = X[i]
            p = fm_predict(x[None, :], w0, w, V)[0]
            if loss == "squared":
                p = min(max(p, clip[0]), clip[1])
                g = s * (p - y[i])
            else:
                g = s * (-y[i] / (1.0 + np.exp(y[i] * p)))
            _, gw, gV = fm_gradient(x, w0, w, V)
            nz = x != 0
            if implicit:
                norm2 = 1.0 + np.sum(gw[nz] ** 2) + np.sum(gV[nz] ** 2)
                g = g / (1.0 + lr * s * L * norm2)
            w0 = w0 - lr * (g + reg[0] * w0)
            w[nz] -= lr * (g * gw[nz] + reg[1] * w[nz])
            V[nz] -= lr * (g * gV[nz] + reg[2] * V[nz])
    return w0, w, V


def squared_objective(X, y, sw, w0, w, V, reg):
    """Weighted squared loss + L2 penalties; ``reg[1]``, ``reg[2]`` scalars or per feature."""
    p = fm_predict(X, w0, w, V)
    return (0.5 * np.sum(sw * (p - y) ** 2) + 0.5 * reg[0] * w0**2
            + 0.5 * np.sum(np.asarray(reg[1]) * w**2)
            + 0.5 * np.sum(np.asarray(reg[2])[..., None] * V**2))


def group_hyper_draw(theta, group, n_groups, mu_prev, g, z, alpha_0=1.0, beta_0=1.0,
                     gamma_0=1.0, mu_0=0.0):
    """(lambda, mu) of every group from the Normal-Gamma conditional posterior written out
    (Freudenthaler et al. 2011; libFM's draw_w_lambda / draw_w_mu), with the given standard
    gamma variates ``g`` (shapes (alpha_0 + p_g + 1) / 2) and standard normals ``z``:
    lambda_g ~ Gamma((alpha_0 + p_g + 1)/2, rate (beta_0 + gamma_0 (mu_g - mu_0)^2
    + sum_{j in g} (theta_j - mu_g)^2) / 2); mu_g ~ N((sum_{j in g} theta_j + gamma_0 mu_0)
    / (p_g + gamma_0), 1 / ((p_g + gamma_0) lambda_g))."""
    lam = np.empty(n_groups)
    mu = np.empty(n_groups)
    for q in range(n_groups):
        t = np.asarray([theta[j] for j in range(len(theta)) if group[j] == q], dtype=float)
        rate = 0.5 * (beta_0 + gamma_0 * (mu_prev[q] - mu_0) ** 2
                      + sum((v - mu_prev[q]) ** 2 for v in t))
        lam[q] = g[q] / rate
        mean = (t.sum() + gamma_0 * mu_0) / (len(t) + gamma_0)
        mu[q] = mean + z[q] / np.sqrt((len(t) + gamma_0) * lam[q])
    return lam, mu


def als_sweep(X, y, sw, order, w0, w, V, reg):
    """One ALS sweep (w0, w_j in ``order``, then v_jf factor by factor in ``order``) where each
    coordinate is set to the minimiser of the squared objective along it: the objective is a
    quadratic a t^2 + b t + c in the coordinate, found from three evaluations."""
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
    w, V = w.astype(np.float64).copy(), V.astype(np.float64).copy()

    def argmin_along(get, put):
        t0 = get()
        vals = []
        for t in (t0 - 1.0, t0, t0 + 1.0):
            put(t)
            vals.append(squared_objective(X, y, sw, state[0], w, V, reg))
        a = 0.5 * (vals[0] + vals[2] - 2 * vals[1])
        b = 0.5 * (vals[2] - vals[0])
        put(t0 - b / (2 * a) if a > 0 else t0)

    state = [w0]
    argmin_along(lambda: state[0], lambda t: state.__setitem__(0, t))
    for j in order:
        argmin_along(lambda j=j: w[j], lambda t, j=j: w.__setitem__(j, t))
    for f in range(V.shape[1]):
        for j in order:
            argmin_along(lambda j=j, f=f: V[j, f], lambda t, j=j, f=f: V.__setitem__((j, f), t))
    return state[0], w, V


def gfm_value(x, b, w, U, V, zero_diagonal):
    """f(x) = b + <w, x> + x' M x with M = sym(U V') [minus diag(U V')], written out."""
    M = (U @ V.T + V @ U.T) / 2
    if zero_diagonal:
        M = M - np.diag(np.diag(U @ V.T))
    return b + x @ w + x @ M @ x


def contrast_block_oracle(X, C, y, sw, F, zero_diagonal, intercept, reg_linear, reg_pairwise):
    """One ALS block of fmlearn.solvers.contrast_ls, slowly: the design column of V_jl is the
    derivative of f(x_i) with respect to V_jl, taken entry by entry; the penalised weighted
    least-squares problem is solved by lstsq on the stacked system."""
    n, d = X.shape
    k = F.shape[1]
    cols = []
    if intercept:
        cols.append(np.ones(n))
    for j in range(d):
        cols.append(X[:, j].copy())
    for j in range(d):
        for l in range(k):
            col = np.empty(n)
            for i in range(n):
                # d/dV_jl of x' sym(F V') x = x_j (x . f_l); the iFM diagonal adds -x_j^2 F_jl
                col[i] = X[i, j] * (X[i] @ F[:, l])
                if zero_diagonal:
                    col[i] -= X[i, j] ** 2 * F[j, l]
            cols.append(col)
    D = np.column_stack(cols)
    A = np.asarray(C @ D) if C is not None else D
    reg = np.concatenate([[0.0] * intercept, [reg_linear] * d, [reg_pairwise] * (d * k)])
    top = np.sqrt(sw)[:, None] * A
    stacked = np.vstack([top, np.diag(np.sqrt(reg))])
    rhs = np.concatenate([np.sqrt(sw) * y, np.zeros(reg.shape[0])])
    return np.linalg.lstsq(stacked, rhs, rcond=None)[0]


def contrast_objective(X, C, y, sw, w0, w, V, reg, alpha=1.0):
    """alpha/2 sum_g s_g ((C f)_g - y_g)^2 + L2 penalties (``reg`` as in
    :func:`squared_objective`): the negative log-posterior of the contrast FM up to a constant,
    the ALS objective with alpha = 1."""
    t = np.asarray(C @ fm_predict(X, w0, w, V)).ravel()
    return (0.5 * alpha * np.sum(sw * (t - y) ** 2) + 0.5 * reg[0] * w0**2
            + 0.5 * np.sum(np.asarray(reg[1]) * w**2)
            + 0.5 * np.sum(np.asarray(reg[2])[..., None] * V**2))


def contrast_coordinate_sweep(X, C, y, sw, order, w0, w, V, reg, fit_bias=True, alpha=1.0,
                              z=None):
    """One coordinate sweep on contrast targets (w0 if ``fit_bias``, w_j in ``order``, then
    v_jf factor by factor in ``order``). Along each coordinate the objective of
    :func:`contrast_objective` is a quadratic a t^2 + b t + c, read off three evaluations: ALS
    (``z`` None) moves to its minimiser; with standard normals ``z`` (laid out as
    fmlearn.kernels.cd.n_normals, one group) the coordinate is drawn from the Gaussian
    exp(-(a t^2 + b t)): mean -b / (2a), precision 2a (the Gibbs step with fixed priors of
    mean 0 and precision ``reg``)."""
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
    C = np.asarray(C.toarray() if hasattr(C, "toarray") else C, dtype=np.float64)
    w, V = w.astype(np.float64).copy(), V.astype(np.float64).copy()
    d, k = V.shape
    state = [w0]

    def along(get, put, noise):
        t0 = get()
        vals = []
        for t in (t0 - 1.0, t0, t0 + 1.0):
            put(t)
            vals.append(contrast_objective(X, C, y, sw, state[0], w, V, reg, alpha))
        a = 0.5 * (vals[0] + vals[2] - 2 * vals[1])
        b = 0.5 * (vals[2] - vals[0])
        new = t0 - b / (2 * a) if a > 0 else t0
        if z is not None and a > 0:
            new += noise / np.sqrt(2 * a)
        put(new)

    zz = np.zeros(1 + 1 + d + k * (1 + d)) if z is None else z
    if fit_bias:
        along(lambda: state[0], lambda t: state.__setitem__(0, t), zz[0])
    for j in order:
        along(lambda j=j: w[j], lambda t, j=j: w.__setitem__(j, t), zz[2 + j])
    for f in range(V.shape[1]):
        z0 = 2 + d + k + f * d
        for j in order:
            along(lambda j=j, f=f: V[j, f], lambda t, j=j, f=f: V.__setitem__((j, f), t),
                  zz[z0 + j])
    return state[0], w, V


def sgd_contrast_epoch(X, C, y, sw, order, w0, w, V, lr, reg, fit_bias=True, implicit=True):
    """Per-target SGD from the definition (dense X and C): the gradient of
    1/2 s_g ((C f)_g - y_g)^2 is e_g sum_i C_gi grad f(x_i), taken at the parameters before
    the step; L2 shrinkage on the features present in the target's rows, once each, and on w0
when the target's row sum is not zero."""
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
    C = np.asarray(C.toarray() if hasattr(C, "toarray") else C, dtype=np.float64)
    w, V = w.astype(np.float64).copy(), V.astype(np.float64).copy()
    for g in order:
        if sw[g] <= 0:
            continue
        reps = max(1, int(np.ceil(sw[g])))
        s = sw[g] / reps
        for _ in range(reps):
            rows = np.flatnonzero(C[g])
            t = sum(C[g, i] * fm_predict(X[i][None, :], w0, w, V)[0] for i in rows)
            g0 = C[g, rows].sum() if fit_bias else 0.0
            gw = np.zeros_like(w)
            gV = np.zeros_like(V)
            for i in rows:
                _, gwi, gVi = fm_gradient(X[i], w0, w, V)
                gw += C[g, i] * gwi
                gV += C[g, i] * gVi
            present = np.any(X[rows] != 0, axis=0)
            e = s * (t - y[g])
            if implicit:
                norm2 = g0**2 + np.sum(gw[present] ** 2) + np.sum(gV[present] ** 2)
                e = e / (1.0 + lr * s * norm2)
            if fit_bias and g0 != 0:
                w0 = w0 - lr * (e * g0 + reg[0] * w0)
            w[present] -= lr * (e * gw[present] + reg[1] * w[present])
            V[present] -= lr * (e * gV[present] + reg[2] * V[present])
    return w0, w, V
