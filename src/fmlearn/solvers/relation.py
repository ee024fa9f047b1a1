"""ALS and MCMC on relational data (Rendle 2013, VLDB, §5): the solvers of
:mod:`fmlearn.solvers.als` and :mod:`fmlearn.solvers.mcmc` with the block-aware sweep of
:mod:`fmlearn.kernels.cd_relation`.

Same settings, same chain, same random numbers, same loop (:func:`~fmlearn.solvers.als.
run_sweeps`, :func:`~fmlearn.solvers.mcmc.run_chain`): only the data record, the sweep and the
prediction that rebuilds the row states differ. With the rows of the expanded matrix in the
same order and the flat sweep visiting the features in the relational order (the row-level
features in their plan's colour classes, then each block's in index order), the ALS iterates
and the MCMC chain equal the flat solvers' up to the order of floating-point summation.
"""

from dataclasses import dataclass

import numpy as np

from ..kernels.cd import Config, Model, Prior, gamma_shapes, n_normals
from ..kernels.cd_relation import (
    N_CACHE,
    RelationRows,
    Relations,
    compile_relation_sweep,
    relation_predict,
    relation_sweep,
)
from ..kernels.losses import SMOOTHNESS, SQUARED
from ._fm_common import column_data, group_index
from .als import fixed_prior, run_sweeps
from .mcmc import _reserve, draw_latent, run_chain, sweep_config

__all__ = ["RelationColumnData", "relation_column_data", "relation_rows", "predict_relation",
           "relation_als_solver", "relation_mcmc_solver"]

_EMPTY = np.zeros(0)


@dataclass
class RelationColumnData:
    """Training data of the relational solvers: the kernel record ``rel``
    (:data:`~fmlearn.kernels.cd_relation.Relations`), the row-level features' ``plan``
    (:class:`~fmlearn.kernels.cd.Plan` of :func:`~fmlearn.solvers._fm_common.column_data`) and
    the same samples as :data:`~fmlearn.kernels.cd_relation.RelationRows` for predictions."""

    rel: Relations
    plan: object
    rows: RelationRows

    @property
    def y(self):
        return self.rel.rows.y

    @property
    def sw(self):
        return self.rel.sw

    @property
    def n_samples(self):
        return self.rel.rows.y.shape[0]


def _stack(blocks, d0, dtype):
    """The blocks' matrices stacked: row offsets, feature offsets, the rows by row (global
    feature ids) and by feature (global block rows)."""
    import scipy.sparse as sp

    boff = np.zeros(len(blocks) + 1, dtype=np.int64)
    foff = np.full(len(blocks) + 1, d0, dtype=np.int64)
    for r, (_, B) in enumerate(blocks):
        boff[r + 1] = boff[r] + B.shape[0]
        foff[r + 1] = foff[r] + B.shape[1]
    if blocks:
        S = sp.block_diag([B for _, B in blocks], format="csr", dtype=dtype)
    else:
        S = sp.csr_matrix((0, 0), dtype=dtype)
    S.sort_indices()
    Sc = S.tocsc()
    Sc.sort_indices()
    bptr = np.ascontiguousarray(S.indptr, dtype=np.int64)
    # uint32 indices: numba indexes with them without the check for negative indices
    # (measured 12 % faster on the block passes)
    bidx = np.ascontiguousarray(S.indices.astype(np.int64) + d0, dtype=np.uint32)
    bval = np.ascontiguousarray(S.data, dtype=dtype)
    cptr = np.ascontiguousarray(Sc.indptr, dtype=np.int64)
    cidx = np.ascontiguousarray(Sc.indices, dtype=np.uint32)
    cval = np.ascontiguousarray(Sc.data, dtype=dtype)
    return boff, foff, bptr, bidx, bval, cptr, cidx, cval


def _sample_index(blocks, boff, n):
    ix = np.empty((len(blocks), n), dtype=np.uint32)
    for r, (idx, _) in enumerate(blocks):
        ix[r] = np.asarray(idx, dtype=np.int64) + boff[r]
    return ix


def relation_rows(X_csr, blocks):
    """:data:`~fmlearn.kernels.cd_relation.RelationRows` of validated relational samples:
    ``X_csr`` the row-level features (canonical CSR), ``blocks`` a list of ``(indices,
    block_csr)`` (checked by :func:`fmlearn.relation.check_relation_data`)."""
    from .._data import raw

    dtype = X_csr.dtype
    boff, _, bptr, bidx, bval, *_ = _stack(blocks, X_csr.shape[1], dtype)
    return RelationRows(*raw(X_csr), _sample_index(blocks, boff, X_csr.shape[0]), boff, bptr,
                        bidx, bval)


def relation_column_data(X_csr, blocks, y, sw):
    """:class:`RelationColumnData` of validated relational samples (see :func:`relation_rows`)
    with targets ``y`` and weights ``sw``: the row-level features through
    :func:`~fmlearn.solvers._fm_common.column_data` (its colouring and plan), the blocks
    stacked."""
    from .._data import raw

    n, d0 = X_csr.shape
    dtype = X_csr.dtype
    base = column_data(X_csr, y, sw)
    boff, foff, bptr, bidx, bval, cptr, cidx, cval = _stack(blocks, d0, dtype)
    ix = _sample_index(blocks, boff, n)
    R = max(1, int(boff[-1]))
    wsum = np.zeros(R)
    for r in range(ix.shape[0]):  # in sample order, as the sweep would add them
        np.add.at(wsum, ix[r], base.cols.sw)
    # Runs of one block row: on average two samples or more per run.
    runs = (np.count_nonzero(np.diff(ix, axis=1), axis=1) + 1) if n else np.zeros(len(blocks))
    grouped = np.asarray(2 * runs <= n, dtype=np.bool_).reshape(len(blocks))
    rel = Relations(base.cols, base.cols.sw, base.cols.unit, ix, grouped, boff, foff, bptr, bidx,
                    bval, cptr, cidx, cval, wsum, np.zeros((R, N_CACHE)), np.zeros(R))
    rows = RelationRows(*raw(X_csr), ix, boff, bptr, bidx, bval)
    return RelationColumnData(rel, base.plan, rows)


def predict_relation(rows, state):
    """Predictions (float64, n) of ``state`` on :data:`RelationRows` ``rows``."""
    out = np.empty(rows.indptr.shape[0] - 1, dtype=np.float64)
    relation_predict(rows, float(state.w0), state.w, state.V, out)
    return out


def _row_state(data, state, target):
    E = np.zeros((data.n_samples, 3), dtype=np.float64)
    E[:, 0] = predict_relation(data.rows, state) - target
    return E


def _refresh(E, data, state, target):
    E[:, 0] = predict_relation(data.rows, state)
    E[:, 0] -= target


def relation_als_solver(data, state, settings, callback=None, on_start=None):
    """:func:`fmlearn.solvers.als.als_solver` on :class:`RelationColumnData` (same arguments
    and result). With the logistic loss each block's pass is a majorization step (see
    :mod:`fmlearn.kernels.cd_relation`): the objective still never increases."""
    d, k = state.V.shape
    y = data.y
    code = settings.loss_code
    prior = fixed_prior(settings.groups, d, k, settings.reg_linear, settings.reg_pairwise)
    cfg = Config(code, float(SMOOTHNESS[code]), False, False, False, float(settings.reg_bias),
                 1.0, 1.0, 1.0, 0.0)
    model = Model(state.w, state.V, np.array([state.w0, 1.0]))
    target = y if code == SQUARED else np.zeros_like(y)
    E = _row_state(data, state, target)
    compile_relation_sweep(data.rel, data.plan, prior, model, E, _EMPTY, _EMPTY, cfg)
    if on_start is not None:
        on_start()
    return run_sweeps(
        settings, state, model,
        lambda: relation_sweep(data.rel, data.plan, prior, model, E, _EMPTY, _EMPTY, cfg),
        lambda: _refresh(E, data, state, target),
        None if callback is None else lambda it: callback(it, E, target))


def relation_mcmc_solver(data, state, chain, settings, seed, callback=None, on_start=None):
    """:func:`fmlearn.solvers.mcmc.mcmc_solver` on :class:`RelationColumnData` (same arguments
    and result): the same chain, drawn from the same random numbers."""
    d, k = state.V.shape
    group, size = settings.groups if settings.groups is not None else group_index(None, d)
    prior = Prior(group, size, chain.lambda_w, chain.mu_w, chain.lambda_v, chain.mu_v)
    cfg = Config(SQUARED, 1.0, True, True, not settings.probit, float(settings.reg_bias),
                 settings.alpha_0, settings.beta_0, settings.gamma_0, settings.mu_0,
                 float(settings.relax))
    shapes = gamma_shapes(d, k, size, cfg, float(data.sw.sum()))
    nz = n_normals(d, k, size.shape[0])
    model = Model(state.w, state.V, np.array([state.w0, chain.alpha]))
    target = data.y if not settings.probit else np.zeros_like(data.y)
    E = _row_state(data, state, target)
    _reserve(chain, state, settings)
    compile_relation_sweep(data.rel, data.plan, prior, model, E, np.zeros(nz), shapes, cfg)
    if on_start is not None:
        on_start()

    def sweep(rs):
        nonlocal target
        if settings.probit:
            pred = E[:, 0] + target
            target = draw_latent(pred, data.y, 1.0 - rs.random(pred.shape[0]))
            E[:, 0] = pred - target
        return relation_sweep(data.rel, data.plan, prior, model, E, rs.standard_normal(nz),
                              rs.standard_gamma(shapes), sweep_config(cfg, chain, settings))

    return run_chain(settings, seed, chain, state, model, sweep,
                     lambda: _refresh(E, data, state, target),
                     None if callback is None else lambda it: callback(it, E, target))
