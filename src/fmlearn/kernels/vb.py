"""Mean-field variational Bayes for the classic FM: the coordinate-ascent kernels.

The model and priors are those of the Gibbs sampler (:mod:`fmlearn.solvers.mcmc`, libFM's
Bayesian FM): y_i ~ N(f(x_i), 1/alpha) (regression) or the probit model y_i = sign(z_i),
z_i ~ N(f(x_i), 1); w_j ~ N(mu_w,g, 1/lambda_w,g), v_jf ~ N(mu_f,g, 1/lambda_f,g), w0 ~
N(0, 1/reg0) (flat when reg0 = 0), lambda ~ Gamma(alpha_0/2, beta_0/2),
mu | lambda ~ N(mu_0, 1/(gamma_0 lambda)), alpha ~ Gamma(alpha_0/2, beta_0/2). The posterior
is approximated by a product of independent factors (mean field): N(m, s) for w0, every w_j
and every v_jf, Gamma for alpha and every lambda, N for every mu, and for probit a truncated
normal for every z_i. One call of :func:`vb_sweep` updates every factor once, each to the
exact maximiser of the evidence lower bound (ELBO) given the others, so the ELBO never
decreases (Bishop 2006, §10.1.1; the updates are those of myFM's ``VariationalFMRegressor``,
derived again here with libFM's hyper-priors, whose lambda update also sees the prior of mu).

The expected prediction under the mean field is the FM of the means,
E f_i = f(x_i; m), and (all factors independent)

    Var f_i = s_w0 + sum_j x_ij^2 s_wj + sum_f [ q_f^2 S2_f + S2_f^2 / 2 - 2 q_f T3_f
                                                 - S4_f / 2 + M4_f ]

with q_f = sum_j x_j m_jf, S2_f = sum_j x_j^2 s_jf, T3_f = sum_j x_j^3 s_jf m_jf,
S4_f = sum_j x_j^4 s_jf^2, M4_f = sum_j x_j^4 s_jf m_jf^2 (the variance of the pairwise sum of
independent Gaussians x_j v_jf). The update of v_jf: with h_i = x_ij (q_if - m_jf x_ij) the
mean of d f_i / d v_jf, S2'_i = S2_if - x_ij^2 s_jf and T3'_i = T3_if - x_ij^3 s_jf m_jf (the
other features' sums), the optimal factor is N(m', 1/P) with

    P  = alpha sum_i s_i (h_i^2 + x_ij^2 S2'_i) + lambda
    m' = m - (alpha sum_i s_i (e_i h_i + x_ij (q_if S2'_i - T3'_i)) + lambda (m - mu)) / P

where e_i = E f_i - target_i is the row's mean residual, alpha, lambda, mu are the
expectations under their factors and s_i the sample weights. w_j's update is the same with
h_i = x_ij and no variance terms (its derivative does not depend on other parameters).

Row state ``E`` (n, 8): column 0 the mean residual e_i, columns 1-3 and 4-6 q_i, S2_i and T3_i
of the factor being updated and of the next one. sum_i s_i Var f_i, which alpha's update needs,
is gathered along the sweep: the terms of Var f_i in x^4 and in the linear variances are
per-feature sums against weighted column sums of X, the others come from the finished factor's
row sums. One sweep visits the features in index order on one thread (the result does not
depend on the number of threads).
"""

import math
from collections import namedtuple

import numpy as np

from ._jit import njit

VBData = namedtuple("VBData", ["indptr", "indices", "data", "rindptr", "rindices", "rdata",
                               "y", "sw", "unit", "sw_total", "col_x2", "col_x4"])
VBData.__doc__ = """Training rows of a VB sweep: CSC (``indptr``, ``indices``, ``data``) and CSR
(``rindptr``, ``rindices``, ``rdata``) arrays of X, targets or labels in {-1, +1} ``y``
(float64), sample weights ``sw`` (``unit``: all 1, not read), their sum ``sw_total`` and the
weighted column sums ``col_x2`` = sum_i s_i x_ij^2, ``col_x4`` = sum_i s_i x_ij^4 (the parts
of sum_i s_i Var f_i that do not depend on the row)."""

VBModel = namedtuple("VBModel", ["w", "V", "w_var", "V_var", "scal"])
VBModel.__doc__ = """The Gaussian factors of w and V: means ``w`` (d,), ``V`` (d, k) and
variances ``w_var``, ``V_var``, and ``scal`` (float64): [w0 mean, w0 variance, E alpha, rate of
alpha's Gamma factor (its shape is fixed: (alpha_0 + sum of the weights) / 2),
sum_i s_i Var f_i of the current factors]."""

VBPrior = namedtuple("VBPrior", ["group", "group_size", "lam_w", "rate_w", "mu_w", "mu_var_w",
                                 "lam_v", "rate_v", "mu_v", "mu_var_v"])
VBPrior.__doc__ = """The factors of the hyper-parameters per group: ``group[j]`` feature j's
group, ``group_size`` (G,) the features per group; for w: E lambda ``lam_w`` (G,), the rate of
its Gamma factor ``rate_w`` (shape fixed: (alpha_0 + p_g + 1) / 2), the mean and variance of
mu's Gaussian factor ``mu_w``, ``mu_var_w``; the same per factor for V, shape (k, G)."""

VBConfig = namedtuple("VBConfig", ["probit", "hyper", "reg_bias", "alpha_0", "beta_0",
                                   "gamma_0", "mu_0"])
VBConfig.__doc__ = """Scalars of a sweep: ``probit`` (targets are the means of the truncated
latent z; alpha fixed at 1), the prior precision of w0 and libFM's hyper-prior constants."""

_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@njit(cache=True, nogil=True)
def mills_mean(m):
    """phi(m) / Phi(m), the mean shift of N(0, 1) truncated to z > -m (inverse Mills ratio),
    finite for every finite m: erfc where Phi(m) is representable, the asymptotic series of
    the Mills ratio below m = -25 (relative error below 1e-9 there)."""
    if m > -25.0:
        return math.exp(-0.5 * m * m - _LOG_SQRT_2PI) / (0.5 * math.erfc(-m / _SQRT2))
    t = -m
    u = 1.0 / (t * t)
    r = (1.0 - u * (1.0 - 3.0 * u * (1.0 - 5.0 * u * (1.0 - 7.0 * u)))) / t
    return 1.0 / r


@njit(cache=True, nogil=True)
def latent_means(data, E, target):
    """Probit: every target_i = E z_i under its truncated-normal factor given E f_i (the
    current ``E[:, 0] + target``); the residuals ``E[:, 0]`` follow."""
    for i in range(E.shape[0]):
        f = E[i, 0] + target[i]
        y = data.y[i]
        t = f + y * mills_mean(y * f)
        target[i] = t
        E[i, 0] = f - t


@njit(cache=True, nogil=True)
def row_variances(data, model, out):
    """Var f_i of every row under the factors (module docstring) into ``out``; returns
    sum_i s_i Var f_i."""
    w_var = model.w_var
    V = model.V
    S = model.V_var
    k = V.shape[1]
    s0 = model.scal[1]
    total = 0.0
    for i in range(data.rindptr.shape[0] - 1):
        lo = data.rindptr[i]
        hi = data.rindptr[i + 1]
        v = s0
        for p in range(lo, hi):
            x = data.rdata[p]
            v += x * x * w_var[data.rindices[p]]
        for f in range(k):
            q = 0.0
            s2 = 0.0
            t3 = 0.0
            s4 = 0.0
            m4 = 0.0
            for p in range(lo, hi):
                j = data.rindices[p]
                x = data.rdata[p]
                x2 = x * x
                m = V[j, f]
                s = S[j, f]
                q += x * m
                s2 += x2 * s
                t3 += x2 * x * s * m
                s4 += x2 * x2 * s * s
                m4 += x2 * x2 * s * m * m
            v += q * q * s2 + 0.5 * s2 * s2 - 2.0 * q * t3 - 0.5 * s4 + m4
        out[i] = v
        total += data.sw[i] * v
    return total


@njit(cache=True, nogil=True)
def hyper_update(theta, theta_var, group, size, lam, rate, mu, mu_var, cfg):
    """The factors of (lambda_g, mu_g) of every group from the factors of the parameters
    ``theta`` (means) and ``theta_var`` (variances), in place: first lambda's Gamma factor
    (shape (alpha_0 + p_g + 1) / 2, rate (beta_0 + gamma_0 E(mu - mu_0)^2
    + sum_j E(theta_j - mu)^2) / 2; E lambda = shape / rate), then mu's Gaussian factor (mean
    (sum_j m_j + gamma_0 mu_0) / (p_g + gamma_0), variance 1 / (E lambda (p_g + gamma_0)))."""
    n_groups = size.shape[0]
    total = np.zeros(n_groups)
    dev = np.zeros(n_groups)
    for j in range(theta.shape[0]):
        g = group[j]
        t = theta[j]
        total[g] += t
        dev[g] += (t - mu[g]) ** 2 + theta_var[j]
    for g in range(n_groups):
        b = 0.5 * (cfg.beta_0 + cfg.gamma_0 * ((mu[g] - cfg.mu_0) ** 2 + mu_var[g])
                   + dev[g] + size[g] * mu_var[g])
        rate[g] = b
        lam[g] = 0.5 * (cfg.alpha_0 + size[g] + 1.0) / b
        p = size[g] + cfg.gamma_0
        mu[g] = (total[g] + cfg.gamma_0 * cfg.mu_0) / p
        mu_var[g] = 1.0 / (lam[g] * p)


# Row state columns: 0 the mean residual; two blocks of (q, S2, T3), 1-3 and 4-6, alternately
# the factor being updated and the next one (whose sums the current pass fills on the same
# visit of each entry, as kernels.cd does for q); 8 columns make a row one 64-byte line.
N_COLUMNS = 8


@njit(cache=True, nogil=True)
def _linear_pass(data, prior, model, E, alpha, nxt):
    # Every w_j: N(m', 1/P), P = alpha sum s x^2 + lambda, m' = m - (alpha sum s e x
    # + lambda (m - mu)) / P; the residuals follow the mean. Fills factor 0's sums into the
    # block at column ``nxt`` (-1: no factor).
    w = model.w
    w_var = model.w_var
    V = model.V
    S = model.V_var
    for j in range(w.shape[0]):
        g = prior.group[j]
        lam = prior.lam_w[g]
        old = w[j]
        gs = 0.0
        hh = 0.0
        for p in range(data.indptr[j], data.indptr[j + 1]):
            i = data.indices[p]
            x = data.data[p]
            s = 1.0 if data.unit else data.sw[i]
            gs += s * E[i, 0] * x
            hh += s * x * x
        prec = alpha * hh + lam
        w[j] = old - (alpha * gs + lam * (old - prior.mu_w[g])) / prec
        w_var[j] = 1.0 / prec
        delta = w[j] - old
        if nxt < 0:
            if delta != 0.0:
                for p in range(data.indptr[j], data.indptr[j + 1]):
                    E[data.indices[p], 0] += delta * data.data[p]
            continue
        m = V[j, 0]
        sv = S[j, 0]
        for p in range(data.indptr[j], data.indptr[j + 1]):
            i = data.indices[p]
            x = data.data[p]
            x2 = x * x
            E[i, 0] += delta * x
            E[i, nxt] += x * m
            E[i, nxt + 1] += x2 * sv
            E[i, nxt + 2] += x2 * x * sv * m


@njit(cache=True, nogil=True)
def _factor_pass(data, prior, model, E, alpha, f, cur, nxt):
    # Every v_jf of factor f (module docstring) from its sums in the block at column ``cur``;
    # the row state follows each update, and the next factor's sums are added to the block at
    # ``nxt`` (-1: f is the last factor) on the same visit of each entry. The loops are
    # written out for unit weights and for the last factor (no per-entry branches).
    V = model.V
    S = model.V_var
    indptr = data.indptr
    indices = data.indices
    values = data.data
    sw = data.sw
    for j in range(V.shape[0]):
        g = prior.group[j]
        lam = prior.lam_v[f, g]
        old = V[j, f]
        s_old = S[j, f]
        so = s_old * old
        gs = 0.0
        hh = 0.0
        if data.unit:
            for p in range(indptr[j], indptr[j + 1]):
                i = indices[p]
                x = values[p]
                x2 = x * x
                q = E[i, cur]
                h = x * (q - old * x)
                s2p = E[i, cur + 1] - x2 * s_old
                gs += E[i, 0] * h + x * (q * s2p - E[i, cur + 2] + x2 * x * so)
                hh += h * h + x2 * s2p
        else:
            for p in range(indptr[j], indptr[j + 1]):
                i = indices[p]
                x = values[p]
                x2 = x * x
                s = sw[i]
                q = E[i, cur]
                h = x * (q - old * x)
                s2p = E[i, cur + 1] - x2 * s_old
                gs += s * (E[i, 0] * h + x * (q * s2p - E[i, cur + 2] + x2 * x * so))
                hh += s * (h * h + x2 * s2p)
        prec = alpha * hh + lam
        V[j, f] = old - (alpha * gs + lam * (old - prior.mu_v[f, g])) / prec
        S[j, f] = 1.0 / prec
        delta = V[j, f] - old  # in the model's precision, as the row state must follow it
        ds = S[j, f] - s_old
        dt = S[j, f] * V[j, f] - so
        if nxt >= 0:
            mn = V[j, f + 1]
            sn = S[j, f + 1]
            smn = sn * mn
            for p in range(indptr[j], indptr[j + 1]):
                i = indices[p]
                x = values[p]
                x2 = x * x
                x3 = x2 * x
                E[i, 0] += delta * x * (E[i, cur] - old * x)
                E[i, cur] += delta * x
                E[i, cur + 1] += ds * x2
                E[i, cur + 2] += dt * x3
                E[i, nxt] += x * mn
                E[i, nxt + 1] += x2 * sn
                E[i, nxt + 2] += x3 * smn
        else:
            for p in range(indptr[j], indptr[j + 1]):
                i = indices[p]
                x = values[p]
                x2 = x * x
                E[i, 0] += delta * x * (E[i, cur] - old * x)
                E[i, cur] += delta * x
                E[i, cur + 1] += ds * x2
                E[i, cur + 2] += dt * x2 * x


@njit(cache=True, nogil=True)
def _release_block(data, E, c, variance):
    # Zero the block at column c for the next factor's sums; with ``variance``, first return
    # sum_i s_i (q^2 S2 + S2^2 / 2 - 2 q T3) of the finished factor whose sums it holds: the
    # part of that factor's Var f_i that depends on the row (the x^4 terms are per-feature,
    # see _feature_variance).
    total = 0.0
    for i in range(E.shape[0]):
        if variance:
            q = E[i, c]
            s2 = E[i, c + 1]
            v = q * q * s2 + 0.5 * s2 * s2 - 2.0 * q * E[i, c + 2]
            total += v if data.unit else data.sw[i] * v
        E[i, c] = 0.0
        E[i, c + 1] = 0.0
        E[i, c + 2] = 0.0
    return total


@njit(cache=True, nogil=True)
def _feature_variance(data, model):
    # The per-feature parts of sum_i s_i Var f_i: s_w0 sum_i s_i + sum_j s_wj sum_i s_i x_ij^2
    # + sum_jf (s_jf m_jf^2 - s_jf^2 / 2) sum_i s_i x_ij^4.
    total = model.scal[1] * data.sw_total
    for j in range(model.w.shape[0]):
        c = 0.0
        for f in range(model.V.shape[1]):
            s = model.V_var[j, f]
            c += s * model.V[j, f] ** 2 - 0.5 * s * s
        total += model.w_var[j] * data.col_x2[j] + c * data.col_x4[j]
    return total


@njit(cache=True, nogil=True)
def vb_sweep(data, prior, model, E, target, cfg):
    """One coordinate-ascent sweep over every factor, in place, in the Gibbs sampler's order:
    (probit) the latent means, (regression) alpha, w0, the hyper-parameters of w, every w_j,
    the hyper-parameters of every factor, then V factor by factor.

    ``E[:, 0]`` must hold E f_i - target_i on entry (module docstring; ``E`` has
    :data:`N_COLUMNS` columns, the others are work space); ``target`` holds the regression
    targets or the latent means (updated here for probit). Regression reads
    sum_i s_i Var f_i of the current factors from ``model.scal[4]`` (:func:`row_variances`
    before the first sweep) and leaves that of the new factors there. Returns True when the
    means, variances and residuals are finite afterwards.
    """
    if cfg.probit:
        latent_means(data, E, target)
        alpha = 1.0
    else:
        ss = 0.0
        for i in range(E.shape[0]):
            r = E[i, 0]
            ss += r * r if data.unit else data.sw[i] * r * r
        rate = 0.5 * (cfg.beta_0 + ss + model.scal[4])
        alpha = 0.5 * (cfg.alpha_0 + data.sw_total) / rate
        model.scal[3] = rate
    model.scal[2] = alpha
    # w0: N(m', 1/P), P = alpha sum s + reg0
    g = 0.0
    for i in range(E.shape[0]):
        g += E[i, 0] if data.unit else data.sw[i] * E[i, 0]
    prec = alpha * data.sw_total + cfg.reg_bias
    old = model.scal[0]
    new = old - (alpha * g + cfg.reg_bias * old) / prec
    model.scal[0] = new
    model.scal[1] = 1.0 / prec
    for i in range(E.shape[0]):
        E[i, 0] += new - old
    if cfg.hyper:
        hyper_update(model.w, model.w_var, prior.group, prior.group_size, prior.lam_w,
                     prior.rate_w, prior.mu_w, prior.mu_var_w, cfg)
    k = model.V.shape[1]
    regression = not cfg.probit
    if k > 0:
        _release_block(data, E, 1, False)
    _linear_pass(data, prior, model, E, alpha, 1 if k > 0 else -1)
    for f in range(k if cfg.hyper else 0):
        hyper_update(model.V[:, f], model.V_var[:, f], prior.group, prior.group_size,
                     prior.lam_v[f], prior.rate_v[f], prior.mu_v[f], prior.mu_var_v[f], cfg)
    pairwise = 0.0
    for f in range(k):
        cur = 1 if f % 2 == 0 else 4
        nxt = 5 - cur if f + 1 < k else -1
        if nxt >= 0:  # the block of factor f - 1 (finished) takes factor f + 1's sums
            pairwise += _release_block(data, E, nxt, regression and f > 0)
        _factor_pass(data, prior, model, E, alpha, f, cur, nxt)
    if regression:
        for f in range(max(0, k - 2), k):  # the blocks not released
            pairwise += _release_block(data, E, 1 if f % 2 == 0 else 4, True)
        model.scal[4] = pairwise + _feature_variance(data, model)
    ok = math.isfinite(model.scal[0])
    for i in range(E.shape[0]):
        ok = ok and math.isfinite(E[i, 0])
    for j in range(model.V.shape[0]):
        ok = ok and math.isfinite(model.w[j]) and math.isfinite(model.w_var[j])
        for f in range(k):
            ok = ok and math.isfinite(model.V[j, f]) and math.isfinite(model.V_var[j, f])
    return ok
