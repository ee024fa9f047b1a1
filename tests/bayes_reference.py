"""Slow NumPy oracles of the Bayesian additions to the classic FM: the evidence lower bound of
the mean-field posterior (:mod:`fmlearn.kernels.vb`) and its variance of f by enumeration (the
ordered probit's oracles live in tests/solvers/test_ordinal_solver.py).

Written from the formulas, not from the kernels: dense X, plain loops or vectorised NumPy,
scipy.special for the normal distribution.
"""

import itertools
import math

import numpy as np
from scipy.special import digamma, gammaln, log_ndtr


def mean_prediction(X, w0, w, V):
    """f(x; means) for dense X."""
    q = X @ V
    return w0 + X @ w + 0.5 * np.sum(q * q - (X * X) @ (V * V), axis=1)


def prediction_variance(X, w0_var, w_var, V, V_var):
    """Var f_i under independent Gaussian factors, from the definition: the pairwise sum's
    variance as the sum over pairs of Var(a_j a_l) plus the covariances of pairs sharing an
    index (enumerated pair by pair)."""
    n, d = X.shape
    out = np.full(n, float(w0_var)) + (X * X) @ w_var
    for i in range(n):
        nz = np.flatnonzero(X[i])
        for f in range(V.shape[1]):
            mu = X[i, nz] * V[nz, f]
            s2 = X[i, nz] ** 2 * V_var[nz, f]
            pairs = list(itertools.combinations(range(nz.shape[0]), 2))
            var = 0.0
            for a, b in pairs:
                var += mu[a] ** 2 * s2[b] + s2[a] * mu[b] ** 2 + s2[a] * s2[b]
            for (a, b), (c, e) in itertools.combinations(pairs, 2):
                shared = {a, b} & {c, e}
                if len(shared) == 1:
                    s = shared.pop()
                    o1 = b if a == s else a
                    o2 = e if c == s else c
                    var += 2.0 * s2[s] * mu[o1] * mu[o2]
            out[i] += var
    return out


def _gamma_entropy(a, b):
    return a - np.log(b) + gammaln(a) + (1.0 - a) * digamma(a)


def _e_log_gamma_prior(a, b, a0, b0):
    """E log Gamma(lambda; a0, rate b0) under lambda ~ Gamma(a, rate b)."""
    e_log = digamma(a) - np.log(b)
    return a0 * np.log(b0) - gammaln(a0) + (a0 - 1.0) * e_log - b0 * a / b


def elbo(X, y, sw, w0, w, V, post, group, *, probit, reg_bias=0.0, alpha_0=1.0, beta_0=1.0,
         gamma_0=1.0, mu_0=0.0):
    """The evidence lower bound of libFM's Bayesian FM (the Gibbs sampler's priors) under the
    mean-field factors ``post`` (a :class:`fmlearn.solvers.vb.VBPosterior`) with means
    (w0, w, V); for probit the latent factors are at their optimum (truncated normals), which
    leaves sum_i s_i (log Phi(y_i E f_i) - Var f_i / 2) for the likelihood. A flat prior of w0
    (``reg_bias`` 0) contributes a constant, left out."""
    X = np.asarray(X, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    V = np.asarray(V, dtype=np.float64)
    w_var = np.asarray(post.w_var, dtype=np.float64)
    V_var = np.asarray(post.V_var, dtype=np.float64)
    fbar = mean_prediction(X, w0, w, V)
    var = prediction_variance(X, post.w0_var, w_var, V, V_var)
    log2pi = math.log(2.0 * math.pi)
    total = 0.0
    if probit:
        total += float(np.sum(sw * (log_ndtr(y * fbar) - 0.5 * var)))
    else:
        a = 0.5 * (alpha_0 + sw.sum())
        b = post.alpha_rate
        e_alpha, e_log_alpha = a / b, digamma(a) - math.log(b)
        total += float(np.sum(sw * (0.5 * e_log_alpha - 0.5 * log2pi
                                    - 0.5 * e_alpha * ((y - fbar) ** 2 + var))))
        total += _e_log_gamma_prior(a, b, 0.5 * alpha_0, 0.5 * beta_0) + _gamma_entropy(a, b)
    if reg_bias > 0:
        total += 0.5 * math.log(reg_bias) - 0.5 * log2pi - 0.5 * reg_bias * (w0**2 + post.w0_var)
    total += 0.5 * math.log(2.0 * math.pi * math.e * post.w0_var)
    size = np.bincount(group, minlength=np.shape(post.lambda_w)[0]).astype(float)
    blocks = [(w, w_var, post.lambda_w, post.rate_w, post.mu_w, post.mu_var_w)]
    for f in range(V.shape[1]):
        blocks.append((V[:, f], V_var[:, f], post.lambda_v[f], post.rate_v[f], post.mu_v[f],
                       post.mu_var_v[f]))
    for theta, s, _lam, rate, mu, mu_var in blocks:
        a = 0.5 * (alpha_0 + size + 1.0)
        b = np.asarray(rate, dtype=np.float64)
        e_lam = a / b
        e_log = digamma(a) - np.log(b)
        mu = np.asarray(mu, dtype=np.float64)
        mu_var = np.asarray(mu_var, dtype=np.float64)
        # parameters given (lambda, mu), their entropies
        total += float(np.sum(0.5 * e_log[group] - 0.5 * log2pi - 0.5 * e_lam[group]
                              * ((theta - mu[group]) ** 2 + s + mu_var[group])))
        total += float(np.sum(0.5 * np.log(2.0 * math.pi * math.e * s)))
        # mu | lambda ~ N(mu_0, 1 / (gamma_0 lambda)), lambda ~ Gamma(alpha_0/2, beta_0/2)
        total += float(np.sum(0.5 * math.log(gamma_0) + 0.5 * e_log - 0.5 * log2pi
                              - 0.5 * gamma_0 * e_lam * ((mu - mu_0) ** 2 + mu_var)))
        total += float(np.sum(0.5 * np.log(2.0 * math.pi * math.e * mu_var)))
        total += float(np.sum(_e_log_gamma_prior(a, b, 0.5 * alpha_0, 0.5 * beta_0)
                              + _gamma_entropy(a, b)))
    return total
