"""Convex factorization machines (Yamada et al. 2017): a global optimum, no initialization.

    f(x) = w0 + w^T x + 1/2 tr(W (x x^T - diag(x o x)))
         = w0 + w^T x + sum_{j<l} W_jl x_j x_l,          W psd, tr(W) <= trace_bound

The pairwise weights of the classic FM, <v_j, v_l>, become the entries of one positive
semi-definite matrix W whose trace (= nuclear norm) is bounded by ``trace_bound``: a convex problem
(a semidefinite program) solved by Hazan's algorithm (:mod:`fmlearn.solvers.hazan`), which adds
one rank-one atom per iteration. W is never formed: it is kept as atoms P diag(lambda) P^T,
and prediction uses the FM kernel with factors U = P diag(lambda)^1/2.
"""

import numbers
import warnings

import numpy as np
from sklearn.base import _fit_context, is_classifier
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import validate_data

from .._base import BaseFM, FMClassifierMixin, FMRegressorMixin, failure_atomic, progress
from .._data import merge_duplicate_rows, raw, to_csr
from .._docs import fill_doc
from .._early_stopping import PARAMETER_CONSTRAINTS as STOPPING_CONSTRAINTS
from .._early_stopping import SCORES, EarlyStopping, rule_of_params, split_rows
from .._threads import blas_single_thread
from ..exceptions import ConvergenceWarning, DivergenceError
from ..kernels.predict import fm_predict_csr
from ..solvers.hazan import (
    CFMState,
    HazanSettings,
    auto_trace_bound,
    baseline_loss,
    cfm_data,
    compress_atoms,
    hazan_solver,
    sparse_pair,
)


def is_convex_fm(est):
    """Whether ``est`` is a convex FM (regressor or classifier)."""
    return isinstance(est, _BaseConvexFM)


def begin_rows(est, n_features, dtype, *, labels=None, target_range=None, head=None):
    """Record what ``fit`` records before the solver, for rows held elsewhere (the Dask
    backend, :func:`fmlearn.distributed.fit_convex`): ``n_features_in_`` (and the feature
    names of ``head``, an empty frame of the columns), ``dtype_``, a classifier's ``classes_``
    from all the ``labels`` (checked as ``fit`` checks y), a regressor's ``y_range_`` widened by
    ``target_range`` (min and max of the targets; by the fitted range too with
    ``warm_start``). Returns the checked ``interaction_groups`` (as ``fit`` passes them to
    :func:`fmlearn.solvers.hazan.cfm_data`)."""
    validate_data(est, np.empty((0, n_features)) if head is None else head, reset=True,
                  skip_check_array=True)
    est.dtype_ = dtype
    if is_classifier(est):
        est._encode_y(labels, reset=True)
    else:
        est._update_clip_range(np.asarray(target_range), extend=est.warm_start)
    return est._groups(n_features)


def fit_rows(est, rows, eval_set=None):
    """Hazan's algorithm on ``rows`` (the rows object of :func:`begin_rows`' caller, e.g.
    :class:`fmlearn.distributed.DaskRows`): what ``fit`` runs once its rows are prepared."""
    return est._fit_rows(rows, eval_set)


def _round_up(x):
    """x rounded up to two significant digits (a tolerance that ``x`` meets)."""
    e = 10.0 ** (np.floor(np.log10(x)) - 1)
    return float(np.ceil(x / e) * e)


class _BaseConvexFM(BaseFM):
    # 0.1 name (Yamada et al. 2017's eta): until 0.3
    _renamed_params = {"eta": "trace_bound"}
    _parameter_constraints = {
        "trace_bound": [Interval(numbers.Real, 0, None, closed="left"), StrOptions({"auto"})],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "step": [StrOptions({"auto", "exact", "pairwise", "standard"})],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_linear": [Interval(numbers.Real, 0, None, closed="left")],
        "eig_tol": [Interval(numbers.Real, 0, 1, closed="neither")],
        "corrective_steps": [Interval(numbers.Integral, 0, None, closed="left")],
        "compress": ["boolean"],
        "linear_features": ["array-like", None],
        "interaction_groups": [list, tuple, None],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        **{k: STOPPING_CONSTRAINTS[k] for k in ("early_stopping", "validation_fraction",
                                                "n_iter_no_change")},
    }

    _loss = "squared"

    def __init__(self, trace_bound="auto", *, max_iter=100, step="auto", tol=1e-3,
                 reg_linear=0.0, eig_tol=1e-2, corrective_steps=0, compress=True,
                 linear_features=None, interaction_groups=None,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=5,
                 warm_start=False, random_state=None, verbose=0):
        self.trace_bound = trace_bound
        self.max_iter = max_iter
        self.step = step
        self.tol = tol
        self.reg_linear = reg_linear
        self.eig_tol = eig_tol
        self.corrective_steps = corrective_steps
        self.compress = compress
        self.linear_features = linear_features
        self.interaction_groups = interaction_groups
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.warm_start = warm_start
        self.random_state = random_state
        self.verbose = verbose

    # -- helpers ----------------------------------------------------------------------------
    def _start_state(self, d, eta):
        empty = CFMState(0.0, np.zeros(d), np.zeros((d, 0)), np.zeros(0), 0, None)
        if not (self.warm_start and hasattr(self, "atoms_")) or self.atoms_.shape[0] != d:
            return empty
        lam = self.atom_weights_.astype(np.float64)
        total = float(lam.sum())
        # A new trace_bound continues a path: scaling W keeps it psd and puts it on the new
        # budget.
        if total > 0 and float(self.trace_bound_) != eta:
            lam = lam * (eta / float(self.trace_bound_))
        return CFMState(float(self.w0_), self.w_.astype(np.float64),
                        self.atoms_.astype(np.float64), lam, int(self.t_),
                        getattr(self, "_lanczos_start", None))

    def _linear_mask(self, d):
        if self.linear_features is None:
            return None
        idx = np.asarray(self.linear_features)
        if idx.dtype == bool:
            if idx.shape != (d,):
                raise ValueError(f"a boolean linear_features needs {d} entries, got {idx.shape}")
            return idx.astype(np.float64)
        if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
            raise ValueError("linear_features must be feature indices or a boolean mask")
        if idx.size and (idx.min() < 0 or idx.max() >= d):
            raise ValueError(f"linear_features holds indices outside [0, {d})")
        mask = np.zeros(d)
        mask[idx] = 1.0
        return mask

    def _groups(self, d):
        if self.interaction_groups is None:
            return None
        seen = np.zeros(d, dtype=bool)
        groups = []
        for k, g in enumerate(self.interaction_groups):
            idx = np.asarray(g)
            if idx.ndim != 1 or idx.size == 0 or idx.dtype.kind not in "iu":
                raise ValueError(f"interaction_groups[{k}] must be a non-empty 1-D array of "
                                 "feature indices")
            if idx.min() < 0 or idx.max() >= d:
                raise ValueError(f"interaction_groups[{k}] holds indices outside [0, {d})")
            if np.any(seen[idx]) or np.unique(idx).size != idx.size:
                raise ValueError(f"interaction_groups[{k}] overlaps an earlier group "
                                 "(groups must be disjoint)")
            seen[idx] = True
            groups.append(idx.astype(np.int64))
        return groups

    def _eval_data(self, eval_set, carved=None):
        if carved is not None:  # rows carved out for early stopping (validated)
            return sparse_pair(to_csr(carved[0], np.float64)), carved[1]
        ev = self._validate_eval_set(eval_set)
        if ev is None:
            return None, None
        return sparse_pair(to_csr(ev[0], np.float64)), ev[1]

    # -- fit --------------------------------------------------------------------------------
    def _fit(self, X, y, sample_weight, eval_set):
        X, y, sw = self._validate_train(X, y, sample_weight)
        classifier = is_classifier(self)
        # Early stopping: the duality gap's ``tol`` keeps its meaning; any decrease of the
        # validation loss counts as an improvement (the rule's margin is 0).
        rule = rule_of_params(self.get_params(deep=False),
                              score="log_loss" if classifier else "squared_error",
                              n_samples=X.shape[0], has_eval_set=eval_set is not None, tol=0.0)
        X, y, sw, carved = split_rows(X, y, sw, rule, self.random_state, classifier)
        if carved is not None and carved[2] is not None and np.all(carved[2] == 1):
            carved = carved[:2] + (None,)
        self.dtype_ = np.dtype(X.dtype).name
        # Merging identical rows is an exact rewriting of the weighted loss: a weight of m
        # equals m repeated rows, and the result does not depend on the row order.
        X, y, sw = merge_duplicate_rows(to_csr(X, X.dtype), y, sw)
        # Rows sorted by their first feature (stable, after the canonical merge order): the
        # sparse products then read the vectors in runs instead of at random (2x faster at
        # 10^6 rows); the order depends only on the data, so results stay reproducible.
        first = (np.where(np.diff(X.indptr) > 0, X.indices[np.minimum(X.indptr[:-1], X.nnz - 1)],
                          -1) if X.nnz else np.full(X.shape[0], -1))  # all-zero X: no order
        order = np.argsort(first, kind="stable")
        X, y, sw = X[order], y[order], sw[order]
        self._update_clip_range(y, extend=self.warm_start)
        return self._fit_rows(cfm_data(X, y, sw, self._groups(X.shape[1])), eval_set,
                              stopping=rule, carved=carved)

    def _fit_rows(self, rows, eval_set=None, *, stopping=None, carved=None):
        """Hazan's algorithm on ``rows`` (in-memory :class:`CFMData`, or the Dask rows of
        :func:`fmlearn.distributed.fit_convex`) from the warm-start state; sets the learned
        attributes. ``n_features_in_``, ``dtype_`` (and a regressor's ``y_range_``) are set."""
        d = int(self.n_features_in_)
        eval_data, y_val = self._eval_data(eval_set, carved)
        val_sw = None if carved is None else carved[2]
        # BLAS on one thread: the n-vector dot products of the solver (numpy's) are split
        # by thread count otherwise, and the iterates then depend on it (threadpoolctl
        # limits 1 and 2 gave W differing by 1e-8 on 30,000 rows).
        with blas_single_thread():
            return self._hazan(rows, d, eval_data, y_val, stopping, val_sw)

    def _hazan(self, rows, d, eval_data, y_val, stopping=None, val_sw=None):
        rs = check_random_state(self.random_state)
        eta = (auto_trace_bound(rows, self._loss) if self.trace_bound == "auto"
               else float(self.trace_bound))
        state = self._start_state(d, eta)
        classifier = is_classifier(self)
        scale = baseline_loss(rows, self._loss)
        settings = HazanSettings(trace_bound=eta, max_iter=int(self.max_iter),
                                 loss=self._loss, step=self.step, tol=float(self.tol),
                                 gap_scale=scale if scale > 0 else None,
                                 reg_linear=float(self.reg_linear), eig_tol=float(self.eig_tol),
                                 eig_schedule=False, corrective=int(self.corrective_steps),
                                 linear_mask=self._linear_mask(d),
                                 metric=("error_rate",) if classifier
                                 else ("rmse", *self._clip_range()))
        history = {"metric": "error_rate" if classifier else "rmse",
                   "objective": [], "gap": [], "step": [], "train": []}
        if eval_data is not None:
            history["val"] = []
        monitor = None
        if stopping is not None and stopping.active and eval_data is not None:
            monitor = EarlyStopping(stopping)
            history["val_loss"] = []
            loss_fn = SCORES[stopping.score][0]
        bar = progress(self.verbose, self.max_iter, type(self).__name__)

        def callback(it, rec):
            history["objective"].append(rec["objective"])
            history["gap"].append(rec["gap"])
            history["step"].append(rec["step"])
            history["train"].append(rec["train"])
            post = {"gap": f"{rec['gap']:.3g}", "train": f"{rec['train']:.4f}"}
            if eval_data is not None:
                history["val"].append(self._metric(rec["val_pred"], y_val))
                post["val"] = f"{history['val'][-1]:.4f}"
            bar.set_postfix(post)
            bar.update(1)
            return bool(decision.get(it, False))

        decision = {}

        def pre_step(it, rec):  # the rule, while rec["snapshot"] is the recorded iterate
            pred = rec["val_pred"]
            if not classifier:
                pred = np.clip(pred, *self._clip_range())
            loss = loss_fn(y_val, pred, val_sw)
            history["val_loss"].append(loss)
            monitor.copy_state = rec["snapshot"]
            decision[it] = monitor.observe(it, loss)

        with bar:
            state, n_done, info = hazan_solver(rows, state, settings, rs, eval_data, callback,
                                               pre_step if monitor is not None else None)
        if info["diverged"]:
            raise DivergenceError(info["diverged"] + "; the estimator keeps its previous state")
        best = None
        if monitor is not None and monitor.keeps_best():
            best = int(monitor.best_iteration)
            state = monitor.best_state
            info = dict(info, objective=history["objective"][best],
                        gap=history["gap"][best])
        elif self.tol > 0 and not info["converged"] and not (monitor and monitor.stopped_early):
            self._warn_gap(info, scale, history)
        self.early_stopping_ = monitor is not None
        self.best_iteration_ = best
        P, lam = state.P, state.lam
        if self.compress:
            P, lam = self._compress(P, lam)
        dtype = np.dtype(self.dtype_)
        self.w0_ = float(state.w0)
        self.w_ = state.w.astype(dtype)
        self.atoms_ = np.ascontiguousarray(P, dtype=dtype)
        self.atom_weights_ = np.asarray(lam, dtype=dtype)
        self.n_atoms_ = int(lam.shape[0])
        self.trace_bound_ = eta
        self.t_ = int(state.t)
        self.n_iter_ = int(n_done)
        self.objective_ = float(info["objective"])
        self.gap_ = float(info["gap"])
        self.history_ = history
        self._lanczos_start = state.v0
        return self

    def _compress(self, P, lam):
        """:func:`compress_atoms`, group by group with ``interaction_groups`` (every atom lives
        in one group): the eigen-basis of the whole W would mix groups whose eigenvalues
        (nearly) coincide, and the atoms would no longer be block-diagonal."""
        groups = self._groups(P.shape[0])
        if groups is None:
            return compress_atoms(P, lam)
        parts = []
        for idx in groups:
            sel = np.flatnonzero(np.any(P[idx] != 0.0, axis=0))
            if sel.size:
                Q, vals = compress_atoms(P[np.ix_(idx, sel)], lam[sel])
                full = np.zeros((P.shape[0], vals.shape[0]))
                full[idx] = Q
                parts.append((full, vals))
        if not parts:
            return P[:, :0].copy(), lam[:0].copy()
        P = np.hstack([q for q, _ in parts])
        lam = np.concatenate([v for _, v in parts])
        order = np.argsort(-lam, kind="stable")
        return np.ascontiguousarray(P[:, order]), lam[order]

    def _warn_gap(self, info, scale, history):
        base = "the constant model's loss" if scale > 0 else "the objective"
        unit = max(scale if scale > 0 else info["objective"], 1e-300)
        rel = info["gap"] / unit
        # The certified gap's own decay over the second half of the run, extrapolated: the
        # worst case is 1/t (Jaggi 2013, Theorem 1), on the spectahedron it can be slower.
        obj, gap = np.asarray(history["objective"]), np.asarray(history["gap"])
        t = obj.shape[0]
        half = (obj[t // 2] - np.max(obj[:t // 2 + 1] - gap[:t // 2 + 1])) / unit if t > 3 else 0
        rate = np.log(half / rel) / np.log(t / (t // 2)) if t > 3 and half > rel > 0 else 0.0
        if rate > 0.1:
            need = int(np.ceil(t * (rel / self.tol) ** (1.0 / rate) / 10.0)) * 10
            more = (f"at its rate over the last {t - t // 2} iterations (t^-{rate:.2g}), about "
                    f"max_iter={need} would reach tol")
        else:
            more = "it is no longer falling: raise tol"
        warnings.warn(
            f"{type(self).__name__} did not reach a duality gap of tol={self.tol} x {base} in "
            f"max_iter={self.max_iter} iterations: the objective {info['objective']:.6g} is "
            f"within {info['gap']:.3g} of its optimum (certified), {rel:.3g} x {base}; {more}, "
            f"and tol={_round_up(rel):g} accepts this fit", ConvergenceWarning, stacklevel=6)

    # -- prediction -------------------------------------------------------------------------
    def _factors(self):
        return np.ascontiguousarray(self.atoms_ * np.sqrt(np.maximum(self.atom_weights_, 0)))

    def _raw_predict(self, X):
        indptr, indices, data = raw(to_csr(X, self._model_dtype()))
        out = np.empty(indptr.shape[0] - 1)
        fm_predict_csr(indptr, indices, data, self.w0_, self.w_, self._factors(), out)
        lo, hi = self._clip_range()
        return np.clip(out, lo, hi)

    def interaction_matrix(self):
        """The dense d x d matrix W (for small d only: it needs d^2 floats).

        Raises ``ValueError`` above 4096 features; use ``atoms_`` and ``atom_weights_``.
        """
        d = self.atoms_.shape[0]
        if d > 4096:
            raise ValueError(f"W would be {d} x {d}; use atoms_ and atom_weights_ instead")
        U = self._factors().astype(np.float64)
        return U @ U.T

    def _check_loaded_state(self):
        d = int(self.n_features_in_)
        m = int(self.n_atoms_)
        if self.w_.shape != (d,) or self.atoms_.shape != (d, m) or self.atom_weights_.shape != (m,):
            raise ValueError(f"w_ {self.w_.shape}, atoms_ {self.atoms_.shape}, atom_weights_ "
                             f"{self.atom_weights_.shape} do not match n_features_in_={d}, "
                             f"n_atoms_={m}")
        for name in ("w_", "atoms_", "atom_weights_"):
            arr = getattr(self, name)
            if arr.dtype != np.dtype(self.dtype_):
                raise ValueError(f"{name} has dtype {arr.dtype}, expected {self.dtype_}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{name} contains NaN or infinity")
        bound = self.trace_bound_ * (1 + 1e-6) + 1e-12
        if np.any(self.atom_weights_ < 0) or float(np.sum(self.atom_weights_)) > bound:
            raise ValueError("atom_weights_ must be non-negative with sum <= trace_bound_")
        if not np.isfinite(self.w0_):
            raise ValueError("w0_ is not finite")


class ConvexFMRegressor(FMRegressorMixin, _BaseConvexFM):
    """Convex factorization machine regressor (Yamada et al. 2017) by Hazan's algorithm.

    Model (Yamada et al. 2017, Eq. 1)::

        f(x) = w0 + w^T x + sum_{j<l} W_jl x_j x_l,     W psd,  tr(W) <= trace_bound

    fitted by (Yamada et al. 2017, Eq. 2)::

        min  sum_i s_i (y_i - f(x_i))^2 + reg_linear ||w||^2

    The linear part is eliminated exactly (a weighted ridge fit by conjugate gradient, Eq. 5);
    Frank-Wolfe (Algorithm 1) adds the top eigenvector of the negative gradient as an atom
    each iteration. Because the model ignores the diagonal of W, the constraint tr(W) = eta of
    the paper and tr(W) <= trace_bound give the same solutions. See :mod:`fmlearn.solvers.hazan` for
    the corrections to the printed algorithm and docs/convex.md for a guide.

    Parameters
    ----------
    trace_bound : float or "auto", default="auto"
        Trace (nuclear-norm) budget of W, Yamada et al.'s (2017) eta: the only capacity knob of the
        pairwise part, and it matters a lot; choose it on held-out data (``GridSearchCV``, or
        a warm-started path of increasing values, see Notes). ``trace_bound=0`` is ridge
        regression on x. ``"auto"``: 3 s_y / m2, with s_y the standard deviation of y (log 99,
        the margin of a 99%-confident prediction, for the classifier) and m2 the mean squared
        non-zero feature value, so the bound follows the units of X and y
        (:func:`fmlearn.solvers.hazan.auto_trace_bound`); the
        value used is ``trace_bound_``.
    max_iter : int, default=300
        Frank-Wolfe iterations (each adds at most one atom); the fit stops earlier at ``tol``
        (on MovieLens-100K after 1 iteration, on raw Abalone, whose feature scales differ
        most, after 203; each costs a few O(nnz) products).
    step : {"auto", "pairwise", "exact", "standard"}, default="auto"
        ``"exact"``: Frank-Wolfe's step W <- (1 - a) W + a eta p p^T with the minimizing a
        (Eq. 6, corrected); ``"standard"``: the same with a = 2 / (t + 2) (Algorithm 1).
        ``"pairwise"``: the exact step that moves mass from the worst atom of W (the largest
        <p_k p_k^T, grad J>, or the unused budget) to p (Lacoste-Julien & Jaggi 2015).
        ``"auto"``: at every iteration both the exact Frank-Wolfe and the pairwise step are
        computed, each with its exact line search; the Frank-Wolfe step is taken when the
        pairwise one is a drop step (its line search stopped at a = 1: the away atom had too
        little mass) and Frank-Wolfe's objective is lower, else the pairwise step (so ties go
        to it). Neither step is better everywhere: Frank-Wolfe's shrinks every atom alike,
        so mass put on early, poor atoms leaves only like 1/t (on tests/test_defaults.py's
        regression data 100 exact steps end 25% above the optimum, 100 pairwise ones meet
        ``tol``); the pairwise step moves mass off one atom at a time, so it stalls, step
        after drop step, when mass must leave many atoms at once (tests/test_encoders.py's
        noise-free multi-view completion, the optimum on the budget's boundary: objective
        after 50 / 150 steps 8.91 / 2.41 exact, 9.00 / 5.18 pairwise, 7.39 / 2.96 "auto").
        Taking the lower objective at every step regardless (no drop condition) is greedy
        per step, not per run: 31% above the pairwise run after 60 steps on
        tests/convex/test_convex.py's regression. For the squared loss the objectives along both
        directions are the quadratics of Eq. 6 (closed form); for the logistic loss the loss
        along each segment with the linear part fixed. "auto" costs one more
        conjugate-gradient solve (squared loss) or 1-D search (logistic) per step than
        "pairwise", which costs one more O(nnz * atoms) product than "exact".
    tol : float, default=1e-3
        Stop when the certified duality gap (the objective minus the best Frank-Wolfe lower
        bound J(W_t) - gap_t seen: a bound on the distance to the optimal objective) falls
        below ``tol`` times the loss of the constant model (sum_i s_i (y_i - ybar)^2; for the
        classifier the class entropy), a scale of the data that, unlike the objective, does
        not shrink as the fit improves (scikit-learn's Lasso scales its gap by ||y||^2 alike);
        0 runs exactly ``max_iter`` iterations. A ``ConvergenceWarning`` is issued when
        ``tol > 0`` is not reached; it gives the gap reached and the ``max_iter`` that should
        reach ``tol``.
    early_stopping, validation_fraction, n_iter_no_change : default=False, 0.1, 5
        Early stopping on a validation loss (the ``eval_set`` of :meth:`fit`, else
        ``validation_fraction`` of the rows, not trained on; the mean squared error of the
        clipped predictions, or the classifier's mean log loss: ``history_["val_loss"]``):
        stop after ``n_iter_no_change`` iterations without a decrease and keep the best
        iterate (``best_iteration_``: the Frank-Wolfe steps it had taken). ``tol`` keeps its
        meaning (the duality gap; both rules apply). See docs/early-stopping.md.
    reg_linear : float, default=0.0
        L2 penalty lambda_1 on w (the intercept w0 is not penalized).
    eig_tol : float, default=1e-2
        Relative tolerance of the Lanczos eigen-solver (the approximate eigenvector of
        Algorithm 1; a looser value is cheaper and changes the iterates very little).
    corrective_steps : int, default=0
        Corrective steps after every Frank-Wolfe step: projected-gradient steps, each with
        exact line searches, on the face {Q S Q^T : S psd, tr S <= trace_bound} spanned by the
        current atoms (Q an orthonormal basis of their span, S k x k), which rotate and
        re-weight the atoms towards the optimum where Frank-Wolfe moves one rank-one atom at a
        time (Jaggi 2013's corrective variants, Laue 2012's local refinement;
        :mod:`fmlearn.solvers._hazan_face`). Each costs O(nnz k + n k^2) for k atoms. 0 (the
        regressor's default, which meets ``tol`` on the bundled sets without them): none.
    compress : bool, default=True
        After fitting, rewrite the atoms in the eigen-basis of W, dropping negligible
        eigenvalues (<= 1e-10 tr W): fewer atoms, the same predictions.
    linear_features : array-like of int or bool, default=None
        Features that get a linear weight (indices or a mask); the others have w_j = 0.
        None: all. Yamada et al. 2017, Eq. 14 (tensor completion) puts the bias on the mode blocks
        only: ``TensorEncoder.linear_features_``.
    interaction_groups : list of array-like of int, default=None
        Disjoint groups of features; W is block-diagonal over them (only features of the same
        group interact, each block psd, the traces summing to <= trace_bound), and the Frank-Wolfe
        vertex is the best of the blocks' top eigenvectors. None: one block of all features.
        Tensor completion needs it (Yamada et al. 2017, Lemma 3): ``TensorEncoder.groups_``; without
        it, pairs of unfolding indices from two modes identify single entries and the model
        memorizes instead of completing.
    clip_predictions : bool, default=True
        Clip predictions to the range of the training targets.
    warm_start : bool, default=False
        Continue from the previous atoms and linear part. With a new ``trace_bound`` the previous W
        is rescaled to it, so a path over trace_bound costs a few iterations per value.
    random_state : int, RandomState or None, default=None
        Draws the first Lanczos start vector (the only randomness).
    verbose : int, default=0
        Show a progress bar with the gap and train (and eval_set) RMSE.

    Attributes
    ----------
    w0_ : float
    w_ : ndarray of shape (n_features,)
    atoms_ : ndarray of shape (n_features, n_atoms_)
        Unit-norm atoms p_k (orthonormal after compression).
    atom_weights_ : ndarray of shape (n_atoms_,)
        Non-negative weights with sum <= trace_bound: W = atoms_ diag(atom_weights_) atoms_^T.
    n_atoms_ : int
    trace_bound_ : float
        The trace bound used (``trace_bound``, or its ``"auto"`` value).
    n_iter_ : int
        Iterations run by the last ``fit``; ``t_`` counts all Frank-Wolfe steps so far.
    objective_ : float
        Final value of the objective (Eq. 2).
    gap_ : float
        Certified duality gap of the result: ``objective_ - gap_`` is a lower bound on the
        optimal objective (the best Frank-Wolfe bound J(W_t) - gap_t of the iterations).
    history_ : dict
        Per iteration, for the iterate before its step: ``"objective"``, ``"gap"`` (the
        Frank-Wolfe duality gap), ``"step"``, ``"train"`` RMSE and, with ``eval_set``,
        ``"val"`` RMSE.
    n_features_in_ : int

    Notes
    -----
    Memory is O(nnz + n_features * n_atoms); each iteration costs a few dozen sparse
    products with X (Lanczos) and two conjugate-gradient solves, all O(nnz).

    References
    ----------
    M. Yamada et al. Convex factorization machine for regression. arXiv:1507.01073
    (Yamada et al. 2017), Eq. 1-6, Algorithm 1. E. Hazan. Sparse approximate solutions to
    semidefinite programs. LATIN 2008.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import ConvexFMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 6)); y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> m = ConvexFMRegressor(trace_bound=2.0, max_iter=30, tol=0, random_state=0).fit(X, y)
    >>> bool(np.sqrt(np.mean((m.predict(X) - y) ** 2)) < 0.3), m.n_atoms_ <= 30
    (True, True)
    """

    _parameter_constraints = {**_BaseConvexFM._parameter_constraints,
                              "clip_predictions": ["boolean"]}

    def __init__(self, trace_bound="auto", *, max_iter=300, step="auto", tol=1e-3,
                 reg_linear=0.0, eig_tol=1e-2, corrective_steps=0, compress=True,
                 linear_features=None, interaction_groups=None,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=5,
                 clip_predictions=True, warm_start=False, random_state=None, verbose=0):
        super().__init__(trace_bound, max_iter=max_iter, step=step, tol=tol, reg_linear=reg_linear,
                         eig_tol=eig_tol, corrective_steps=corrective_steps,
                         compress=compress, linear_features=linear_features,
                         interaction_groups=interaction_groups,
                         early_stopping=early_stopping,
                         validation_fraction=validation_fraction,
                         n_iter_no_change=n_iter_no_change, warm_start=warm_start,
                         random_state=random_state, verbose=verbose)
        self.clip_predictions = clip_predictions

    @fill_doc
    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, eval_set=None):
        """Fit the model.

        Parameters
        ----------
        %(fit_data)s
        eval_set : (X_val, y_val), optional
            Held-out data whose RMSE is recorded in ``history_["val"]`` each iteration
            (tracked in O(nnz) per iteration).
        """
        return self._fit(X, y, sample_weight, eval_set)


class ConvexFMClassifier(FMClassifierMixin, _BaseConvexFM):
    """Convex factorization machine for binary classification (an extension of Yamada et al. 2017).

    The model and feasible set of :class:`ConvexFMRegressor` with the logistic loss::

        min  sum_i s_i log(1 + exp(-y_i f(x_i))) + reg_linear / 2 ||w||^2,
             W psd, tr(W) <= trace_bound

    still a convex problem. The paper treats the squared loss only; here the linear part is
    re-fitted by Newton's method after every Frank-Wolfe step (it has no closed form), and the exact
    step minimizes the smooth logistic loss along the segment. ``predict_proba`` is the
    sigmoid of the score.

    Parameters
    ----------
    trace_bound, step, tol, eig_tol, compress, linear_features, interaction_groups, \
warm_start, random_state, verbose :
        As in :class:`ConvexFMRegressor`.
    max_iter : int, default=100
        Frank-Wolfe iterations; each re-fits the linear part by Newton's method, so the
        default is lower than the regressor's.
    corrective_steps : int, default=1
        As in :class:`ConvexFMRegressor`. One per Frank-Wolfe step by default: with none, the
        pairwise steps alone left a certified gap of 0.0076 x the class entropy on IJCNN1
        after 100 steps (objective 5487.2, falling 0.006% per step; the optimum is below
        5430); with one, ``tol`` is met after 42 steps at 5431.0, and on Adult after 60, in
        0.73x / 0.99x the CPU seconds of 100 steps without (two per step: 39 and 54 steps, but
        1.3-1.4x the CPU seconds on Adult; benchmarks/RESULTS.md, "Defaults that learn").
    reg_linear : float, default=1.0
        L2 penalty on w (not w0). Positive by default: on separable data the unpenalized
        logistic fit has no minimizer.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    w0_, w_, atoms_, atom_weights_, n_atoms_, n_iter_, objective_, gap_, history_ :
        As in :class:`ConvexFMRegressor`; the ``history_`` metric is the error rate.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import ConvexFMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 4)); y = np.where(X[:, 0] * X[:, 1] > 0, "yes", "no")
    >>> clf = ConvexFMClassifier(trace_bound=20.0, max_iter=30, tol=0, random_state=0).fit(X, y)
    >>> bool((clf.predict(X) == y).mean() > 0.9)
    True
    """

    _loss = "logistic"

    def __init__(self, trace_bound="auto", *, max_iter=100, step="auto", tol=1e-3,
                 reg_linear=1.0, eig_tol=1e-2, corrective_steps=1, compress=True,
                 linear_features=None, interaction_groups=None,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=5,
                 warm_start=False, random_state=None, verbose=0):
        super().__init__(trace_bound, max_iter=max_iter, step=step, tol=tol, reg_linear=reg_linear,
                         eig_tol=eig_tol, corrective_steps=corrective_steps,
                         compress=compress, linear_features=linear_features,
                         interaction_groups=interaction_groups,
                         early_stopping=early_stopping,
                         validation_fraction=validation_fraction,
                         n_iter_no_change=n_iter_no_change, warm_start=warm_start,
                         random_state=random_state, verbose=verbose)

    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, eval_set=None):
        """Fit the model (see :meth:`ConvexFMRegressor.fit`); ``y`` holds any two labels."""
        return self._fit(X, y, sample_weight, eval_set)
