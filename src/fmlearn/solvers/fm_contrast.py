"""The classic FM's three solvers on contrast targets y_g = sum_i C[g, i] f(x_i) (Lin et al. 2019,
§4.2).

f(x) = w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l is never observed: each target is a linear
combination of f at some rows (a double difference of four). Every parameter enters f, hence
every target, linearly, so libFM's three solvers carry over with targets in place of rows:

* ALS (:func:`als_contrast_solver`): coordinate descent, each coordinate set to the exact
  minimiser of sum_g s_g (y_g - (C f)_g)^2 + penalties along it
  (:mod:`fmlearn.kernels.cd_contrast`);
* MCMC (:func:`mcmc_contrast_solver`): Gibbs sampling of the Bayesian FM with
  y_g ~ N((C f)_g, 1/alpha): the full conditionals stay Gaussian, alpha's Gamma posterior
  counts targets; same hyper-priors and groups as :mod:`fmlearn.solvers.mcmc`;
* SGD (:func:`sgd_contrast_solver`): steps on targets (:mod:`fmlearn.kernels.sgd_contrast`).

With C the identity each is the plain solver (same order, same random numbers). When every row
of C sums to zero, w0 cannot be learned (C (f + c) = C f): it is held at its starting value.
Rows that no target references carry no information and are dropped by
:func:`contrast_rows`.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._data import raw
from ..kernels.cd import (
    Config,
    Model,
    Prior,
    cooccurrence_work,
    gamma_shapes,
    greedy_coloring,
    n_normals,
)
from ..kernels.cd_contrast import ContrastColumns, ContrastPlan, contrast_sweep
from ..kernels.losses import SQUARED
from ..kernels.predict import fm_predict_csr
from ..kernels.sgd import Params
from ..kernels.sgd_contrast import Targets, sgd_target_epoch, target_work
from . import _fm_common as common
from ._fm_common import group_index
from .als import fixed_prior, run_sweeps
from .mcmc import _reserve, run_chain, sweep_config
from .sgd import run_epochs, sgd_config

__all__ = ["ContrastData", "contrast_rows", "contrast_data", "target_residuals",
           "als_contrast_solver", "mcmc_contrast_solver", "sgd_contrast_solver"]


@dataclass
class ContrastData:
    """Validated training data: X (canonical CSR, float32/64) and C (CSR float64, n_targets x
    n_rows, every row of X referenced), targets ``y`` and weights ``sw`` (n_targets,), and
    ``bias`` (w0 is learned). ``cols``/``plan`` (the coordinate solvers' records) and
    ``targets`` (SGD's) are built on first use."""

    X: object
    C: object
    y: np.ndarray
    sw: np.ndarray
    bias: bool
    _cols: object = None
    _targets: object = None

    @property
    def n_targets(self):
        return self.y.shape[0]

    @property
    def rowsum(self):
        if not self.bias:
            return np.zeros(self.n_targets)
        return np.asarray(self.C.sum(axis=1)).ravel()

    @property
    def cols(self):
        if self._cols is None:
            self._cols = _columns(self)
        return self._cols

    @property
    def targets(self):
        if self._targets is None:
            c = self.C
            self._targets = Targets(c.indptr.astype(np.int64), c.indices.astype(np.int64),
                                    c.data, *raw(self.X), self.y, self.sw, self.rowsum)
        return self._targets


def contrast_rows(X, C):
    """(X, C) without the rows that no target references (no information; the colouring
    needs every row inside some target)."""
    used = np.flatnonzero(np.diff(C.tocsc().indptr) > 0)
    if used.shape[0] == X.shape[0]:
        return X, C
    return X[used], C[:, used].tocsr()


def contrast_data(X, C, y, sw, bias):
    """:class:`ContrastData` from validated inputs (see :func:`contrast_rows`)."""
    X, C = contrast_rows(X, C)
    C = sp.csr_matrix(C, dtype=np.float64)
    C.sort_indices()
    return ContrastData(X, C, np.ascontiguousarray(y, dtype=np.float64),
                        np.ascontiguousarray(sw, dtype=np.float64), bool(bias))


def _columns(data):
    """The records of :mod:`fmlearn.kernels.cd_contrast` and the target-level colouring."""
    X, C = data.X, data.C
    csc = raw(X.tocsc())
    CT = C.T.tocsr()
    CT.sort_indices()
    # B: feature j touches target g when a row of target g holds j.
    one = lambda M: sp.csr_matrix((np.ones(M.nnz), M.indices, M.indptr), shape=M.shape)  # noqa: E731
    B = (one(C) @ one(X)).tocsr()
    B.sort_indices()
    Bc = B.tocsc()
    Bc.sort_indices()
    bptr, btgt = Bc.indptr.astype(np.int64), Bc.indices.astype(np.int64)
    sw = data.sw
    cols = ContrastColumns(*csc, CT.indptr.astype(np.int64), CT.indices.astype(np.int64),
                           CT.data, bptr, btgt, data.y, sw, bool(np.all(sw == 1.0)),
                           data.rowsum, data.bias)
    d = X.shape[1]
    order = np.arange(d, dtype=np.int64)
    color_ptr = np.array([0, d], dtype=np.int64)
    parallel = np.zeros(1, dtype=np.bool_)
    Bptr = B.indptr.astype(np.int64)
    if cooccurrence_work(Bptr) <= common.COLORING_BUDGET:
        color, n_colors = greedy_coloring(bptr, btgt, Bptr, B.indices.astype(np.int64), d)
        if n_colors < d:
            order = np.argsort(color, kind="stable").astype(np.int64)
            color_ptr = np.searchsorted(color[order], np.arange(n_colors + 1)).astype(np.int64)
            work = (np.diff(csc[0]) + np.diff(bptr))[order]
            parallel = ((np.add.reduceat(work, color_ptr[:-1]) >= common.MIN_PARALLEL_NNZ)
                        & (data.n_targets >= common.MIN_PARALLEL_ROWS))
    return cols, ContrastPlan(order, color_ptr, parallel)


def target_residuals(data, state):
    """e = C f - y (float64, n_targets) for the model ``state``."""
    indptr, indices, vals = raw(data.X)
    pred = np.empty(indptr.shape[0] - 1)
    fm_predict_csr(indptr, indices, vals, state.w0, state.w, state.V, pred)
    return data.C @ pred - data.y


def _work(data):
    # Q (factor sums of the rows) and u (the scatter buffer of u_g, zero between updates).
    return np.zeros((data.X.shape[0], 2)), np.zeros(data.n_targets)


def als_contrast_solver(data, state, settings, callback=None):
    """``settings.n_iter`` ALS sweeps (:class:`~fmlearn.solvers.als.ALSSettings`, squared
    loss) on the targets; ``state`` is updated in place.

    ``callback(iteration, E)`` is called after each sweep with the target residuals
    e = C f - y; returning True stops. Returns ``(state, n_iter, info)``, info with
    ``"diverged"`` (None or a message).
    """
    if settings.loss_code != SQUARED:
        raise ValueError("contrast targets take the squared loss only")
    d, k = state.V.shape
    cols, plan = data.cols
    prior = fixed_prior(settings.groups, d, k, settings.reg_linear, settings.reg_pairwise)
    cfg = Config(SQUARED, 1.0, False, False, False, float(settings.reg_bias), 1.0, 1.0, 1.0,
                 0.0)
    model = Model(state.w, state.V, np.array([state.w0, 1.0]))
    E = target_residuals(data, state)
    Q, u = _work(data)
    empty = (np.zeros(0), np.zeros(0))

    def refresh():
        E[:] = target_residuals(data, state)

    return run_sweeps(settings, state, model,
                      lambda: contrast_sweep(cols, plan, prior, model, E, Q, u, empty, cfg),
                      refresh, None if callback is None else lambda it: callback(it, E))


def mcmc_contrast_solver(data, state, chain, settings, seed, callback=None):
    """``settings.n_iter`` Gibbs sweeps (:class:`~fmlearn.solvers.mcmc.MCMCSettings`,
    regression) on the targets; ``state`` and ``chain`` are updated in place, the kept
    samples stored in ``chain`` as by :func:`~fmlearn.solvers.mcmc.mcmc_solver`, whose random
    streams (``default_rng([seed, t])`` per sweep) it shares.

    ``callback(iteration, E)`` as in :func:`als_contrast_solver`. Returns
    ``(state, n_iter, info)``.
    """
    if settings.probit:
        raise ValueError("contrast targets take the Gaussian (regression) model only")
    d, k = state.V.shape
    cols, plan = data.cols
    group, size = settings.groups if settings.groups is not None else group_index(None, d)
    prior = Prior(group, size, chain.lambda_w, chain.mu_w, chain.lambda_v, chain.mu_v)
    cfg = Config(SQUARED, 1.0, True, True, True, float(settings.reg_bias), settings.alpha_0,
                 settings.beta_0, settings.gamma_0, settings.mu_0, float(settings.relax))
    shapes = gamma_shapes(d, k, prior.group_size, cfg, float(data.sw.sum()))
    nz = n_normals(d, k, prior.group_size.shape[0])
    model = Model(state.w, state.V, np.array([state.w0, chain.alpha]))
    E = target_residuals(data, state)
    Q, u = _work(data)
    _reserve(chain, state, settings)

    def refresh():
        E[:] = target_residuals(data, state)

    def sweep(rs):
        return contrast_sweep(cols, plan, prior, model, E, Q, u,
                              (rs.standard_normal(nz), rs.standard_gamma(shapes)),
                              sweep_config(cfg, chain, settings))

    return run_chain(settings, seed, chain, state, model, sweep, refresh,
                     None if callback is None else lambda it: callback(it, E))


def sgd_contrast_solver(data, state, t, settings, seed, callback=None):
    """``settings.n_iter`` SGD epochs over the targets (:class:`~fmlearn.solvers.sgd.
    SGDSettings`; the clip range is not used), from ``state`` (in place).

    The epoch starting at step t visits the targets in ``block_shuffle`` order drawn from
    ``default_rng([seed, t])`` (or in order without ``settings.shuffle``), as the plain SGD
    visits rows. ``callback(epoch)``; returns ``(state, t, n_iter, info)``.
    """
    if settings.loss_code != SQUARED:
        raise ValueError("contrast targets take the squared loss only")
    rows = data.targets
    n_t = data.n_targets
    cfg = sgd_config(settings, data.y, SQUARED, settings.reg_bias if data.bias else 0.0,
                     -np.inf, np.inf)
    params = Params(state.w, state.V, np.array([state.w0], dtype=np.float64))
    per_target = np.diff(data.C.indptr)
    row_nnz = np.diff(data.X.indptr)
    entries = np.add.reduceat(row_nnz[data.C.indices], data.C.indptr[:-1]) if n_t else [0]
    work = target_work(state.w.shape[0], state.V.shape[1], int(per_target.max()),
                       int(np.max(entries)))
    return run_epochs(n_t, t, settings, seed, state, params, cfg.limit, "target", callback,
                      lambda order, t: sgd_target_epoch(rows, params, order, t, cfg, work))
