"""Slow NumPy oracles of the online learners (tests only), written from the algorithms'
definitions with dense matrices and full eigendecompositions."""

import numpy as np


def dense(X):
    return np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)


def gmat(x, self_inter):
    """G(x) = x^ x^' - [no self-interactions] diag(x o x, 0): 2 * d y^ / d C."""
    xh = np.append(x, 1.0)
    g = np.outer(xh, xh)
    if not self_inter:
        g -= np.diag(np.append(x**2, 0.0))
    return g


def dloss(p, y, loss):
    return (p - y) if loss == "squared" else -y / (1.0 + np.exp(y * p))


def project_ball(A, delta, psd=False):
    """Euclidean projection onto {||C||_tr <= delta} (or the PSD trace simplex)."""
    lam, Q = np.linalg.eigh(0.5 * (A + A.T))
    mags = np.maximum(lam, 0.0) if psd else np.abs(lam)
    tau = 0.0
    if mags.sum() > delta:
        s = np.sort(mags)[::-1]
        cs = np.cumsum(s)
        k = np.arange(1, s.shape[0] + 1)
        cand = (cs - delta) / k
        tau = cand[s > cand][-1]
    m = np.maximum(mags - tau, 0.0)
    return (Q * (m if psd else np.sign(lam) * m)) @ Q.T


def ocg(X, y, eta, delta, self_inter=True, loss="squared", gamma_power=0.5):
    """OCCFM (seed 002 Alg. 2) with the accumulated gradient through round t and C_1 = 0;
    returns (predictions, C_{T+1}, |theta_t| of every round)."""
    X = dense(X)
    n, d = X.shape
    C = np.zeros((d + 1, d + 1))
    S = np.zeros_like(C)
    preds, thetas = [], []
    for t in range(1, n + 1):
        G = gmat(X[t - 1], self_inter)
        p = 0.5 * np.sum(C * G)
        preds.append(p)
        S += 0.5 * dloss(p, y[t - 1], loss) * G
        lam, Q = np.linalg.eigh(-eta * S - 2 * C)
        k = np.argmax(np.abs(lam))
        thetas.append(abs(lam[k]))
        if lam[k] == 0:
            continue
        gam = min(1.0, t**-gamma_power)
        C = (1 - gam) * C + gam * delta * np.sign(lam[k]) * np.outer(Q[:, k], Q[:, k])
    return np.array(preds), C, np.array(thetas)


def ccfm_ogd(X, y, eta0, power_t, delta, self_inter=True, loss="squared"):
    X = dense(X)
    C = np.zeros((X.shape[1] + 1,) * 2)
    preds = []
    for t in range(1, X.shape[0] + 1):
        G = gmat(X[t - 1], self_inter)
        p = 0.5 * np.sum(C * G)
        preds.append(p)
        C = project_ball(C - eta0 / t**power_t * dloss(p, y[t - 1], loss) * 0.5 * G, delta)
    return np.array(preds), C


def ccfm_pa(X, y, pa_c, epsilon, delta, self_inter=True, loss="squared"):
    X = dense(X)
    C = np.zeros((X.shape[1] + 1,) * 2)
    preds = []
    for t in range(X.shape[0]):
        G = gmat(X[t], self_inter)
        p = 0.5 * np.sum(C * G)
        preds.append(p)
        if loss == "squared":
            lpa, s = abs(p - y[t]) - epsilon, np.sign(p - y[t])
        else:
            lpa, s = 1 - y[t] * p, -y[t]
        if lpa > 0:
            tau = min(pa_c, lpa / np.sum((0.5 * G) ** 2))
            C = project_ball(C - tau * s * 0.5 * G, delta)
    return np.array(preds), C


def ccfm_ftrl(X, y, eta0, power_t, delta, self_inter=True, loss="squared"):
    X = dense(X)
    C = np.zeros((X.shape[1] + 1,) * 2)
    S = np.zeros_like(C)
    preds = []
    for t in range(1, X.shape[0] + 1):
        G = gmat(X[t - 1], self_inter)
        p = 0.5 * np.sum(C * G)
        preds.append(p)
        S += 0.5 * dloss(p, y[t - 1], loss) * G
        C = project_ball(-eta0 / t**power_t * S, delta)
    return np.array(preds), C


def ftrl_coordinate(z, n, w, g, alpha, beta, l1, l2):
    """McMahan et al. 2013, Algorithm 1, one coordinate; returns (z, n, w)."""
    sigma = (np.sqrt(n + g * g) - np.sqrt(n)) / alpha
    z = z + g - sigma * w
    n = n + g * g
    w = 0.0 if abs(z) <= l1 else -(z - np.sign(z) * l1) / ((beta + np.sqrt(n)) / alpha + l2)
    return z, n, w


def cfm_ftrl(X, y, eta0, power_t, delta, alpha, beta, l1, l2, loss="squared"):
    """Convex FM (seed 004): W by lazy projection onto the PSD trace simplex, (w0, w) by
    FTRL-Proximal; no self-interactions."""
    X = dense(X)
    n, d = X.shape
    W = np.zeros((d, d))
    S = np.zeros((d, d))
    lin = np.zeros((d + 1, 3))  # z, n, w; index d is w0
    preds = []
    for t in range(1, n + 1):
        x = X[t - 1]
        G = np.outer(x, x) - np.diag(x**2)
        p = lin[d, 2] + x @ lin[:d, 2] + 0.5 * np.sum(W * G)
        preds.append(p)
        g = dloss(p, y[t - 1], loss)
        lin[d] = ftrl_coordinate(*lin[d], g, alpha, beta, l1, l2)
        for j in np.flatnonzero(x):
            lin[j] = ftrl_coordinate(*lin[j], g * x[j], alpha, beta, l1, l2)
        S += 0.5 * g * G
        W = project_ball(-eta0 / t**power_t * S, delta, psd=True)
    return np.array(preds), W, lin


def fm_predict_one(x, w0, w, V):
    q = V.T @ x
    return w0 + x @ w + 0.5 * (q @ q - np.sum((V * x[:, None]) ** 2))


def fm_grad(x, V):
    q = V.T @ x
    return np.outer(x, q) - V * (x**2)[:, None]


def fm_online(X, y, learner, V0, loss="squared", eta0=0.05, power_t=0.5, pa_c=0.1,
              epsilon=0.0, alpha=0.1, beta=1.0, alpha_v=0.05, beta_v=1.0, implicit=False):
    """Classic FM learned row by row with OGD, PA or FTRL-Proximal (no penalties)."""
    X = dense(X)
    n, d = X.shape
    w0, w, V = 0.0, np.zeros(d), V0.copy()
    zn0 = np.zeros(3)
    znw = np.zeros((d, 3))
    Vz = -(beta_v / alpha_v) * V0
    Vn = np.zeros_like(V0)
    L = 1.0 if loss == "squared" else 0.25
    preds = []
    for t in range(1, n + 1):
        x = X[t - 1]
        nz = np.flatnonzero(x)
        p = fm_predict_one(x, w0, w, V)
        preds.append(p)
        gV = fm_grad(x, V)
        if learner == "ogd":
            eta = eta0 / t**power_t
            g = dloss(p, y[t - 1], loss)
            if implicit:
                g /= 1 + eta * L * (1 + np.sum(x[nz] ** 2) + np.sum(gV[nz] ** 2))
            w0 -= eta * g
            w[nz] -= eta * g * x[nz]
            V[nz] -= eta * g * gV[nz]
        elif learner == "pa":
            if loss == "squared":
                lpa, s = abs(p - y[t - 1]) - epsilon, np.sign(p - y[t - 1])
            else:
                lpa, s = 1 - y[t - 1] * p, -y[t - 1]
            if lpa > 0:
                tau = min(pa_c, lpa / (1 + np.sum(x[nz] ** 2) + np.sum(gV[nz] ** 2)))
                w0 -= tau * s
                w[nz] -= tau * s * x[nz]
                V[nz] -= tau * s * gV[nz]
        else:
            g = dloss(p, y[t - 1], loss)
            zn0 = np.array(ftrl_coordinate(*zn0, g, alpha, beta, 0.0, 0.0))
            w0 = zn0[2]
            for j in nz:
                znw[j] = ftrl_coordinate(*znw[j], g * x[j], alpha, beta, 0.0, 0.0)
                w[j] = znw[j, 2]
                for f in range(V.shape[1]):
                    Vz[j, f], Vn[j, f], V[j, f] = ftrl_coordinate(Vz[j, f], Vn[j, f], V[j, f],
                                                                  g * gV[j, f], alpha_v, beta_v,
                                                                  0.0, 0.0)
    return np.array(preds), w0, w, V
