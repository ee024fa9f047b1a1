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

from ..kernels.cd_relation import (
    RelationRows,
    Relations,
    block_caches,
    compile_relation_sweep,
    relation_predict,
    relation_sweep,
)
from ._fm_common import column_data
from .als import als_solver
from .mcmc import mcmc_solver

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
    def targets(self):
        return self.rel.rows.y

    @property
    def sw(self):
        return self.rel.sw

    @property
    def n_samples(self):
        return self.rel.rows.y.shape[0]

    # the interface of solvers._fm_common.ColumnData that the ALS and MCMC solvers use
    def row_state(self, state, target):
        """The (n, 3) row cache: column 0 is pred - target, columns 1 and 2 work space."""
        E = np.zeros((self.n_samples, 3), dtype=np.float64)
        E[:, 0] = predict_relation(self.rows, state) - target
        return E

    def refresh(self, E, state, target):
        """Recompute ``E[:, 0] = pred - target`` from the model (against round-off drift)."""
        E[:, 0] = predict_relation(self.rows, state)
        E[:, 0] -= target

    def compile_sweep(self, prior, model, E, z, g, cfg):
        compile_relation_sweep(self.rel, self.plan, prior, model, E, z, g, cfg)

    def sweep(self, prior, model, E, z, g, cfg):
        """One block-aware sweep (:func:`~fmlearn.kernels.cd_relation.relation_sweep`): with
        the logistic loss each block's pass is a majorization step, so ALS's objective still
        never increases."""
        return relation_sweep(self.rel, self.plan, prior, model, E, z, g, cfg)


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
                    bval, cptr, cidx, cval, wsum, *block_caches(R))
    rows = RelationRows(*raw(X_csr), ix, boff, bptr, bidx, bval)
    return RelationColumnData(rel, base.plan, rows)


def predict_relation(rows, state):
    """Predictions (float64, n) of ``state`` on :data:`RelationRows` ``rows``."""
    out = np.empty(rows.indptr.shape[0] - 1, dtype=np.float64)
    relation_predict(rows, float(state.w0), state.w, state.V, out)
    return out


# The ALS and MCMC solvers run on RelationColumnData as they do on ColumnData (the data object
# carries its sweep kernel): these names are those solvers, kept for the callers that say
# "relational" (same arguments and result, the same chain from the same random numbers).
relation_als_solver = als_solver
relation_mcmc_solver = mcmc_solver
