"""Compiled kernels of the field-aware FM: one AdaGrad epoch and the prediction.

    phi(x) = w0 + <w, x> + sum_{j<l} <v_{j,f(l)}, v_{l,f(j)}> x_j x_l        (Juan et al. 2016)

Every feature j has one latent vector per field, ``W[j, g]``, used against the features of
field g; f(j) is j's field (``fields[j]``). A row of m non-zeros costs O(m^2 k).

The model is one array ``W`` of shape (d, F, C, 2, LANES): the k factors of ``v_{j,g}`` padded
with zeros to C * LANES and cut into chunks of LANES, each chunk followed by its AdaGrad sums
(LIBFFM's interleaved layout: a parameter and its sum share a cache line). Padded factors stay
0 (their gradient is 0) and their sums stay 1. ``lin`` (d, 2) holds [w_j, sum_j], ``bias``
(float64, 2) [w0, sum_0].

The learner is LIBFFM's (Juan et al. 2016, Algorithm 1; libffm ``ffm.cpp``): per row, the
gradient of the logistic (or squared) loss at the current model, then AdaGrad steps
``G += g * g; p -= eta * g / sqrt(G)`` of every parameter the row touches, with L2 added to
each touched parameter's gradient (lazily: untouched parameters are not shrunk), the sums
starting at 1. With ``normalize`` each row is divided by its Euclidean norm (LIBFFM's
instance-wise normalisation, which scales each pair by 1 / ||x||^2).

Speed. A row whose features lie in distinct fields (the usual one-hot case, checked once per
fit) touches each vector in exactly one pair, so the pair's two vectors are stepped together,
as LIBFFM does; a row with several features of one field first sums each vector's gradient
over its pairs (the exact gradient of the row's loss, where LIBFFM steps each pair in turn).
The pair steps of such rows are LLVM vector code (:func:`_pair_step`, :func:`_pair_step2`:
one load and one store of each chunk row, factors and sums split and merged by shuffles);
the other loops are written LANES factors at a time, every value loaded before anything is
stored, so that LLVM's SLP vectorizer turns them into vector instructions; numba leaves that
vectorizer off unless ``NUMBA_SLP_VECTORIZE`` is set, so :func:`compile_vectorized`
switches it on while it compiles these kernels (Frappe, k=4, float32, one epoch of 52k rows
on a loaded machine: 47 ms without, 29 ms with).
``error_model="numpy"`` drops the division-by-zero test that would keep ``g / sqrt(G)`` out
of vector registers (G >= 1 here). The epoch may use approximate reciprocals and fused
multiply-adds (``fastmath`` "arcp", "afn", "contract": a float32 ``g / sqrt(G)`` becomes
``rsqrtps`` and a Newton step, as LIBFFM's ``_mm_rsqrt_ps`` without its step; 29 -> 24 ms),
never the flags that assume no NaN or infinity (the divergence test needs them). Results are
the same with any number of threads: an epoch is one sequential pass, rows are predicted
independently.
"""

import math
from collections import namedtuple

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..kernels._jit import njit
from ..losses import LOGISTIC

#: Factors per chunk of ``W`` (its last axis): four float32 or float64 lanes, one SSE / AVX
#: register, as LIBFFM's SSE kernel.
LANES = 4

#: Unsigned constants: the pair loops index the flat model (``Wf``, one array of d F C
#: 2 LANES elements) with unsigned offsets, so that numba emits neither its negative-index
#: test nor, as for the rows of a reshaped 2-D view, a multiplication by a row length it
#: cannot see (an unsigned integer plus a plain Python int is a float in numba's typing).
_U0, _U1, _U2, _U3, _U4, _U5, _U6, _U7, _U8 = (np.uint64(v) for v in range(9))
_U16 = np.uint64(16)

FFMRows = namedtuple("FFMRows", ["indptr", "indices", "data", "y", "sw", "fields"])
FFMRows.__doc__ = """Training rows: CSR arrays (indptr int64, indices int32, data in the model
dtype), targets (labels in {-1, +1} for the logistic loss), sample weights (float64) and the
feature-to-field map (int32, (d,), values in [0, F))."""

FFMModel = namedtuple("FFMModel", ["W", "lin", "bias"])
FFMModel.__doc__ = """The model with its AdaGrad sums, changed in place: ``W`` (d, F, C, 2,
LANES), ``lin`` (d, 2) in the model dtype, ``bias`` float64 [w0, sum]."""

FFMConfig = namedtuple("FFMConfig", ["loss", "eta", "reg0", "reg1", "reg2", "normalize",
                                     "limit", "unit_weights", "unique_fields"])
FFMConfig.__doc__ = """Scalars of the step: loss code, step size, L2 of w0, w and the factors,
row normalisation, the divergence limit on |phi| and two facts the caller checked once:
``unit_weights`` (every sample weight is 1) and ``unique_fields`` (no row has two features of
one field). False is always correct for both, only slower."""

FFMWork = namedtuple("FFMWork", ["jj", "ff", "xx", "slot", "fslot", "ufield", "count",
                                 "grad", "rb", "fc"])
FFMWork.__doc__ = """Caller-owned buffers (a call allocates nothing): per row entry its feature,
field, scaled value and field slot (length >= the longest row); ``fslot`` (F,) all -1 between
rows; ``ufield`` and ``count`` per slot; ``grad`` (m, slots, C, LANES) for rows with repeated
fields; per row entry the first chunk row of its feature's block, j F C, and its field's
offset, f C (unsigned: see :func:`_gather`)."""


@intrinsic
def _prefetch(typingctx, arr, idx):
    """Ask the CPU to bring ``arr[idx]`` into its caches (LLVM's ``llvm.prefetch``: a hint
    that never faults). The epoch visits its rows in a random order (a hash of their
    content); fetching the next rows' entries while this one is computed hides their memory
    latency: Frappe, k=4, float32, one epoch 35.8 -> 26.8 ms, as fast as rows in storage
    order (26.0 ms). Prefetching the next row's factors too cost more than it saved there
    (34 ms: the model fits in the caches)."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        # read, high temporal locality, data cache
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


def ffm_work(max_nnz, n_fields, n_chunks, dtype, unique_fields):
    """Fresh :class:`FFMWork` for rows of at most ``max_nnz`` entries."""
    m = max(1, int(max_nnz))
    slots = min(m, int(n_fields))
    gshape = (1, 1, n_chunks, LANES) if unique_fields else (m, slots, n_chunks, LANES)
    return FFMWork(np.empty(m, np.int64), np.empty(m, np.int64), np.empty(m, dtype),
                   np.empty(m, np.int64), np.full(n_fields, -1, np.int64),
                   np.empty(m, np.int64), np.empty(m, np.int64), np.zeros(gshape, dtype),
                   np.empty(m, np.uint64), np.empty(m, np.uint64))


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _loss_and_slope(code, phi, y):
    """The loss of score ``phi`` against ``y`` and its derivative in ``phi`` (the values of
    :func:`fmlearn.losses.loss_value` and ``loss_derivative``) from one exponential."""
    if code == LOGISTIC:
        z = -y * phi
        e = math.exp(-abs(z))
        if z > 0.0:
            return z + math.log1p(e), -y / (1.0 + e)
        return math.log1p(e), -y * e / (1.0 + e)
    r = phi - y
    return 0.5 * r * r, r


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _gather(indptr, indices, data, fields, i, normalize, jj, ff, xx, rb, fc, FCE, CE):
    """Copy row i's features, fields and values (divided by the row norm when ``normalize``)
    into the work buffers, and the offsets ``rb[p] = j FCE``, ``fc[p] = f CE`` (``CE`` = 2
    LANES C elements per (feature, field) block, ``FCE`` = F CE per feature: the block of
    v_{jp, f(q)} starts at element ``rb[p] + fc[q]`` of the flat model), unsigned, so that
    numba indexes the model with them without its negative-index test (Frappe k=4 float32
    one epoch 24.1-28.3 -> 23.0-23.2 ms, k=8 40.3-42.2 -> 35.1-39.4 ms under load 10-11,
    same weights); returns the row length. The norm is taken in float64, rescaled by
    the largest |x| when the plain sum of squares would overflow or underflow, so that a row
    and the same row times 1e160 are the same row to a normalised model."""
    a = indptr[i]
    m = indptr[i + 1] - a
    ss = 0.0
    for p in range(m):
        j = indices[a + p]
        jj[p] = j
        f = fields[j]
        ff[p] = f
        rb[p] = np.uint64(j) * FCE
        fc[p] = np.uint64(f) * CE
        x = data[a + p]
        xx[p] = x
        ss += float(x) * float(x)
    if normalize and m > 0:
        if 1e-290 < ss < 1e290:
            r = 1.0 / math.sqrt(ss)
            for p in range(m):
                xx[p] = float(xx[p]) * r
        else:
            top = 0.0
            for p in range(m):
                top = max(top, abs(float(xx[p])))
            if top > 0.0:
                ss = 0.0
                for p in range(m):
                    t = float(xx[p]) / top
                    ss += t * t
                r = 1.0 / math.sqrt(ss)
                for p in range(m):
                    xx[p] = (float(xx[p]) / top) * r
    return m


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _pairs(Wf, CE, rb, fc, xx, m):
    """sum_{p<q} <v_{jp,fq}, v_{jq,fp}> x_p x_q, accumulated per lane in the model dtype in two
    vector accumulators (consecutive pairs of a row alternate between them: two dependency
    chains, not one; 52k Frappe rows, k=4: 27-33 ms -> 25 ms per epoch), summed at the end.
    ``Wf`` is the model flat, ``rb``, ``fc`` (see :func:`_gather`) and ``CE`` = 2 LANES C
    count its elements, ``m`` is unsigned (see :data:`_U0`)."""
    z = xx.dtype.type(0.0)
    s0 = z
    s1 = z
    s2 = z
    s3 = z
    u0 = z
    u1 = z
    u2 = z
    u3 = z
    for p in range(m):
        bp = rb[p]
        fp = fc[p]
        xp = xx[p]
        q = p + _U1
        while q + _U1 < m:
            v = xp * xx[q]
            vv = xp * xx[q + _U1]
            r1 = bp + fc[q]
            r2 = rb[q] + fp
            r3 = bp + fc[q + _U1]
            r4 = rb[q + _U1] + fp
            for c in range(_U0, CE, _U8):
                r1c = r1 + c
                r2c = r2 + c
                r3c = r3 + c
                r4c = r4 + c
                s0 += Wf[r1c] * Wf[r2c] * v
                s1 += Wf[r1c + _U1] * Wf[r2c + _U1] * v
                s2 += Wf[r1c + _U2] * Wf[r2c + _U2] * v
                s3 += Wf[r1c + _U3] * Wf[r2c + _U3] * v
                u0 += Wf[r3c] * Wf[r4c] * vv
                u1 += Wf[r3c + _U1] * Wf[r4c + _U1] * vv
                u2 += Wf[r3c + _U2] * Wf[r4c + _U2] * vv
                u3 += Wf[r3c + _U3] * Wf[r4c + _U3] * vv
            q += _U2
        if q < m:
            v = xp * xx[q]
            r1 = bp + fc[q]
            r2 = rb[q] + fp
            for c in range(_U0, CE, _U8):
                r1c = r1 + c
                r2c = r2 + c
                s0 += Wf[r1c] * Wf[r2c] * v
                s1 += Wf[r1c + _U1] * Wf[r2c + _U1] * v
                s2 += Wf[r1c + _U2] * Wf[r2c + _U2] * v
                s3 += Wf[r1c + _U3] * Wf[r2c + _U3] * v
    s0 += u0
    s1 += u1
    s2 += u2
    s3 += u3
    return float((s0 + s1) + (s2 + s3))


#: The flags :func:`ffm_epoch` compiles with (see the module docstring).
_FAST = ("arcp", "afn", "contract")


def _chunk_step_codegen(n):
    """Code of the AdaGrad step of ``n`` consecutive chunks (n LANES factors) of the two
    vectors of one pair (:func:`_pair_step` for n = 1, :func:`_pair_step2` for n = 2)."""
    width = n * LANES
    # lanes of the factors and of their sums in n chunks [factors, sums, factors, sums, ...]
    fac = [c * 2 * LANES + t for c in range(n) for t in range(LANES)]
    sums = [f + LANES for f in fac]
    back = [0] * (2 * width)
    for i, e in enumerate(fac):
        back[e] = i
    for i, e in enumerate(sums):
        back[e] = width + i

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        T = context.get_value_type(signature.args[0].dtype)
        vfull = ir.VectorType(T, 2 * width)
        vec = ir.VectorType(T, width)
        i32 = ir.IntType(32)
        align = T.get_abi_size(context.target_data)

        def mask(idx):
            return ir.Constant(ir.VectorType(i32, len(idx)), [ir.Constant(i32, i)
                                                              for i in idx])

        def splat(x):
            v = builder.insert_element(ir.Constant(vec, ir.Undefined), x, ir.Constant(i32, 0))
            return builder.shuffle_vector(v, ir.Constant(vec, ir.Undefined), mask([0] * width))

        def load(r):
            ptr = builder.bitcast(builder.gep(ary.data, [r]), vfull.as_pointer())
            v = builder.load(ptr, align=align)
            u = ir.Constant(vfull, ir.Undefined)
            return ptr, builder.shuffle_vector(v, u, mask(fac)), builder.shuffle_vector(
                v, u, mask(sums))

        def fmul(x, y):
            return builder.fmul(x, y, flags=_FAST)

        def fadd(x, y):
            return builder.fadd(x, y, flags=_FAST)

        sqrt = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vec, [vec]),
            f"llvm.sqrt.v{width}{'f32' if T == ir.FloatType() else 'f64'}")
        kv, lam, eta = splat(args[3]), splat(args[4]), splat(args[5])
        p1, a, A = load(args[1])
        p2, b, B = load(args[2])
        g = fadd(fmul(lam, a), fmul(kv, b))
        h = fadd(fmul(lam, b), fmul(kv, a))
        A = fadd(A, fmul(g, g))
        B = fadd(B, fmul(h, h))
        for ptr, w, grad, G in ((p1, a, g, A), (p2, b, h, B)):
            root = builder.call(sqrt, [G])
            for flag in _FAST:
                root.fastmath.add(flag)
            new = builder.fsub(w, builder.fdiv(fmul(eta, grad), root, flags=_FAST),
                               flags=_FAST)
            builder.store(builder.shuffle_vector(new, G, mask(back)), ptr, align=align)
        return context.get_dummy_value()

    return codegen


@intrinsic
def _pair_step(typingctx, Wf, r1, r2, kv, lam, eta):
    """AdaGrad step of the chunk rows r1 = v_{j,f(l)} and r2 = v_{l,f(j)} of one pair (element
    offsets in the flat model ``Wf``), whose loss gradients are kv * r2 and kv * r1 (kv =
    kappa x_j x_l), L2 ``lam``, step ``eta``: for each factor, ``g = lam a + kv b``, ``G +=
    g g``, ``a -= eta g / sqrt(G)`` (``arcp``, ``afn``, ``contract``: see the module
    docstring).

    Written as LLVM vector code: each chunk row is one load of its 2 LANES values and one
    store, the factors and their sums taken apart and put back by shuffles. Written as
    scalar lanes, all loaded before anything is stored, the SLP vectorizer made the same
    arithmetic (same operations and flags: the same results, bit for bit) but built its
    vectors from masked loads, permutations and blends and reloaded its constants per pair:
    Frappe, k=8, float32, CPU per epoch 32.7 (31.0-36.5) -> 23.8 (23.4-26.1) ms, the two
    versions alternated on a quiet machine (``benchmarks/bench_ffm.py speed --old``)."""
    return types.void(Wf, r1, r2, kv, lam, eta), _chunk_step_codegen(1)


@intrinsic
def _pair_step2(typingctx, Wf, r1, r2, kv, lam, eta):
    """:func:`_pair_step` of two consecutive chunks (2 LANES factors) of each vector: one
    load and one store of 4 LANES values per vector."""
    return types.void(Wf, r1, r2, kv, lam, eta), _chunk_step_codegen(2)


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _vector_step(Wr, r, gv, kap, lam, eta):
    """AdaGrad step of one chunk row r whose loss gradient is kap * gv (gv: LANES values)."""
    a0 = Wr[r, 0]
    a1 = Wr[r, 1]
    a2 = Wr[r, 2]
    a3 = Wr[r, 3]
    g0 = lam * a0 + kap * gv[0]
    g1 = lam * a1 + kap * gv[1]
    g2 = lam * a2 + kap * gv[2]
    g3 = lam * a3 + kap * gv[3]
    A0 = Wr[r, 4] + g0 * g0
    A1 = Wr[r, 5] + g1 * g1
    A2 = Wr[r, 6] + g2 * g2
    A3 = Wr[r, 7] + g3 * g3
    Wr[r, 0] = a0 - eta * g0 / math.sqrt(A0)
    Wr[r, 1] = a1 - eta * g1 / math.sqrt(A1)
    Wr[r, 2] = a2 - eta * g2 / math.sqrt(A2)
    Wr[r, 3] = a3 - eta * g3 / math.sqrt(A3)
    Wr[r, 4] = A0
    Wr[r, 5] = A1
    Wr[r, 6] = A2
    Wr[r, 7] = A3


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _slots(ff, m, fslot, ufield, count, slot):
    """Number the distinct fields of a row (``slot[p]``, ``ufield[s]``, ``count[s]``); leaves
    ``fslot`` all -1 again."""
    u = 0
    for p in range(m):
        f = ff[p]
        s = fslot[f]
        if s < 0:
            s = u
            fslot[f] = u
            ufield[u] = f
            count[u] = 0
            u += 1
        slot[p] = s
        count[s] += 1
    for s in range(u):
        fslot[ufield[s]] = -1
    return u


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _grouped_pairs(Wr, C, F, jj, ff, xx, m, slot, grad):
    """The pair sum of :func:`_pairs` and, in ``grad[p, s]``, d phi / d v_{jp, field of slot
    s} = sum over the row's other features q of that field of v_{jq, f(jp)} x_p x_q (all at
    the current model)."""
    u = grad.shape[1]
    for p in range(m):
        for s in range(u):
            for c in range(C):
                for t in range(LANES):
                    grad[p, s, c, t] = 0.0
    total = 0.0
    for p in range(m):
        bp = jj[p] * F
        fp = ff[p]
        xp = xx[p]
        sp = slot[p]
        for q in range(p + 1, m):
            v = xp * xx[q]
            sq = slot[q]
            r1 = (bp + ff[q]) * C
            r2 = (jj[q] * F + fp) * C
            acc = 0.0
            for c in range(C):
                for t in range(LANES):
                    a = Wr[r1 + c, t]
                    b = Wr[r2 + c, t]
                    acc += float(a) * float(b)
                    grad[p, sq, c, t] += b * v
                    grad[q, sp, c, t] += a * v
            total += acc * float(v)
    return total


@njit(cache=True, nogil=True, error_model="numpy", fastmath=set(_FAST))
def ffm_epoch(rows, model, visit, order, block, cfg, work):
    """Visit the rows ``visit[t]`` for t in the blocks of ``order`` (entry b stands for the
    positions ``order[b] * block`` up to the next block, in order) once each, stepping the
    model after each. Returns ``(loss, weight, bad)``: the weighted sum of the rows' losses
    before their steps (LIBFFM's training loss), the summed weight, and -1 or the first row
    whose score was not finite or beyond ``cfg.limit`` (it was not stepped).

    A row of weight s is visited ceil(s) times in a row with gradients scaled by s / ceil(s):
    a weight of m equals m repeated rows, and no weight becomes one oversized step.
    """
    indptr, indices, data, fields = rows.indptr, rows.indices, rows.data, rows.fields
    W = model.W
    d, F, C = W.shape[0], W.shape[1], W.shape[2]
    Wr = W.reshape(d * F * C, 2 * LANES)
    Wf = W.reshape(W.size)
    CE = np.uint64(C * 2 * LANES)
    FCE = np.uint64(F * C * 2 * LANES)
    rb, fc = work.rb, work.fc
    lin = model.lin
    T = W.dtype.type
    eta = T(cfg.eta)
    reg1 = T(cfg.reg1)
    reg2 = T(cfg.reg2)
    jj, ff, xx = work.jj, work.ff, work.xx
    w0 = model.bias[0]
    g0sum = model.bias[1]
    nv = visit.shape[0]
    loss = 0.0
    weight = 0.0
    for b in range(order.shape[0]):
        lo = order[b] * block
        hi = min(lo + block, nv)
        for t in range(lo, hi):
            i = visit[t]
            # the rows visited next: their pointers two rows ahead, their entries one ahead
            if t + 2 < hi:
                i2 = visit[t + 2]
                _prefetch(indptr, i2)
                _prefetch(rows.y, i2)
                _prefetch(rows.sw, i2)
            if t + 1 < hi:
                a1 = indptr[visit[t + 1]]
                _prefetch(indices, a1)
                _prefetch(data, a1)
            if cfg.unit_weights:
                s = 1.0
                reps = 1
            else:
                s = rows.sw[i]
                if s <= 0.0:
                    continue
                reps = max(1, int(math.ceil(s)))
            scale = s / reps
            m = _gather(indptr, indices, data, fields, i, cfg.normalize, jj, ff, xx, rb, fc,
                        FCE, CE)
            mu = np.uint64(m)
            u = m
            if not cfg.unique_fields:
                u = _slots(ff, m, work.fslot, work.ufield, work.count, work.slot)
            y = rows.y[i]
            for rep in range(reps):
                phi = w0
                for p in range(m):
                    phi += float(lin[jj[p], 0]) * float(xx[p])
                if u == m:
                    phi += _pairs(Wf, CE, rb, fc, xx, mu)
                else:
                    phi += _grouped_pairs(Wr, C, F, jj, ff, xx, m, work.slot, work.grad)
                if not (abs(phi) <= cfg.limit):
                    model.bias[0] = w0
                    model.bias[1] = g0sum
                    return loss, weight, i
                lv, slope = _loss_and_slope(cfg.loss, phi, y)
                if rep == 0:
                    loss += s * lv
                    weight += s
                kappa = scale * slope
                g = kappa + cfg.reg0 * w0
                g0sum += g * g
                w0 -= cfg.eta * g / math.sqrt(g0sum)
                kap = T(kappa)
                for p in range(m):
                    j = jj[p]
                    gl = kap * xx[p] + reg1 * lin[j, 0]
                    G = lin[j, 1] + gl * gl
                    lin[j, 1] = G
                    lin[j, 0] -= eta * gl / math.sqrt(G)
                if u == m:
                    for p in range(mu):
                        bp = rb[p]
                        fp = fc[p]
                        kx = kap * xx[p]
                        for q in range(p + _U1, mu):
                            kv = kx * xx[q]
                            r1 = bp + fc[q]
                            r2 = rb[q] + fp
                            c = _U0
                            while c + _U8 < CE:  # two chunks (2 LANES factors) at a time
                                _pair_step2(Wf, r1 + c, r2 + c, kv, reg2, eta)
                                c += _U16
                            if c < CE:
                                _pair_step(Wf, r1 + c, r2 + c, kv, reg2, eta)
                else:
                    for p in range(m):
                        bp = jj[p] * F
                        own = work.slot[p]
                        for sl in range(u):
                            if work.count[sl] - (1 if sl == own else 0) == 0:
                                continue  # no other feature of that field in the row
                            r = (bp + work.ufield[sl]) * C
                            for c in range(C):
                                _vector_step(Wr, r + c, work.grad[p, sl, c], kap, reg2, eta)
    model.bias[0] = w0
    model.bias[1] = g0sum
    return loss, weight, -1


@njit(cache=True, nogil=True)
def pair_weight(indptr, data, sw, normalize):
    """See :func:`._fields.mean_pair_weight` (each row's values divided by their largest
    magnitude first, so that no square overflows)."""
    total = 0.0
    rows = 0.0
    for i in range(indptr.shape[0] - 1):
        m = indptr[i + 1] - indptr[i]
        if m < 2 or sw[i] <= 0.0:
            continue
        top = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            top = max(top, abs(float(data[p])))
        if top == 0.0:
            continue
        s1 = 0.0
        s2 = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            a = abs(float(data[p])) / top
            s1 += a
            s2 += a * a
        w = (s1 * s1 - s2) / (m * (m - 1.0))
        w = w / s2 if normalize else w * top * top
        if math.isfinite(w):
            total += sw[i] * w
            rows += sw[i]
    return total / rows if rows > 0.0 else 0.0


@njit(cache=True, nogil=True)
def touched_features(indices, nnz, n_features):
    """The distinct features of ``indices[:nnz]``, sorted (a mark per feature: O(nnz + d),
    no sort of the entries)."""
    mark = np.zeros(n_features, np.bool_)
    count = 0
    for p in range(nnz):
        j = indices[p]
        if not mark[j]:
            mark[j] = True
            count += 1
    out = np.empty(count, np.int64)
    c = 0
    for j in range(n_features):
        if mark[j]:
            out[c] = j
            c += 1
    return out


@njit(cache=True, nogil=True)
def rows_finite(W, lin, features):
    """Whether the model's rows of ``features`` hold finite values only (no copy)."""
    for j in features:
        if not np.isfinite(lin[j, 0]) or not np.isfinite(lin[j, 1]):
            return False
        block = W[j]
        for v in block.ravel():
            if not np.isfinite(v):
                return False
    return True


@njit(cache=True, nogil=True)
def unique_fields(indptr, indices, fields, n_fields):
    """True when no CSR row has two features of one field."""
    last = np.full(n_fields, -1, np.int64)
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i], indptr[i + 1]):
            f = fields[indices[p]]
            if last[f] == i:
                return False
            last[f] = i
    return True


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _score(indptr, indices, data, fields, Wf, C, F, lin, w0, normalize, i, jj, ff, xx, rb,
           fc):
    CE = np.uint64(C * 2 * LANES)
    m = _gather(indptr, indices, data, fields, i, normalize, jj, ff, xx, rb, fc,
                np.uint64(F) * CE, CE)
    phi = w0
    for p in range(m):
        phi += float(lin[jj[p], 0]) * float(xx[p])
    return phi + _pairs(Wf, CE, rb, fc, xx, np.uint64(m))


# Rows per task of the parallel prediction; and fewer rows than this are predicted serially
# (a parallel region costs more than it gives on a validation set scored every epoch).
CHUNK = 512
PARALLEL_MIN_ROWS = 50_000


@njit(cache=True, nogil=True, error_model="numpy")
def _predict_serial(indptr, indices, data, fields, model, normalize, max_nnz, out):
    W = model.W
    F, C = W.shape[1], W.shape[2]
    Wf = W.reshape(W.size)
    jj = np.empty(max_nnz, np.int64)
    ff = np.empty(max_nnz, np.int64)
    xx = np.empty(max_nnz, W.dtype)
    rb = np.empty(max_nnz, np.uint64)
    fc = np.empty(max_nnz, np.uint64)
    for i in range(indptr.shape[0] - 1):
        out[i] = _score(indptr, indices, data, fields, Wf, C, F, model.lin, model.bias[0],
                        normalize, i, jj, ff, xx, rb, fc)
    return out


@njit(cache=True, parallel=True, error_model="numpy")
def _predict_parallel(indptr, indices, data, fields, model, normalize, max_nnz, out):
    W = model.W
    F, C = W.shape[1], W.shape[2]
    Wf = W.reshape(W.size)
    n = indptr.shape[0] - 1
    for c in prange((n + CHUNK - 1) // CHUNK):
        jj = np.empty(max_nnz, np.int64)
        ff = np.empty(max_nnz, np.int64)
        xx = np.empty(max_nnz, W.dtype)
        rb = np.empty(max_nnz, np.uint64)
        fc = np.empty(max_nnz, np.uint64)
        for i in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            out[i] = _score(indptr, indices, data, fields, Wf, C, F, model.lin,
                            model.bias[0], normalize, i, jj, ff, xx, rb, fc)
    return out


def ffm_predict(indptr, indices, data, fields, model, normalize, out, parallel=True):
    """phi(x_i) of every CSR row into ``out`` (float64); rows are independent, so the result
    does not depend on the number of threads. Fewer than ``PARALLEL_MIN_ROWS`` rows (or
    ``parallel=False``) run in the calling thread."""
    n = indptr.shape[0] - 1
    max_nnz = max(1, int(np.max(np.diff(indptr)))) if n else 1
    kernel = _predict_parallel if parallel and n >= PARALLEL_MIN_ROWS else _predict_serial
    args = (indptr, indices, data, fields, model, bool(normalize), max_nnz, out)
    return call_vectorized(kernel, _array_key(data, model.W, fields), *args)


def run_epoch(rows, model, visit, order, block, cfg, work):
    """:func:`ffm_epoch`, compiled (or loaded from numba's cache) by
    :func:`compile_vectorized` first: the only way the package calls it."""
    args = (rows, model, visit, order, int(block), cfg, work)
    return call_vectorized(ffm_epoch, epoch_key(rows, model), *args)


def _array_key(data, W, fields):
    return (data.dtype.char, W.dtype.char, fields.flags.writeable)


def epoch_key(rows, model):
    """The cheap key of :func:`ffm_epoch`'s signature for :func:`compile_vectorized`: the
    dtypes and the read-only flags of the arrays that vary between callers (``fit`` passes
    a read-only field map, ``partial_fit`` a writable one; targets may be read-only)."""
    return (*_array_key(rows.data, model.W, rows.fields), rows.y.flags.writeable,
            rows.sw.flags.writeable)


# the kernels' signatures compiled by compile_vectorized, by the caller's cheap key (a one-row
# partial_fit must not pay numba's typeof of every array of the records on each call)
_COMPILED = set()
# (python function, signature) of every compilation :func:`compile_vectorized` made
SLP_SIGNATURES = set()


def compile_vectorized(kernel, key, *args):
    """Compile ``kernel`` for the types of ``args`` (or load it from numba's cache) with LLVM's
    SLP vectorizer on, which turns the LANES-wide steps into vector instructions (see the
    module docstring for the measured gain). numba reads ``config.SLP_VECTORIZE`` when it
    optimises a module; it is set only while holding numba's compiler lock, so no other
    compilation sees it. ``key`` (hashable) identifies the signature for the caller: the
    dtypes and read-only flags of the arrays that vary (every array the package passes is
    C-contiguous, of fixed dimension); once compiled, a call costs a set lookup."""
    key = (kernel.py_func, key)
    if key in _COMPILED:
        return
    _compile_slp(kernel, args)
    _COMPILED.add(key)


def call_vectorized(kernel, key, *args):
    """``kernel(*args)``, compiled by :func:`compile_vectorized` first. A signature that
    ``key`` did not tell apart from a compiled one (the kernels never compile by themselves:
    see :data:`VECTORIZED`) is compiled with the vectorizer on the first call that needs
    it."""
    compile_vectorized(kernel, key, *args)
    try:
        return kernel(*args)
    except (TypeError, RuntimeError):
        # numba: "No matching definition for argument type(s) ...", or "compilation
        # disabled" when another thread's _compile_slp let this call through its check
        _compile_slp(kernel, args)
        return kernel(*args)


def _compile_slp(kernel, args):
    from numba import typeof
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock

    sig = tuple(typeof(a) for a in args)
    with global_compiler_lock:
        old = config.SLP_VECTORIZE
        config.SLP_VECTORIZE = 1
        kernel._can_compile = True
        try:
            kernel.compile(sig)
            SLP_SIGNATURES.add((kernel.py_func, sig))
        finally:
            kernel._can_compile = False
            config.SLP_VECTORIZE = old


#: The kernels compiled only by :func:`compile_vectorized`. numba compiles a dispatcher for
#: each new signature at its first call (a read-only array is another type than a writable
#: one) with the vectorizer off, and stores that code in its cache, where the next process's
#: :func:`compile_vectorized` of the same signature finds it: a test suite that had called
#: ``fit`` after ``partial_fit`` in one process left Frappe's epoch at 2x its time (k=4,
#: float32: 47 ms against 25 ms per epoch, same weights) for every later process. These
#: dispatchers never compile by themselves: a call of a signature not compiled here is a
#: ``TypeError``, which :func:`call_vectorized` answers by compiling it here.
VECTORIZED = (ffm_epoch, _predict_serial, _predict_parallel)
for _kernel in VECTORIZED:
    _kernel._can_compile = False
del _kernel
