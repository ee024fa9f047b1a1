"""State shared by the online learners of the convex FMs (seed 002 and its baselines).

* :class:`SymAccumulator` - the accumulated gradient S = sum_t l'_t 1/2 G(x_t) as a symmetric CSR
  matrix whose pattern grows to cover every pair of features seen in a row (never a dense
  (d+1)^2 array unless the data fill it); values change in place inside the kernels.
* :class:`LowRankSym` - the model matrix C = U' K U with an orthonormal basis of at most
  ``r_max`` rows, or C = K dense (the identity basis) when ``r_max`` would reach D anyway.
* :class:`Tracker` - the small subspace with its maintained products that serves the
  eigen-steps (see :mod:`fmlearn.kernels.online`).
* :func:`choose_rank` - the memory budget: the basis costs ``r_max * D * 8`` bytes.

Every container lists its arrays and scalars in ``FIELDS`` so that an estimator can keep them as
``_``-suffixed attributes (and thereby save them in model files) and rebuild the container.
"""

import numpy as np
import scipy.sparse as sp

from ..kernels.online import pattern_missing, remap_values

# Bytes the low-rank basis and the accumulated-gradient pattern may take by default.
DEFAULT_BUDGET_MB = 256.0


# Up to this size (d + 1) the model matrix is always dense: 32 KB, cheaper than any basis.
SMALL_D = 64


def choose_rank(D, max_rank, budget_mb):
    """Rank cap of the model matrix and whether to store it dense (identity basis).

    Dense when D <= SMALL_D or when the cap reaches D (a basis would be as large as the
    matrix); otherwise the cap is ``max_rank`` reduced until ``r_max * D * 8`` bytes fit
    ``budget_mb``.
    """
    budget = budget_mb * 2**20
    if (max_rank >= D or D <= SMALL_D) and D * D * 8 <= budget:
        return D, True
    r_max = int(min(max_rank, D, max(2, budget // (8 * D))))
    if r_max >= D:
        return D, True
    return r_max, False


class SymAccumulator:
    """Symmetric CSR matrix on a growing pattern (see module docstring)."""

    FIELDS = ("indptr", "indices", "data")

    def __init__(self, D, budget_mb=DEFAULT_BUDGET_MB):
        self.D = D
        self.budget_mb = budget_mb
        self.indptr = np.zeros(D + 1, dtype=np.int64)
        self.indices = np.zeros(0, dtype=np.int32)
        self.data = np.zeros(0, dtype=np.float64)

    @classmethod
    def from_arrays(cls, D, indptr, indices, data, budget_mb=DEFAULT_BUDGET_MB):
        acc = cls(D, budget_mb)
        acc.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        acc.indices = np.ascontiguousarray(indices, dtype=np.int32)
        acc.data = np.ascontiguousarray(data, dtype=np.float64)
        return acc

    def ensure_pattern(self, indptr, indices, augment=True):
        """Grow the pattern to hold every pair (j, l) of every row of a CSR batch (and the
        bias column d when ``augment``). Values of existing entries are kept; new entries start
        at zero."""
        D = self.D
        d = D - 1 if augment else D
        if self.indices.shape[0] and not pattern_missing(self.indptr, self.indices, indptr,
                                                         indices, d, augment):
            return
        if not augment:
            n = indptr.shape[0] - 1
            Xb = sp.csr_matrix((np.ones(indices.shape[0]), indices, indptr), shape=(n, D))
            return self._merge((Xb.T @ Xb).tocsr())
        n = indptr.shape[0] - 1
        # the augmented rows [x_i, 1] as a 0/1 pattern; S's pattern is that of Xb' Xb
        lens = np.diff(indptr) + 1
        bptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=bptr[1:])
        bind = np.empty(bptr[-1], dtype=np.int32)
        pos = np.arange(bptr[-1], dtype=np.int64) - np.repeat(bptr[:-1], lens)
        row = np.repeat(np.arange(n), lens)
        is_bias = pos == lens[row] - 1
        bind[~is_bias] = indices
        bind[is_bias] = d
        Xb = sp.csr_matrix((np.ones(bind.shape[0]), bind, bptr), shape=(n, D))
        return self._merge((Xb.T @ Xb).tocsr())

    def _merge(self, P):
        D = self.D
        if self.indices.shape[0]:
            old = sp.csr_matrix((np.ones(self.indices.shape[0]), self.indices, self.indptr),
                                shape=(D, D))
            P = (P + old).tocsr()
        P.sum_duplicates()
        P.sort_indices()
        nnz = P.indices.shape[0]
        if nnz * 12 > self.budget_mb * 2**20:
            raise MemoryError(
                f"the accumulated-gradient pattern needs {nnz} entries ({nnz * 12 / 2**20:.0f} MB),"
                f" above the memory budget of {self.budget_mb:.0f} MB; raise memory_budget_mb or"
                " use sparser features")
        new_p = P.indptr.astype(np.int64)
        new_i = P.indices.astype(np.int32)
        new_d = np.zeros(nnz, dtype=np.float64)
        if self.indices.shape[0]:
            remap_values(self.indptr, self.indices, self.data, new_p, new_i, new_d)
        self.indptr, self.indices, self.data = new_p, new_i, new_d

    def to_dense(self):
        return sp.csr_matrix((self.data, self.indices, self.indptr),
                             shape=(self.D, self.D)).toarray()


class LowRankSym:
    """C = U[:r]' K[:r, :r] U[:r] (orthonormal rows), or C = K when ``ident``."""

    FIELDS = ("U", "K", "r")

    def __init__(self, D, r_max, ident):
        self.D = D
        self.ident = bool(ident)
        if self.ident:
            self.U = np.zeros((0, D))
            self.K = np.zeros((D, D))
            self.r = D
        else:
            self.U = np.zeros((r_max, D))
            self.K = np.zeros((r_max, r_max))
            self.r = 0

    @property
    def r_max(self):
        return self.K.shape[0]

    def dense(self):
        """The (D, D) matrix (for small D, tests and inspection)."""
        if self.ident:
            return 0.5 * (self.K + self.K.T)
        U = self.U[: self.r]
        return U.T @ self.K[: self.r, : self.r] @ U

    def trace_norm(self):
        if self.ident:
            return float(np.abs(np.linalg.eigvalsh(0.5 * (self.K + self.K.T))).sum())
        Kr = self.K[: self.r, : self.r]
        if self.r == 0:
            return 0.0
        # the rows of U are orthonormal, so C and the core share their nonzero spectrum
        return float(np.abs(np.linalg.eigvalsh(0.5 * (Kr + Kr.T))).sum())


class Tracker:
    """Subspace B (m_max x D, orthonormal rows) with S B', B S B' and U B' (see
    kernels.online)."""

    FIELDS = ("B", "SB", "GS", "UB", "nb")

    def __init__(self, D, m_max, r_max):
        self.B = np.zeros((m_max, D))
        self.SB = np.zeros((m_max, D))
        self.GS = np.zeros((m_max, m_max))
        self.UB = np.zeros((max(r_max, 1), m_max))
        self.nb = 0


def get_fields(obj, prefix):
    """``{prefix + name: value}`` for the container's FIELDS."""
    return {prefix + name: getattr(obj, name) for name in obj.FIELDS}


def set_fields(obj, prefix, values):
    for name in obj.FIELDS:
        val = values[prefix + name]
        setattr(obj, name, int(val) if np.isscalar(val) and name in ("r", "nb") else val)
    return obj


class OnlineLearner:
    """Interface of every online learner: it owns its state, ``learn`` runs one compiled loop
    over a batch in the given order and returns ``(bad_row, info)`` with the predictions made
    before each update written to ``out``; ``predict`` scores rows without learning; ``state``
    / ``load_state`` expose the arrays an estimator keeps (and saves)."""

    name = ""

    @property
    def t(self):
        return int(self.ist[0])

    def state(self):
        raise NotImplementedError

    def load_state(self, values):
        raise NotImplementedError


class FMStateLearner(OnlineLearner):
    """Base of the classic-FM learners: parameters (w0, w, V) and a step counter."""

    def __init__(self, n_features, n_factors, init_stdev, rng, loss_code):
        self.params0 = np.zeros(1)
        self.w = np.zeros(n_features)
        # rng None: arrays to be replaced by a stored state (no draw)
        self.V = (rng.standard_normal((n_features, n_factors)) * init_stdev if rng is not None
                  else np.zeros((n_features, n_factors)))
        self.ist = np.zeros(1, dtype=np.int64)
        self.loss_code = loss_code

    def predict(self, csr):
        from ..kernels.predict import fm_predict_csr

        indptr, indices, data = csr
        out = np.empty(indptr.shape[0] - 1)
        fm_predict_csr(indptr, indices, data, float(self.params0[0]), self.w, self.V, out)
        return out

    FIELDS = ("params0", "w", "V", "ist")

    def state(self):
        return {name: getattr(self, name) for name in self.FIELDS}

    def load_state(self, values):
        for name in self.FIELDS:
            setattr(self, name, np.array(values[name], copy=True))
        return self


class CCFMMatrixLearner(OnlineLearner):
    """Base of the CCFM learners whose model is the low-rank (or dense) matrix C."""

    def __init__(self, n_features, max_rank, budget_mb, loss_code, self_interaction):
        D = n_features + 1
        self.D = D
        r_max, ident = choose_rank(D, max_rank, budget_mb)
        self.C = LowRankSym(D, r_max, ident)
        self.loss_code = loss_code
        self.self_interaction = bool(self_interaction)
        self.ist = np.zeros(6, dtype=np.int64)
        self.ist[1] = self.C.r
        self.fst = np.zeros(3)

    def predict(self, csr):
        from ..kernels.online import ccfm_predict

        indptr, indices, data = csr
        out = np.empty(indptr.shape[0] - 1)
        ccfm_predict(indptr, indices, data, self.C.U, self.C.K, int(self.C.r), self.C.ident,
                     self.self_interaction, out)
        return out

    def matrix(self):
        return self.C.dense()

    def trace_norm(self):
        return self.C.trace_norm()

    def state(self):
        out = get_fields(self.C, "C_")
        out["ist"] = self.ist
        out["fst"] = self.fst
        return out

    def load_state(self, values):
        set_fields(self.C, "C_", values)
        self.C.ident = self.C.U.shape[0] == 0
        self.ist = np.array(values["ist"], dtype=np.int64)
        self.fst = np.array(values["fst"], dtype=np.float64)
        return self
