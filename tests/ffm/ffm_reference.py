"""Slow NumPy oracles of the field-aware FM (tests only), written from the definitions of Juan
et al. (2016): the score by explicit pairs j < l, its gradient from the definition, and
AdaGrad steps of every parameter a row touches, one row at a time."""

import numpy as np


def dense(X):
    return np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)


def scaled(x, normalize):
    """The row as the model sees it: divided by its norm with ``normalize``."""
    x = np.asarray(x, dtype=np.float64)
    n = np.sqrt(np.sum(x * x))
    return x / n if normalize and n > 0 else x


def ffm_score(x, fields, w0, w, V, normalize):
    """phi(x) = w0 + <w, x> + sum_{j<l} <V[j, f(l)], V[l, f(j)]> x_j x_l; V (d, F, k)."""
    x = scaled(x, normalize)
    nz = np.flatnonzero(x)
    out = float(w0) + float(x @ w)
    for a in range(len(nz)):
        for b in range(a + 1, len(nz)):
            j, l = nz[a], nz[b]
            out += float(V[j, fields[l]] @ V[l, fields[j]]) * x[j] * x[l]
    return out


def ffm_predict(X, fields, w0, w, V, normalize):
    X = dense(X)
    return np.array([ffm_score(x, fields, w0, w, V, normalize) for x in X])


def ffm_gradient(x, fields, V, normalize):
    """(d phi / d w, d phi / d V) at x (d phi / d w0 = 1): d phi / d V[j, g] = sum over l != j
    with f(l) = g of V[l, f(j)] x_j x_l."""
    x = scaled(x, normalize)
    gV = np.zeros_like(V, dtype=np.float64)
    nz = np.flatnonzero(x)
    for j in nz:
        for l in nz:
            if l != j:
                gV[j, fields[l]] += V[l, fields[j]] * x[j] * x[l]
    return x.copy(), gV


def loss_and_slope(phi, y, loss):
    if loss == "logistic":
        return float(np.logaddexp(0.0, -y * phi)), float(-y / (1.0 + np.exp(y * phi)))
    return 0.5 * (phi - y) ** 2, phi - y


def touched(x, fields, normalize):
    """Masks of the parameters a row touches: w_j for x_j != 0, V[j, g] for the fields g of
    the row's other features."""
    x = scaled(x, normalize)
    nz = np.flatnonzero(x)
    F = int(np.max(fields)) + 1
    mask = np.zeros((x.shape[0], F), dtype=bool)
    for j in nz:
        for l in nz:
            if l != j:
                mask[j, fields[l]] = True
    return x != 0, mask


def adagrad_epoch(X, y, sw, order, fields, state, settings):
    """AdaGrad steps of Juan et al. (2016, Algorithm 1) over the rows in ``order``, one row at
    a time, from ``state`` = dict(w0, G0, w, Gw, V, GV) (copied). A row of weight s is
    visited ceil(s) times with its gradient scaled by s / ceil(s). Returns the new state and
    the weighted sum of the losses before each row's first step."""
    X = dense(X)
    st = {k: np.array(v, dtype=np.float64, copy=True) for k, v in state.items()}
    eta, r0, r1, r2 = (settings[k] for k in ("eta", "reg0", "reg1", "reg2"))
    norm, loss_name = settings["normalize"], settings["loss"]
    total = 0.0
    for i in order:
        s = float(sw[i])
        if s <= 0:
            continue
        reps = max(1, int(np.ceil(s)))
        for rep in range(reps):
            phi = ffm_score(X[i], fields, st["w0"], st["w"], st["V"], norm)
            value, slope = loss_and_slope(phi, y[i], loss_name)
            if rep == 0:
                total += s * value
            kappa = slope * s / reps
            gw, gV = ffm_gradient(X[i], fields, st["V"], norm)
            mw, mV = touched(X[i], fields, norm)
            g = kappa + r0 * st["w0"]
            st["G0"] = st["G0"] + g * g
            st["w0"] = st["w0"] - eta * g / np.sqrt(st["G0"])
            g = kappa * gw[mw] + r1 * st["w"][mw]
            st["Gw"][mw] += g * g
            st["w"][mw] -= eta * g / np.sqrt(st["Gw"][mw])
            g = kappa * gV[mV] + r2 * st["V"][mV]
            st["GV"][mV] += g * g
            st["V"][mV] -= eta * g / np.sqrt(st["GV"][mV])
    return st, total
