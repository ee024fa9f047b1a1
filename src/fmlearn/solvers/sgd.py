"""SGD for the classic FM (Rendle 2010 §III-C; libFM's ``-method sgd``).

Shuffled (or in-order) epochs of per-row gradient steps, constant or inverse-scaling step size,
separate L2 penalties for w0, w and V; the model returned may be the mean of the last epochs'
models (:class:`TailAverage`). A step whose prediction turns non-finite or explodes
stops the run and is reported (the caller keeps its previous state); no NaN model is returned.
"""

from dataclasses import dataclass

import numpy as np

from ..kernels import compile_for
from ..kernels.sgd import SCHEDULE_CODES, Params, Rows, SGDConfig, row_facts, sgd_epoch, sgd_work


@dataclass
class SGDSettings:
    n_iter: int
    loss_code: int
    learning_rate: float
    schedule: str  # "constant" | "invscaling"
    power_t: float
    reg_bias: float
    reg_linear: float
    reg_pairwise: float
    shuffle: bool
    implicit: bool
    clip_lo: float = -np.inf
    clip_hi: float = np.inf
    average: int = 1  # the model returned: the mean of the last `average` epochs' iterates


# libFM's -init_stdev default, the largest initial spread sgd_init_stdev gives.
LIBFM_INIT_STDEV = 0.1


def sgd_init_stdev(learning_rate):
    """``init_stdev="auto"`` of SGD: ``min(0.1, sqrt(learning_rate / 2))``, the spread that
    constant-step SGD's own iterates keep around an optimum.

    Near a minimum with Hessian H, constant-step SGD (step eta, one row per step) is a
    stationary process whose covariance C solves ``H C + C H = eta Sigma``, Sigma the
    covariance of the one-row gradients (Mandt, Hoffman & Blei 2017, "Stochastic gradient
    descent as approximate Bayesian inference", JMLR 18: the stationary covariance of their
    Ornstein-Uhlenbeck approximation, batch size 1). Where Sigma = H -- the logistic loss,
    whose Fisher information is its Hessian, or the squared loss with unit residual variance
    -- C = (eta / 2) I: every parameter moves with a standard deviation of sqrt(eta / 2)
    whatever the data. A larger initial spread of the factors is noise that the rows do not
    average out on the features they rarely visit (a factor shrinks by ``1 - eta *
    reg_pairwise`` per visit only); a much smaller one makes the factors leave the saddle at
    V = 0 late. At libFM's step 0.005 the rule gives 0.05 (libFM: 0.1). On MovieLens-100K,
    chosen on a validation split carved from the training rows (5 init seeds x 3 splits, 100
    epochs, reg (0, 0, 0.1)): RMSE 0.9272 from 0.1, 0.9240 from 0.05, 0.9238 from 0.03,
    0.9243 from 0.02, 0.9275 from 0.01; then confirmed on the test splits
    (``benchmarks/RESULTS.md``, which also lists steps 0.02 and 0.00125, where the start
    matters less). Never above libFM's 0.1: the linearised argument needs ``eta * h << 1``,
    which large steps do not satisfy. It depends on the settings only, not on the rows, so
    that ``fit`` still equals ``partial_fit`` on batches.
    """
    return min(LIBFM_INIT_STDEV, float(np.sqrt(learning_rate / 2.0)))


# Rows per block of the epoch shuffle.
SHUFFLE_BLOCK = 256


def block_shuffle(n, rng, block=SHUFFLE_BLOCK):
    """A random visiting order that stays cache-friendly: blocks of ``block`` consecutive rows
    in a fresh random order each epoch, the rows of a block in storage order.

    A full permutation of n rows makes every row a cache miss once the data outgrow the cache
    (4x slower per row on 1M one-hot rows); shuffling inside the blocks still costs 50% more
    than reading them in order (measured, ``benchmarks/RESULTS.md``). The blocks are random
    subsets of the data because ``fit`` stores the rows in the order of a hash of their
    content; libFM itself visits the rows in file order every epoch.
    """
    n_blocks = -(-n // block)
    order = (rng.permutation(n_blocks)[:, None] * block + np.arange(block)).ravel()
    return order[order < n].astype(np.int64)


def sgd_solver(csr, y, sw, state, t, settings, seed, callback=None, on_start=None):
    """Run ``settings.n_iter`` epochs over the CSR rows ``csr`` from ``state`` (in place).

    Parameters
    ----------
    csr : (indptr, indices, data)
    y, sw : float64 arrays (targets or labels in {-1, +1}; sample weights)
    state : FMState
    t : int
        Steps taken so far (drives the schedule across calls).
    settings : SGDSettings
    seed : int
        The epoch starting at step t is shuffled by ``numpy.random.default_rng([seed, t])``, so
        a warm-started run equals one long run.
    callback : callable(epoch) -> bool, optional; returning True stops.
    on_start : callable(), optional
        Called once the epoch kernel is compiled (or loaded from numba's cache), right before
        the first epoch: a caller timing the epochs starts its clock there.

    Returns
    -------
    state, t, n_iter, info : info has ``"diverged"`` (None or a message).
    """
    indptr, indices, data = csr
    n = indptr.shape[0] - 1
    sw = np.ascontiguousarray(sw, dtype=np.float64)
    binary, unit_weights = row_facts(data, sw)
    cfg = sgd_config(settings, y, settings.loss_code, settings.reg_bias, settings.clip_lo,
                     settings.clip_hi)._replace(binary=binary, unit_weights=unit_weights)
    rows = Rows(indptr, indices, data, np.ascontiguousarray(y, dtype=np.float64), sw)
    params = Params(state.w, state.V, np.array([state.w0], dtype=np.float64))
    work = sgd_work(state.V.shape[1])
    block = SHUFFLE_BLOCK
    compile_for(sgd_epoch, rows, params, np.arange(1, dtype=np.int64), block, t, cfg, work)
    if on_start is not None:
        on_start()
    return run_epochs(n, t, settings, seed, state, params, cfg.limit, "row", callback,
                      lambda order, t: sgd_epoch(rows, params, order, block, t, cfg, work),
                      block=block)


def sgd_config(settings, y, loss_code, reg_bias, clip_lo, clip_hi):
    """The kernel's :class:`~fmlearn.kernels.sgd.SGDConfig` from ``settings``; the divergence
    limit on |f| is 1e10 times the largest |target| (at least 1)."""
    limit = 1e10 * max(1.0, float(np.max(np.abs(y))) if np.size(y) else 1.0)
    return SGDConfig(loss_code, float(settings.learning_rate), SCHEDULE_CODES[settings.schedule],
                     float(settings.power_t), float(reg_bias), float(settings.reg_linear),
                     float(settings.reg_pairwise), float(clip_lo), float(clip_hi), limit,
                     bool(settings.implicit))


def run_epochs(n, t, settings, seed, state, params, limit, unit, callback, epoch, block=None):
    """The epoch loop of :func:`sgd_solver` and of the contrast solver: ``epoch(order, t)``
    runs one epoch of the ``n`` units (rows or targets) in ``order`` from step ``t`` and
    returns ``(t, bad)``; the order is ``block_shuffle`` from ``default_rng([seed, t])`` (or
    storage order without ``settings.shuffle``). With ``block``, ``order`` lists the blocks of
    ``block`` units instead (the permutation that ``block_shuffle`` expands, the same visiting
    order without writing out n indices per epoch).

    With ``settings.average = m > 1`` the model left in ``state`` is the mean of the models
    at the end of the last m epochs (tail, or suffix, averaging: see :class:`TailAverage`).
    Returns ``(state, t, n_iter, info)``."""
    n_blocks = n if block is None else -(-n // block)
    in_order = np.arange(n_blocks, dtype=np.int64)
    tail = TailAverage(settings.n_iter, settings.average)
    n_done = 0
    for it in range(settings.n_iter):
        if not settings.shuffle:
            order = in_order
        elif block is None:
            order = block_shuffle(n, np.random.default_rng([seed, t]))
        else:
            order = np.random.default_rng([seed, t]).permutation(n_blocks)
        t, bad = epoch(order, t)
        n_done = it + 1
        state.w0 = float(params.scal[0])
        if bad >= 0 or not state.is_finite():
            return state, t, n_done, {
                "diverged": (
                    f"SGD diverged in epoch {n_done} ({unit} {bad}: its prediction became "
                    f"non-finite or exceeded {limit:.3g}); lower learning_rate (now "
                    f"{settings.learning_rate}) or raise the regularization"
                )
            }
        tail.add(it, state)
        if callback is not None and callback(it):
            break
    tail.store(state)
    return state, t, n_done, {"diverged": None}


class TailAverage:
    """The running sum of the models at the end of the last ``average`` of ``n_iter`` epochs
    and, at the end, their mean written into the state (nothing kept when ``average`` is 1).

    Constant-step SGD does not converge: its iterates keep moving around the optimum by an
    amount that grows with the step (on MovieLens-100K at libFM's step 0.005 the test RMSE of
    consecutive epochs differs by up to 0.005). Averaging the iterates (Polyak & Juditsky
    1992) removes most of that noise; averaging only a suffix of them, after the model has
    left its starting point, keeps the early, far-off iterates out of the mean (Rakhlin,
    Shamir & Sridharan 2012, "alpha-suffix averaging"). One model is added per epoch: O(d k)
    per epoch, negligible beside the epoch's O(nnz k). The sums are float64 whatever the
    model's dtype.
    """

    def __init__(self, n_iter, average):
        self.first = n_iter - average if average > 1 else n_iter
        self.count = 0
        self.ref = self.sums = None

    def add(self, it, state):
        if it < self.first:
            return
        model = (float(state.w0), state.w.astype(np.float64), state.V.astype(np.float64))
        if self.ref is None:  # the sums are of deviations from the first model: what did
            self.ref = model  # not move (a held w0) comes back bit for bit
            self.sums = [0.0, np.zeros_like(model[1]), np.zeros_like(model[2])]
        else:
            self.sums[0] += model[0] - self.ref[0]
            self.sums[1] += model[1] - self.ref[1]
            self.sums[2] += model[2] - self.ref[2]
        self.count += 1

    def store(self, state):
        if self.count < 2:
            return
        state.w0 = self.ref[0] + self.sums[0] / self.count
        state.w[:] = self.ref[1] + self.sums[1] / self.count
        state.V[:] = self.ref[2] + self.sums[2] / self.count
