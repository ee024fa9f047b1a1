"""What the online learners share: the learner interface (state as named records, the per-row
protocol, named arrays for model files, snapshots for failure atomicity), the memory budget,
and the Python side of the accumulated gradient S (growing its exact pattern, switching to the
Frequent Directions sketch, see :mod:`fmlearn.kernels.symacc`).
"""

import numpy as np
import scipy.sparse as sp

from ..kernels.eigtrack import Tracker
from ..kernels.lowrank import LowRank
from ..kernels.steps import BAD_PREDICTION, BAD_STEP, OK, Rows
from ..kernels.symacc import EXACT, SKETCH, SymAcc, pattern_missing, remap_values
from ._fm_common import init_state

# Bytes the learners' arrays (basis of C, tracked subspace, accumulated gradient) may take by
# default.
DEFAULT_BUDGET_MB = 256.0

# Up to this size (d + 1) the CCFM's model matrix is dense: 32 KB, cheaper than any basis, and
# the tracked subspace is the whole space (the eigen-step is exact).
SMALL_D = 64

# Rows of the Frequent Directions sketch of S when ``sketch_size="auto"``: 2 x 32 rows of
# length D per sign. The exact sparse S is kept while its pattern has at most
# max(SKETCH_MIN_ENTRIES, SKETCH_COST_FACTOR * sketch_size * D) entries: while a product with
# it costs no more than one with the sketch, or in any case while it is small (2^20 entries,
# 12 MB, about a millisecond per product), because the sketch costs accuracy (measured in
# benchmarks/bench_online_flat.py --accuracy).
AUTO_SKETCH_SIZE = 32
SKETCH_COST_FACTOR = 4
SKETCH_MIN_ENTRIES = 2**20

# Rows learned per compiled call while S is exact, so that its pattern grows (and may switch
# to the sketch) between calls instead of once for a whole batch.
EXACT_CHUNK = 1024


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


def new_lowrank(D, r_max, ident):
    if ident:
        return LowRank(np.zeros((0, D)), np.zeros((D, D)), np.array([D], np.int64), True,
                       np.zeros(1))
    return LowRank(np.zeros((r_max, D)), np.zeros((r_max, r_max)), np.zeros(1, np.int64), False,
                   np.zeros(1))


def new_tracker(D, m_max, r_max):
    return Tracker(np.zeros((m_max, D)), np.zeros((m_max, D)), np.zeros((m_max, m_max)),
                   np.zeros((max(r_max, 1), m_max)), np.zeros(1, np.int64),
                   np.zeros(1, np.int64))


def flatten(record, prefix=""):
    """``{name: array}`` of a (nested) state record; scalar fields become 1-element arrays."""
    out = {}
    for name, value in zip(record._fields, record, strict=True):
        key = prefix + name
        if hasattr(value, "_fields"):
            out.update(flatten(value, key + "_"))
        elif isinstance(value, np.ndarray):
            out[key] = value
        else:
            out[key] = np.array([value], dtype=np.int64)
    return out


def rebuild(template, arrays, prefix=""):
    """The record ``template`` with every leaf taken from ``arrays`` (no copy); raises
    ``ValueError`` naming a missing array or one of the wrong kind or dimension."""
    values = []
    for name, value in zip(template._fields, template, strict=True):
        key = prefix + name
        if hasattr(value, "_fields"):
            values.append(rebuild(value, arrays, key + "_"))
            continue
        if key not in arrays:
            raise ValueError(f"the learner state lacks {key!r}")
        arr = np.asarray(arrays[key])
        if isinstance(value, np.ndarray):
            if arr.ndim != value.ndim or arr.dtype.kind != value.dtype.kind:
                raise ValueError(f"state array {key!r} has shape {arr.shape} and dtype "
                                 f"{arr.dtype}; expected {value.ndim} dimension(s) of kind "
                                 f"{value.dtype.kind!r}")
            values.append(np.ascontiguousarray(arr, dtype=value.dtype))
        else:
            if arr.shape != (1,) or arr.dtype.kind not in "iub":
                raise ValueError(f"state value {key!r} must be one integer")
            if arr[0] < 0 or (isinstance(value, bool) and arr[0] > 1):
                raise ValueError(f"state value {key!r} = {arr[0]} is out of range"
                                 + (" (a flag: 0 or 1)" if isinstance(value, bool) else ""))
            values.append(type(value)(arr[0]))
    return type(template)(*values)


class OnlineLearner:
    """Interface of every online learner.

    ``state`` is a record of named arrays (nested records for C, S and the tracker) that the
    compiled ``learn_fn`` (the per-row protocol with the learner's step) changes in place;
    ``learn`` runs it over a batch; ``arrays`` / ``load_arrays`` expose the state by name (no
    copies); ``snapshot`` / ``restore`` undo a failed call.
    """

    name = ""
    learn_fn = None

    @property
    def t(self):
        return int(self.state.t[0])

    def config(self, indptr):  # pragma: no cover - abstract
        raise NotImplementedError

    def work(self, indptr):  # pragma: no cover - abstract
        raise NotImplementedError

    def prepare(self, indptr, indices):
        """Hook run before each compiled call (grow S's pattern)."""

    def chunk(self):
        """Rows per compiled call (None: the whole batch)."""
        return None

    def learn(self, csr, y, sw, order, out, limit=np.inf, off=None):
        """Run the rounds ``order`` of a CSR batch; returns ``(status, row, info)``: status
        ``OK``, or ``BAD_PREDICTION`` / ``BAD_STEP`` at ``row``. ``off`` (per row, default
        zeros) is added to the learner's predictions (an intercept kept outside it)."""
        indptr, indices, data = csr
        if off is None:
            off = np.zeros(y.shape[0])
        step = self.chunk() or max(1, order.shape[0])
        status, row = OK, -1
        for start in range(0, order.shape[0], step):
            part = order[start:start + step]
            self.prepare(*_rows_of(indptr, indices, part))
            status, row = self._learn_rows(indptr, indices, data, y, sw, part, out, limit, off)
            if status != OK:
                break
        if status not in (OK, BAD_PREDICTION, BAD_STEP):  # pragma: no cover - prevented
            raise RuntimeError(f"internal error: {type(self).__name__} status {status}")
        return status, row, self.info()

    def _learn_rows(self, indptr, indices, data, y, sw, order, out, limit, off):
        """One compiled call over the rounds ``order``: ``(status, row)``."""
        rows = Rows(indptr, indices, data, y, sw, order, out, off)
        return type(self).learn_fn(rows, self.state, self.config(indptr), self.work(indptr),
                                   float(limit))

    def info(self):
        return {}

    def arrays(self):
        return flatten(self.state)

    def load_arrays(self, arrays):
        self.state = rebuild(self.state, arrays)
        return self

    def check_state(self, template):
        """Raise ``ValueError`` unless every array has the shape of a fresh learner's
        (``template``; the accumulated gradient's sizes are checked by their own rules), every
        float is finite, every counter non-negative and every index within bounds."""
        mine, ref = self.arrays(), template.arrays()
        if set(mine) != set(ref):
            raise ValueError(f"state arrays {sorted(set(mine) ^ set(ref))} do not belong to "
                             f"this learner")
        for key, arr in mine.items():
            if key not in _VARIABLE_SHAPES and arr.shape != ref[key].shape:
                raise ValueError(f"state array {key!r} has shape {arr.shape}, expected "
                                 f"{ref[key].shape}")
            if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
                raise ValueError(f"state array {key!r} contains NaN or infinity")
            if arr.dtype.kind in "iu" and arr.size and arr.min() < 0:
                raise ValueError(f"state array {key!r} has negative entries")
        self.check_bounds()

    def check_bounds(self):
        """Hook: counters and indices against the sizes they index."""

    def snapshot(self, indices):
        """What ``restore`` needs to undo a call touching the features ``indices``."""
        return {k: np.array(v, copy=True) for k, v in self.arrays().items()}

    def restore(self, snap):
        """Put back the state of ``snap`` (arrays of unchanged shape in place)."""
        current = self.arrays()
        merged = {}
        for key, old in snap.items():
            arr = current.get(key)
            if arr is not None and arr.shape == old.shape and arr.dtype == old.dtype:
                arr[...] = old
                merged[key] = arr
            else:
                merged[key] = old
        self.load_arrays(merged)


def _rows_of(indptr, indices, order):
    """(indptr, indices) of the rows ``order`` of a CSR batch (for pattern checks)."""
    if order.shape[0] == indptr.shape[0] - 1 and np.array_equal(order, np.arange(order.shape[0])):
        return indptr, indices
    lens = indptr[order + 1] - indptr[order]
    sub_ptr = np.zeros(order.shape[0] + 1, dtype=np.int64)
    np.cumsum(lens, out=sub_ptr[1:])
    pos = np.repeat(indptr[order] - sub_ptr[:-1], lens) + np.arange(sub_ptr[-1])
    return sub_ptr, indices[pos]


# arrays whose sizes depend on the data seen (checked by check_symacc)
_VARIABLE_SHAPES = ("S_indices", "S_data", "S_P", "S_N")


def check_symacc(S, D):
    """Raise ``ValueError`` unless S is a consistent EXACT pattern or SKETCH of size D."""
    if S.mode == EXACT:
        p, nnz = S.indptr, S.indices.shape[0]
        if p[0] != 0 or np.any(np.diff(p) < 0) or p[-1] != nnz or S.data.shape[0] != nnz:
            raise ValueError("the accumulated gradient's index pointer is inconsistent")
        if nnz and (S.indices.min() < 0 or S.indices.max() >= D):
            raise ValueError(f"the accumulated gradient has column indices outside [0, {D})")
        inner = np.ones(max(nnz - 1, 0), dtype=bool)
        starts = p[1:-1]
        starts = starts[(starts > 0) & (starts < nnz)]
        inner[starts - 1] = False
        if np.any(np.diff(S.indices.astype(np.int64))[inner] <= 0):
            raise ValueError("the accumulated gradient's columns are not sorted within rows")
        if S.P.shape[0] or S.N.shape[0] or S.fill.any():
            raise ValueError("an exact accumulated gradient carries sketch rows")
    elif S.mode == SKETCH:
        rows = S.P.shape[0]
        if S.N.shape != S.P.shape or S.P.shape[1] != D or rows < 4 or rows % 2:
            raise ValueError("the accumulated gradient's sketch has inconsistent shapes")
        if S.fill.max() >= rows or S.indices.shape[0] or S.data.shape[0]:
            raise ValueError("the accumulated gradient's sketch counters are out of bounds")
    else:
        raise ValueError(f"unknown accumulated-gradient mode {S.mode!r}")


class SymAccumulator:
    """Python side of S (see :mod:`fmlearn.kernels.symacc`): the exact pattern grows before
    each call while it stays below ``exact_cap`` entries; beyond, S becomes its sketch."""

    def __init__(self, D, augment, sketch_size):
        self.D = D
        self.augment = augment
        self.sketch_size = int(sketch_size)
        self.exact_cap = max(SKETCH_MIN_ENTRIES, SKETCH_COST_FACTOR * self.sketch_size * D)

    def new(self):
        D = self.D
        return SymAcc(EXACT, np.zeros(D + 1, np.int64), np.zeros(0, np.int32), np.zeros(0),
                      np.zeros((0, D)), np.zeros((0, D)), np.zeros(2, np.int64), np.zeros(2),
                      np.zeros(D))

    def prepare(self, S, indptr, indices):
        """Grow the pattern to hold every pair of the rows (and the bias column d when
        ``augment``); switch to the sketch when it would exceed ``exact_cap``. Returns the new
        record and whether S became a sketch (products with S kept elsewhere are stale)."""
        if S.mode == SKETCH:
            return S, False
        d = self.D - 1 if self.augment else self.D
        if S.indices.shape[0] and not pattern_missing(S.indptr, S.indices, indptr, indices, d,
                                                      self.augment):
            return S, False
        P = _pair_pattern(indptr, indices, self.D, self.augment)
        old = sp.csr_matrix((np.ones(S.indices.shape[0]), S.indices, S.indptr),
                            shape=(self.D, self.D))
        P = (P + old).tocsr()
        P.sum_duplicates()
        P.sort_indices()
        if P.indices.shape[0] > self.exact_cap:
            return self.to_sketch(S), True
        new_p = P.indptr.astype(np.int64)
        new_i = P.indices.astype(np.int32)
        new_d = np.zeros(new_i.shape[0])
        if S.indices.shape[0]:
            remap_values(S.indptr, S.indices, S.data, new_p, new_i, new_d)
        return S._replace(indptr=new_p, indices=new_i, data=new_d), False

    def to_sketch(self, S):
        """Replace the exact S by the sketch of its ``sketch_size`` largest positive and
        negative eigenpairs (P'P - N'N); the largest dropped eigenvalue of each sign is bounded
        by the smallest kept one, which starts the sketch's error bound ``shrunk``."""
        ell = self.sketch_size
        D = self.D
        M = sp.csr_matrix((S.data, S.indices, S.indptr), shape=(D, D))
        P = np.zeros((2 * ell, D))
        N = np.zeros((2 * ell, D))
        fill = np.zeros(2, np.int64)
        shrunk = np.zeros(2)
        for side, (B, which) in enumerate(((P, "LA"), (N, "SA"))):
            lam, Q = _extreme_eigenpairs(M, ell, which)
            sign = 1.0 if side == 0 else -1.0
            keep = sign * lam > 0
            lam, Q = sign * lam[keep], Q[:, keep]
            order = np.argsort(-lam)
            lam, Q = lam[order], Q[:, order]
            B[: lam.shape[0]] = (Q * np.sqrt(lam)).T
            fill[side] = lam.shape[0]
            shrunk[side] = lam[-1] if lam.shape[0] == ell else 0.0
        return SymAcc(SKETCH, np.zeros(D + 1, np.int64), np.zeros(0, np.int32), np.zeros(0), P,
                      N, fill, shrunk, np.zeros(D))

    def to_dense(self, S):
        if S.mode == EXACT:
            return sp.csr_matrix((S.data, S.indices, S.indptr), shape=(self.D, self.D)).toarray()
        f0, f1 = S.fill
        return S.P[:f0].T @ S.P[:f0] - S.N[:f1].T @ S.N[:f1] - np.diag(S.diag)


def _pair_pattern(indptr, indices, D, augment):
    """0/1 CSR pattern of Xb' Xb for the rows (with the bias column D - 1 when ``augment``)."""
    n = indptr.shape[0] - 1
    if not augment:
        Xb = sp.csr_matrix((np.ones(indices.shape[0]), indices, indptr), shape=(n, D))
        return (Xb.T @ Xb).tocsr()
    lens = np.diff(indptr) + 1
    bptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=bptr[1:])
    bind = np.empty(bptr[-1], dtype=np.int32)
    pos = np.arange(bptr[-1], dtype=np.int64) - np.repeat(bptr[:-1], lens)
    row = np.repeat(np.arange(n), lens)
    is_bias = pos == lens[row] - 1
    bind[~is_bias] = indices
    bind[is_bias] = D - 1
    Xb = sp.csr_matrix((np.ones(bind.shape[0]), bind, bptr), shape=(n, D))
    return (Xb.T @ Xb).tocsr()


def _extreme_eigenpairs(M, k, which):
    """k algebraically largest ("LA") or smallest ("SA") eigenpairs of a sparse symmetric M,
    from a fixed start vector (deterministic); none when M is zero."""
    D = M.shape[0]
    if not np.any(M.data):
        return np.zeros(0), np.zeros((D, 0))
    if D <= 4 * k + 8:
        lam, Q = np.linalg.eigh(M.toarray())
        sel = slice(D - k, D) if which == "LA" else slice(0, k)
        return lam[sel], Q[:, sel]
    from scipy.sparse.linalg import eigsh

    # a fixed start vector with every coordinate nonzero and no special structure
    v0 = 1.0 + 0.5 * np.sin(np.arange(1, D + 1))
    return eigsh(M, k=k, which=which, v0=v0 / np.linalg.norm(v0), tol=1e-8)


def sketch_size_for(D, sketch_size, fixed_bytes, budget_mb):
    """Rows of the sketch of S: ``sketch_size`` ("auto": AUTO_SKETCH_SIZE, lowered to fit the
    budget) such that the fixed arrays plus the larger of the exact pattern's cap (12 bytes an
    entry) and the sketch (2 x 2 l rows of D floats) fit ``budget_mb``."""
    budget = budget_mb * 2**20
    per_row = max(SKETCH_COST_FACTOR * D * 12, 4 * D * 8)  # bytes per unit of l

    def need(ell):
        return fixed_bytes + max(ell * per_row, min(SKETCH_MIN_ENTRIES, D * D) * 12)

    if sketch_size == "auto":
        ell = AUTO_SKETCH_SIZE
        while ell > 2 and need(ell) > budget:
            ell //= 2
    else:
        ell = int(sketch_size)
    if need(ell) > budget:
        raise MemoryError(
            f"the learner's arrays need {need(ell) / 2**20:.2f} MB (d + 1 = {D}, sketch_size="
            f"{ell}), above the memory budget of {budget_mb:g} MB; raise memory_budget_mb"
            + ("" if sketch_size == "auto" else " or lower sketch_size"))
    return ell


class CCFMMatrixLearner(OnlineLearner):
    """Base of the CCFM learners whose model is the matrix C kept as :class:`LowRank`."""

    def __init__(self, n_features, max_rank, budget_mb, loss_code, self_interaction):
        self.D = n_features + 1
        self.r_max, self.ident = choose_rank(self.D, max_rank, budget_mb)
        self.loss_code = loss_code
        self.self_interaction = bool(self_interaction)

    def predict(self, csr):
        from ..kernels.lowrank import lr_predict_rows

        indptr, indices, data = csr
        out = np.empty(indptr.shape[0] - 1)
        lr_predict_rows(indptr, indices, data, self.state.C, self.self_interaction, out)
        return out

    def matrix(self):
        """The (D, D) matrix C (for small D, tests and inspection)."""
        C = self.state.C
        if C.ident:
            return 0.5 * (C.K + C.K.T)
        r = int(C.r[0])
        U = C.U[:r]
        return U.T @ C.K[:r, :r] @ U

    def trace_norm(self):
        C = self.state.C
        K = C.K if C.ident else C.K[: int(C.r[0]), : int(C.r[0])]
        if K.shape[0] == 0:
            return 0.0
        # the rows of U are orthonormal, so C and the core share their nonzero spectrum
        return float(np.abs(np.linalg.eigvalsh(0.5 * (K + K.T))).sum())

    def load_arrays(self, arrays):
        super().load_arrays(arrays)
        C = self.state.C
        if C.ident != (C.U.shape[0] == 0):
            raise ValueError("state value 'C_ident' disagrees with the shape of 'C_U'")
        return self

    def check_bounds(self):
        C = self.state.C
        r = int(C.r[0])
        if (C.ident and r != self.D) or not 0 <= r <= C.K.shape[0]:
            raise ValueError(f"state value 'C_r' = {r} is out of bounds")
        if hasattr(self.state, "S"):
            check_symacc(self.state.S, self.D)
        if hasattr(self.state, "tr"):
            if int(self.state.tr.nb[0]) > self.state.tr.B.shape[0]:
                raise ValueError("state value 'tr_nb' exceeds the tracked subspace")
            self._check_tracker()

    def _check_tracker(self):
        """The tracked subspace's B must be orthonormal and SB, GS, UB its products with S and
        U (up to the rounding drift between refreshes): they are recomputed on copies by the
        kernel that refreshes them and compared, so that a crafted file cannot feed the
        eigen-steps a basis or products that are not what they claim (a 1e200-scaled UB once
        reached a division by zero in a kernel)."""
        from ..kernels.eigtrack import refresh

        tr, C = self.state.tr, self.state.C
        if C.ident:
            # a dense C keeps its previous top eigenvector in UB[0], the next Lanczos start
            # (kernels.ocg._dense_step): a unit vector, or zeros before the first step
            norm = float(np.linalg.norm(tr.UB[0]))
            if norm != 0.0 and abs(norm - 1.0) > 1e-6:
                raise ValueError("state array 'tr_UB' (the previous eigenvector of a dense C) "
                                 "is not a unit vector")
        nb = int(tr.nb[0])
        if nb == 0:
            return
        B = tr.B[:nb]
        if not np.allclose(B @ B.T, np.eye(nb), rtol=0.0, atol=1e-6):
            raise ValueError("state array 'tr_B' is not orthonormal")
        fresh = Tracker(*(np.array(a, copy=True) for a in tr))
        m = refresh(self.state.S, C.U, int(C.r[0]), bool(C.ident), fresh, nb)
        if m != nb:
            raise ValueError("state array 'tr_B' is not orthonormal")
        r = 0 if C.ident else int(C.r[0])
        pairs = (("tr_SB", tr.SB[:nb], fresh.SB[:nb]),
                 ("tr_GS", tr.GS[:nb, :nb], fresh.GS[:nb, :nb]),
                 ("tr_UB", tr.UB[:r, :nb], fresh.UB[:r, :nb]))
        for name, stored, exact in pairs:
            scale = 1.0 + (np.abs(exact).max() if exact.size else 0.0)
            if stored.size and np.abs(stored - exact).max() > 1e-6 * scale:
                raise ValueError(f"state array {name!r} disagrees with the products it "
                                 f"caches (B S, B S B', U B')")


class GradientOwner:
    """Mixin of the learners that keep the accumulated gradient S (``self.sacc``,
    ``self.state.S``) next to a tracked subspace (``self.state.tr``): while S is exact, rows
    are learned in chunks so that its pattern grows, or turns into the sketch, between
    compiled calls; a switch forces the tracker's products to be recomputed."""

    def chunk(self):
        return EXACT_CHUNK if self.state.S.mode != SKETCH else None

    def prepare(self, indptr, indices):
        S, switched = self.sacc.prepare(self.state.S, indptr, indices)
        self.state = self.state._replace(S=S)
        if switched:
            self.state.tr.since_refresh[0] = self.settings.refresh

    def gradient_matrix(self):
        """The accumulated gradient S as a dense (D, D) array (small D, tests)."""
        return self.sacc.to_dense(self.state.S)


def status_message(status, row, limit):
    """Why a learner stopped (``learn``'s status) as a phrase for DivergenceError."""
    if status == BAD_PREDICTION:
        return f"its prediction of row {row} became non-finite or exceeded {limit:.3g}"
    return f"its update at row {row} produced a non-finite value (overflow)"


class FMStateLearner(OnlineLearner):
    """Base of the classic-FM learners: (w0, w, V) and the round counter in a record; a call
    touches only the rows of the features it sees, and so does its snapshot."""

    def __init__(self, n_features, n_factors, init_stdev, rng, loss_code):
        # rng None: arrays to be replaced by a stored state (no draw); else FMRegressor's
        # initial factors (libFM's init)
        V = (init_state(n_features, n_factors, init_stdev, rng, np.float64).V
             if rng is not None else np.zeros((n_features, n_factors)))
        self.loss_code = loss_code
        self.state = self._new_state(np.zeros(1, np.int64), np.zeros(1), np.zeros(n_features), V)

    def _new_state(self, t, w0, w, V):
        from ..kernels.online_fm import FMState

        return FMState(t, w0, w, V)

    def work(self, indptr):
        from ..kernels.online_fm import FMWork

        k = self.state.V.shape[1]
        return FMWork(np.empty(k), np.empty(k), np.empty(k), np.empty(k), np.zeros(1))

    def predict(self, csr):
        from ..kernels.predict import fm_predict_csr

        indptr, indices, data = csr
        out = np.empty(indptr.shape[0] - 1)
        st = self.state
        fm_predict_csr(indptr, indices, data, float(st.w0[0]), st.w, st.V, out)
        return out

    def learn(self, csr, y, sw, order, out, limit=np.inf, off=None):
        """As :meth:`OnlineLearner.learn`, then the rows of w and V the batch touched must be
        finite (an overflow in the last row's update is not seen by a later prediction)."""
        status, row, info = super().learn(csr, y, sw, order, out, limit, off)
        if status == OK and order.shape[0]:
            cols = self._touched(csr[1])
            if not (np.isfinite(self.state.w0[0]) and np.isfinite(self.state.w[cols]).all()
                    and np.isfinite(self.state.V[cols]).all()):
                status, row = BAD_STEP, int(order[-1])
        return status, row, info

    def _touched(self, indices):
        """The distinct features of a batch in O(nnz): sorted when few, by a mask over the
        features when many (then d <= 8 nnz); the last answer is reused for the same array."""
        last = getattr(self, "_last_touched", None)
        if last is not None and last[0] is indices:
            return last[1]
        d = self.state.w.shape[0]
        if 8 * indices.shape[0] < d:
            cols = np.unique(indices)
        else:
            mask = np.zeros(d, dtype=bool)
            mask[indices] = True
            cols = np.flatnonzero(mask)
        self._last_touched = (indices, cols)
        return cols

    def snapshot(self, indices):
        cols = self._touched(indices)
        snap = {"cols": cols}
        for key, arr in self.arrays().items():
            snap[key] = arr[cols].copy() if arr.shape[:1] == self.state.w.shape else arr.copy()
        return snap

    def restore(self, snap):
        cols = snap["cols"]
        for key, arr in self.arrays().items():
            if arr.shape[:1] == self.state.w.shape:
                arr[cols] = snap[key]
            else:
                arr[...] = snap[key]
