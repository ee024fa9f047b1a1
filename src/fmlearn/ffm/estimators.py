"""Field-aware factorization machines: :class:`FFMClassifier` and :class:`FFMRegressor`.

    phi(x) = w0 + <w, x> + sum_{j<l} <v_{j,f(l)}, v_{l,f(j)}> x_j x_l

(Juan, Zhuang, Chin & Lin, "Field-aware factorization machines for CTR prediction", RecSys
2016, Eq. 4, with the bias and linear terms of Rendle's FM). A feature has one latent vector
per field and uses, against feature l, the vector of l's field. Learned by LIBFFM's AdaGrad
SGD (the paper's Algorithm 1), with early stopping on a validation set (the paper's Section
3.3), ``partial_fit`` for streams, and the hashing trick through
:func:`fmlearn.datasets.load_libffm`.

The estimator validates, builds its plan (:mod:`._plan`), runs the solver (:mod:`._solver`)
and keeps the result: the model and its AdaGrad sums as the arrays ``state_factors_``,
``state_linear_`` and ``state_bias_`` (changed in place by ``partial_fit``, saved by
:meth:`save`); ``V_``, ``w_`` and ``w0_`` read them.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import _fit_context, is_classifier
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._base import (
    BaseFM,
    FMClassifierMixin,
    FMRegressorMixin,
    failure_atomic,
    progress,
)
from .._data import canonical_csr_or_none, raw, to_csr
from .._early_stopping import PARAMETER_CONSTRAINTS, SCORES, EarlyStopping, validation_split
from .._threads import n_threads
from ..exceptions import DivergenceError
from ._fields import mean_pair_weight, n_chunks, resolve_fields, rows_have_unique_fields
from ._kernels import LANES, touched_features
from ._plan import (
    LIBFFM_ETA,
    LIBFFM_ITERATIONS,
    LIBFFM_K,
    LIBFFM_LAMBDA,
    DataSummary,
    RunContext,
    Validation,
    make_plan,
)
from ._solver import (
    FFMState,
    adagrad_solver,
    factors_of,
    init_state,
    predict_scores,
    training_rows,
    visiting_order,
)

_STATE = ("state_factors_", "state_linear_", "state_bias_")
# constructor argument names per class (inspect.signature is slow on a one-row call)
_PARAM_NAMES = {}


class _BaseFFM(BaseFM):
    _parameter_constraints = {
        "n_factors": [Interval(numbers.Integral, 0, None, closed="left")],
        "fields": ["array-like", None],
        "n_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "reg_bias": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_linear": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_pairwise": [Interval(numbers.Real, 0, None, closed="left")],
        "normalize_rows": ["boolean"],
        "init_stdev": [Interval(numbers.Real, 0, None, closed="left"), StrOptions({"auto"})],
        **PARAMETER_CONSTRAINTS,
        "shuffle": ["boolean"],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "n_jobs": [Interval(numbers.Integral, -1, None, closed="left"), None],
        "verbose": ["verbose"],
    }

    def __init__(self, n_factors=LIBFFM_K, *, fields=None, n_iter=LIBFFM_ITERATIONS,
                 learning_rate=LIBFFM_ETA, reg_bias=0.0, reg_linear=LIBFFM_LAMBDA,
                 reg_pairwise=LIBFFM_LAMBDA, normalize_rows=True, init_stdev="auto",
                 early_stopping="auto", validation_fraction=0.1, n_iter_no_change=2,
                 tol=1e-4, shuffle=True, warm_start=False, random_state=None, n_jobs=None,
                 verbose=0):
        self.n_factors = n_factors
        self.fields = fields
        self.n_iter = n_iter
        self.learning_rate = learning_rate
        self.reg_bias = reg_bias
        self.reg_linear = reg_linear
        self.reg_pairwise = reg_pairwise
        self.normalize_rows = normalize_rows
        self.init_stdev = init_stdev
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.shuffle = shuffle
        self.warm_start = warm_start
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    # -- the fitted model -------------------------------------------------------------------
    @property
    def V_(self):
        """The factors, shape (n_features, n_fields_, n_factors): ``V_[j, g]`` is v_{j,g}."""
        check_is_fitted(self)
        return factors_of(self.state_factors_, self.n_factors)

    @property
    def w_(self):
        """The linear weights, shape (n_features,)."""
        check_is_fitted(self)
        return self.state_linear_[:, 0].copy()

    @property
    def w0_(self):
        """The bias."""
        check_is_fitted(self)
        return float(self.state_bias_[0])

    @property
    def known_fields_(self):
        """``fields_`` with -1 for the features no training row used (their AdaGrad sums are
        still 1): the map to read new libffm files with, ``load_libffm(path,
        fields=model.known_fields_)``, which accepts any field for those (as LIBFFM, the model
        scores them with their untrained factors)."""
        check_is_fitted(self)
        out = self.fields_.copy()
        out[self.state_linear_[:, 1] == 1] = -1
        return out

    def _state(self):
        return FFMState(self.state_factors_, self.state_linear_, self.state_bias_)

    def _publish(self, state):
        self.state_factors_ = state.W
        self.state_linear_ = state.lin
        self.state_bias_ = state.bias

    # -- validation -------------------------------------------------------------------------
    def _validate(self, X, y, sample_weight, reset, classes=None):
        """Validated training rows: canonical CSR (the input itself when it already is one,
        no copy), targets (labels as -1 / +1), weights."""
        fast = None if reset else self._validate_train_fast(X, y, sample_weight)
        if fast is not None:
            return fast
        kw = {"classes": classes} if is_classifier(self) else {}
        Xv, yv, sw = self._validate_train(X, y, sample_weight, reset=reset, **kw)
        dtype = np.dtype(Xv.dtype) if reset else self._model_dtype()
        X_csr = canonical_csr_or_none(Xv, Xv.shape[1], dtype) if sp.issparse(Xv) else None
        if X_csr is None:
            X_csr = to_csr(Xv, dtype)
        if not is_classifier(self) and np.any(np.abs(yv) > 1e150):
            raise ValueError("targets above 1e150 in magnitude would overflow the squared "
                             "loss; rescale y")
        return X_csr, np.asarray(yv, dtype=np.float64), sw

    def _summary(self, X, y, sw, fields, n_fields):
        return DataSummary(
            n_samples=int(X.shape[0]), n_features=int(X.shape[1]), n_fields=int(n_fields),
            dtype=np.dtype(X.dtype).name,
            unique_fields=rows_have_unique_fields(raw(X)[0], X.indices, fields),
            target_bound=float(np.abs(y).max()) if y.shape[0] else 1.0,
            mean_pair_weight=mean_pair_weight(X.indptr, X.data, sw, self.normalize_rows))

    def _score_function(self, score_name, sw):
        fn = SCORES[score_name][0]
        lo, hi = self._clip_range()

        def score(pred, y, sw=sw):
            if np.isfinite(lo) or np.isfinite(hi):
                pred = np.clip(pred, lo, hi)
            return fn(y, pred, sw)

        return score

    def _validation(self, plan, X, y, sw, eval_set):
        """``(train_rows, Validation or None)``: the rows to train on (indices into X) and the
        validation rows: the ``eval_set``, or ``validation_fraction`` of X carved out
        (stratified for a classifier) when early stopping needs one."""
        rule = plan.stopping
        all_rows = np.arange(X.shape[0], dtype=np.int64)
        if eval_set is not None:
            Xv, yv = self._validate_eval_set(eval_set)
            Xv = to_csr(Xv, self._model_dtype())
            csr, yv, swv = raw(Xv), yv, None
        elif rule.split:
            stratify = y if is_classifier(self) else None
            train, val = validation_split(X.shape[0], rule.fraction, plan.split_seed, stratify)
            Xval = X[val]
            csr, yv, swv = raw(Xval), y[val], sw[val]
            if np.all(swv == 1):
                swv = None
            all_rows = train
        else:
            return all_rows, None
        score = self._score_function(rule.score, swv)
        return all_rows, Validation(csr, yv, swv, lambda pred: score(pred, yv))

    # -- fit --------------------------------------------------------------------------------
    def _warm_state(self, n_features, fields, dtype):
        """A copy of the fitted state when ``warm_start`` and it fits the data, else None."""
        if not (self.warm_start and hasattr(self, "state_factors_")):
            return None
        W = self.state_factors_
        if (W.shape[0] != n_features or W.shape[2] != n_chunks(self.n_factors)
                or W.dtype != dtype or not np.array_equal(self.fields_, fields)):
            return None
        return self._state().copy()

    def _fit(self, X, y, sample_weight, eval_set, callback, classes=None):
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
        warm = self.warm_start and hasattr(self, "state_factors_")
        X, y, sw = self._validate(X, y, sample_weight, reset=True, classes=classes)
        dtype = np.dtype(X.dtype)
        fields, n_fields = resolve_fields(self.fields, X.shape[1], self.n_factors,
                                          dtype.itemsize)
        rng = check_random_state(self.random_state)
        plan = make_plan(self.get_params(), self._summary(X, y, sw, fields, n_fields),
                         classifier=is_classifier(self), rng=rng,
                         has_eval_set=eval_set is not None)
        self._update_clip_range(y, extend=warm)
        train_rows, validation = self._validation(plan, X, y, sw, eval_set)
        state = self._warm_state(X.shape[1], fields, dtype)
        first_epoch = int(self.t_) if state is not None else 0
        if state is None:
            state = init_state(X.shape[1], n_fields, plan.n_factors, plan.n_chunks,
                               plan.init, dtype, rng)
        csr = raw(X)
        visit, sw_visit = visiting_order(csr, y, sw, train_rows, plan.solver.shuffle)
        rows = training_rows(csr, y, sw_visit, fields)
        monitor = EarlyStopping(plan.stopping, callback=callback,
                                copy_state=state.copy if plan.stopping.active else None)
        bar = progress(self.verbose, plan.solver.n_iter, type(self).__name__)
        context = RunContext(monitor=monitor, validation=validation, bar=bar)
        with bar, n_threads(self.n_jobs):
            state, n_done, info = adagrad_solver(rows, visit, state, plan.solver,
                                                 plan.shuffle_seed, context, first_epoch)
        if info["diverged"]:
            raise DivergenceError(info["diverged"] + "; the estimator keeps its previous state")
        self._publish(state)
        self.fields_ = fields.copy()
        self.n_fields_ = int(n_fields)
        self.dtype_ = dtype.name
        self.n_iter_ = int(n_done)
        self.t_ = first_epoch + int(n_done)
        stopped = monitor.keeps_best()
        self.best_iteration_ = (int(monitor.best_iteration) + 1 if stopped else None)
        self.early_stopping_ = bool(plan.stopping.active)
        self.init_stdev_ = float(plan.init.scale)
        history = monitor.history
        if validation is None:
            del history["val"]
        self.history_ = history
        return self

    # -- partial_fit ------------------------------------------------------------------------
    def _partial_fit(self, X, y, sample_weight, classes=None):
        first = not hasattr(self, "state_factors_")
        saved = dict(self.__dict__)
        snapshot = None
        try:
            params = self._checked_params()
            Xv, yv, sw = self._validate(X, y, sample_weight, reset=first, classes=classes)
            csr = raw(Xv)
            if first:
                dtype = np.dtype(Xv.dtype)
                fields, n_fields = resolve_fields(self.fields, Xv.shape[1], self.n_factors,
                                                  dtype.itemsize)
                rng = check_random_state(self.random_state)
                pair_weight = mean_pair_weight(csr[0], csr[2], sw, self.normalize_rows)
            else:
                self._check_compatible()
                fields, n_fields = self.fields_, self.n_fields_
                rng, pair_weight = None, 0.0
            summary = DataSummary(
                n_samples=int(Xv.shape[0]), n_features=int(Xv.shape[1]),
                n_fields=int(n_fields), dtype=np.dtype(Xv.dtype).name,
                unique_fields=rows_have_unique_fields(csr[0], csr[1], fields),
                target_bound=float(np.abs(yv).max()), mean_pair_weight=pair_weight)
            plan = make_plan(params, summary, classifier=is_classifier(self), rng=rng,
                             partial=True)
            if first:
                state = init_state(Xv.shape[1], n_fields, plan.n_factors, plan.n_chunks,
                                   plan.init, dtype, rng)
                self.fields_ = fields.copy()
                self.n_fields_ = int(n_fields)
                self.dtype_ = dtype.name
                self.n_iter_ = 0
                self.t_ = 0
                self.init_stdev_ = float(plan.init.scale)
                touched = None
            else:
                state = self._state()
                touched = touched_features(csr[1], int(csr[0][-1]), state.W.shape[0])
                # np.take, not W[touched]: the same copy, 5x faster on a large model
                # (327,680 x 20 x 4 float32, 90% of the rows: 0.18 -> 0.036 s per call)
                snapshot = (touched, np.take(state.W, touched, axis=0),
                            np.take(state.lin, touched, axis=0), state.bias.copy())
            self._update_clip_range(yv, extend=not first)
            rows = training_rows(csr, yv, sw, self.fields_)
            visit = np.arange(Xv.shape[0], dtype=np.int64)
            # the logistic loss on normalised rows cannot leave the floats (see the solver)
            bounded = is_classifier(self) and self.normalize_rows
            check = touched if touched is None or not bounded else touched[:0]
            state, _, info = adagrad_solver(rows, visit, state, plan.solver, 0, RunContext(),
                                            touched=check)
            if info["diverged"]:
                raise DivergenceError(info["diverged"] + "; the estimator keeps its previous "
                                      "state")
            self._publish(state)
            self.n_iter_ += 1
            self.t_ += 1
        except BaseException:
            if snapshot is not None:  # the rows' features, put back in place
                touched, W, lin, bias = snapshot
                self.state_factors_[touched] = W
                self.state_linear_[touched] = lin
                self.state_bias_[...] = bias
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        return self

    def _checked_params(self):
        """The constructor arguments as a dict, validated once per set of values (a one-row
        ``partial_fit`` should not pay for ``get_params`` and the constraints every time)."""
        names = _PARAM_NAMES.get(type(self))
        if names is None:
            names = _PARAM_NAMES[type(self)] = tuple(self._get_param_names())
        params = {name: getattr(self, name) for name in names}
        # scalars by value; arrays, lists (a field map of millions of ids) and objects by
        # identity: a token costs O(1) per parameter
        token = tuple(v if isinstance(v, (bool, int, float, str, type(None))) else
                      (type(v), id(v)) for v in params.values())
        if self.__dict__.get("_checked_params_token") != token:
            self._validate_params()
            self._checked_params_token = token
        return params

    def _check_compatible(self):
        """Refuse a ``partial_fit`` whose parameters changed what the state means."""
        C = self.state_factors_.shape[2]
        if C != n_chunks(self.n_factors):
            raise ValueError(f"n_factors={self.n_factors} differs from the fitted model's "
                             f"{self.V_.shape[2]}; fit again")
        if self.fields is not None and not np.array_equal(np.asarray(self.fields),
                                                          self.fields_):
            raise ValueError("fields differs from the fitted model's fields_; fit again")

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_checked_params_token", None)
        return state

    # -- prediction -------------------------------------------------------------------------
    def _raw_predict(self, X):
        # X comes validated and cast by BaseFM._scores: CSR, or a dense array to convert
        csr = raw(X if sp.issparse(X) else to_csr(X, self._model_dtype()))
        with n_threads(self.n_jobs):
            out = predict_scores(csr, self.fields_, self._state(), self.normalize_rows)
        lo, hi = self._clip_range()
        return np.clip(out, lo, hi) if (np.isfinite(lo) or np.isfinite(hi)) else out

    # -- loaded state -----------------------------------------------------------------------
    def _check_loaded_state(self):
        d = int(self.n_features_in_)
        for name in _STATE + ("fields_",):
            if not isinstance(getattr(self, name, None), np.ndarray):
                raise ValueError(f"{name} is missing")
        W, lin, bias, fields = (self.state_factors_, self.state_linear_, self.state_bias_,
                                self.fields_)
        F = self.n_fields_
        if not isinstance(F, int) or F < 1:
            raise ValueError(f"n_fields_={F!r} must be a positive int")
        C = n_chunks(self.n_factors)
        if W.shape != (d, F, C, 2, LANES) or lin.shape != (d, 2) or bias.shape != (2,):
            raise ValueError(f"state arrays of shapes {W.shape}, {lin.shape}, {bias.shape} do "
                             f"not match n_features_in_={d}, n_fields_={F}, "
                             f"n_factors={self.n_factors}")
        dtype = np.dtype(self.dtype_)
        if W.dtype != dtype or lin.dtype != dtype or bias.dtype != np.float64:
            raise ValueError(f"state arrays have dtypes {W.dtype}, {lin.dtype}, {bias.dtype}; "
                             f"expected {dtype}, {dtype}, float64")
        if fields.shape != (d,) or fields.dtype.kind not in "iu":
            raise ValueError(f"fields_ must hold {d} integer field ids")
        if fields.min() < 0 or fields.max() >= F or np.unique(fields).shape[0] != F:
            raise ValueError(f"fields_ must use every field id 0..{F - 1} and no other")
        if np.any(W[:, :, :, 1, :] < 1) or np.any(lin[:, 1] < 1) or bias[1] < 1:
            raise ValueError("AdaGrad sums below 1 (they start at 1 and only grow)")
        pad = W[:, :, :, 0, :].reshape(d, F, C * LANES)[:, :, self.n_factors:]
        if np.any(pad != 0):
            raise ValueError("padding factors beyond n_factors must be 0")
        self.fields_ = fields.astype(np.int32)
        if is_classifier(self):
            if np.shape(self.classes_) != (2,):
                raise ValueError("classes_ must hold two labels")
        else:
            lo, hi = getattr(self, "y_range_", (np.nan, np.nan))
            if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
                raise ValueError("invalid or missing training target range y_range_")


_FIT_DOC = """Fit the model by AdaGrad epochs (LIBFFM's learner).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training rows; CSR float64 or float32 is used without a copy (float32 halves
            memory and learns in float32, as LIBFFM).
        y : array-like of shape (n_samples,)
            %(y)s
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights; a row of weight m counts as m repeated rows.
        eval_set : (X_val, y_val), optional
            Validation rows scored after every epoch (``history_["val"]``); with
            ``early_stopping`` True or "auto" they decide when to stop, and no rows are
            carved out of X.
        callback : callable, optional
            ``callback(epoch, history)`` after each epoch (from 0; the keys of ``history_``);
            returning True stops the fit.
        """


class FFMClassifier(FMClassifierMixin, _BaseFFM):
    """Field-aware factorization machine for binary classification (click-through rates).

    Model (Juan, Zhuang, Chin & Lin 2016, Eq. 4, with a bias and linear terms)::

        phi(x) = w0 + <w, x> + sum_{j<l} <v_{j,f(l)}, v_{l,f(j)}> x_j x_l,  P(y=1) = sigmoid(phi)

    Every feature j has one k-vector per field, ``v_{j,g}``, used against the features of
    field g (``f(j)`` is j's field, from ``fields``). Learned by LIBFFM's AdaGrad SGD on the
    logistic loss (Juan et al. 2016, Algorithm 1): per row, each parameter the row touches
    takes the step ``G += g^2; p -= learning_rate * g / sqrt(G)`` (G starting at 1), with
    L2 ``reg_*`` added to the gradients of the touched parameters. See docs/ffm.md.

    Parameters
    ----------
    n_factors : int, default=4
        k, the length of each latent vector (LIBFFM ``-k``).
    fields : array-like of int of shape (n_features,) or None, default=None
        The field of each feature, ids 0, 1, ..., F - 1 (each used): from
        :func:`fmlearn.datasets.load_libffm`, ``TabularEncoder().groups_`` (one field per
        input column) or :func:`fmlearn.datasets.hashed_fields`. None gives every feature
        its own field (Juan et al.'s "dummy fields" of numerical features: a model of d^2 k
        factors, refused beyond 256 MB).
    n_iter : int, default=15
        Epochs (the most, with early stopping; LIBFFM ``-t``).
    learning_rate : float, default=0.2
        AdaGrad's step size eta (LIBFFM ``-r``).
    reg_bias, reg_linear, reg_pairwise : float, default=0, 2e-5, 2e-5
        L2 penalties of w0, w and the factors (LIBFFM ``-l`` is ``reg_pairwise``; LIBFFM has
        no bias or linear terms).
    normalize_rows : bool, default=True
        Divide each row by its Euclidean norm (LIBFFM's instance-wise normalisation, which
        scales each pair by 1 / ||x||^2; ``--no-norm`` is False).
    init_stdev : float or "auto", default="auto"
        Standard deviation of the normal initial factors. "auto": 0.1 / sqrt(w), w the mean
        pair weight |x_j x_l| of the training rows as the model sees them (after
        ``normalize_rows``; of the first batch for ``partial_fit``), so that the initial
        pair terms do not depend on the scale of the data: libFM's 0.1 on one-hot rows,
        0.32 on Frappe's normalised rows of 10 one-hot features (``init_stdev_``). LIBFFM
        starts from uniform factors on [0, 1 / sqrt(k)); on Frappe the normal start reached
        a lower validation log-loss at every k tried (docs/ffm.md).
    early_stopping : "auto" or bool, default="auto"
        Stop when the validation score has not improved by more than ``tol`` for
        ``n_iter_no_change`` epochs, and keep the best epoch's model (LIBFFM
        ``--auto-stop`` is ``n_iter_no_change=1, tol=0``). The validation rows are the
        ``eval_set`` of :meth:`fit`, else ``validation_fraction`` of the training rows
        (stratified). "auto": on with an ``eval_set`` or more than 10,000 rows
        (HistGradientBoosting's rule).
    validation_fraction : float in (0, 1), default=0.1
    n_iter_no_change : int, default=2
    tol : float, default=1e-4
        In units of the score (log-loss, or AUC with ``scoring="roc_auc"``).
    scoring : {"loss", "roc_auc"}, default="loss"
        The validation score: the log-loss, or the area under the ROC curve.
    shuffle : bool, default=True
        Visit the rows in a fresh random order each epoch (identical rows are first merged
        into one weighted row, which makes the fit independent of the input order). False:
        the given order, and ``fit`` equals ``partial_fit`` on the same rows.
    warm_start : bool, default=False
        ``fit`` continues from the fitted model and its AdaGrad sums.
    random_state : int, RandomState or None, default=None
    n_jobs : int or None, default=None
        Threads of the prediction (training is one sequential pass); results do not depend
        on it.
    verbose : int, default=0

    Attributes
    ----------
    V_ : ndarray of shape (n_features, n_fields_, n_factors)
    w_ : ndarray of shape (n_features,)
    w0_ : float
    state_factors_, state_linear_, state_bias_ : ndarrays
        The model with its AdaGrad sums, the arrays the kernels update (see
        ``fmlearn.ffm._kernels``).
    fields_ : ndarray of shape (n_features,), int32
    n_fields_ : int
    classes_ : ndarray of shape (2,)
    n_iter_ : int
        Epochs run by the last ``fit`` (``partial_fit`` calls count one each).
    t_ : int
        Epochs over the model's life (warm starts and ``partial_fit`` calls included): a
        warm-started ``fit`` continues the shuffles from there, so 5 + 5 epochs equal 10.
    best_iteration_ : int or None
        With early stopping, the epoch (from 1) whose model was kept.
    early_stopping_ : bool
        Whether early stopping was on (what "auto" resolved to).
    init_stdev_ : float
        The initial factors' standard deviation used (what "auto" resolved to).
    history_ : dict
        Per epoch: ``"train"`` (mean log-loss of the rows before their steps, LIBFFM's
        ``tr_logloss``), ``"val"`` (the validation score, when there is a validation set),
        ``"iter_time"`` (seconds); ``"metric"`` names the score.

    References
    ----------
    Y. Juan, Y. Zhuang, W.-S. Chin, C.-J. Lin. Field-aware factorization machines for CTR
    prediction. RecSys 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import FFMClassifier
    >>> rng = np.random.default_rng(0)
    >>> users, ads = rng.integers(20, size=2000), rng.integers(10, size=2000)
    >>> X = np.zeros((2000, 30)); X[np.arange(2000), users] = 1; X[np.arange(2000), 20 + ads] = 1
    >>> y = (users % 2 == ads % 2).astype(int)          # a pure interaction
    >>> clf = FFMClassifier(fields=[0] * 20 + [1] * 10, n_iter=20, random_state=0).fit(X, y)
    >>> bool((clf.predict(X) == y).mean() > 0.95)
    True
    """

    _parameter_constraints = {**_BaseFFM._parameter_constraints,
                              "scoring": [StrOptions({"loss", "roc_auc"})]}

    def __init__(self, n_factors=LIBFFM_K, *, fields=None, n_iter=LIBFFM_ITERATIONS,
                 learning_rate=LIBFFM_ETA, reg_bias=0.0, reg_linear=LIBFFM_LAMBDA,
                 reg_pairwise=LIBFFM_LAMBDA, normalize_rows=True, init_stdev="auto",
                 early_stopping="auto", validation_fraction=0.1, n_iter_no_change=2,
                 tol=1e-4, scoring="loss", shuffle=True, warm_start=False, random_state=None,
                 n_jobs=None, verbose=0):
        super().__init__(n_factors, fields=fields, n_iter=n_iter, learning_rate=learning_rate,
                         reg_bias=reg_bias, reg_linear=reg_linear, reg_pairwise=reg_pairwise,
                         normalize_rows=normalize_rows, init_stdev=init_stdev,
                         early_stopping=early_stopping,
                         validation_fraction=validation_fraction,
                         n_iter_no_change=n_iter_no_change, tol=tol, shuffle=shuffle,
                         warm_start=warm_start, random_state=random_state, n_jobs=n_jobs,
                         verbose=verbose)
        self.scoring = scoring

    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, eval_set=None, callback=None):
        return self._fit(X, y, sample_weight, eval_set, callback)

    fit.__doc__ = _FIT_DOC % {"y": "Any two labels."}

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch over the given rows in their order (a stream's batch): the same step as
        ``fit``, without shuffling or early stopping. A failed call changes nothing; a call
        costs O(nnz^2 k) for its rows, whatever the size of the model.

        ``classes`` (both labels) is needed on the first call unless ``y`` holds both.
        """
        return self._partial_fit(X, y, sample_weight, classes=classes)


class FFMRegressor(FMRegressorMixin, _BaseFFM):
    """Field-aware factorization machine for regression (squared loss).

    The model and learner of :class:`FFMClassifier` (Juan et al. 2016) on the squared loss;
    predictions are clipped to the training target range with ``clip_predictions``. The
    early-stopping score is the mean squared error.

    Parameters
    ----------
    Those of :class:`FFMClassifier` without ``scoring``, and:

    clip_predictions : bool, default=True
        Clip predictions to the range of the training targets (as libFM does).

    Attributes
    ----------
    Those of :class:`FFMClassifier` without ``classes_``, and ``y_range_``.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import FFMRegressor
    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.integers(10, size=3000), rng.integers(10, size=3000)
    >>> X = np.zeros((3000, 20)); X[np.arange(3000), a] = 1; X[np.arange(3000), 10 + b] = 1
    >>> y = np.sin(a) * np.cos(b)
    >>> m = FFMRegressor(fields=[0] * 10 + [1] * 10, n_iter=30, random_state=0).fit(X, y)
    >>> bool(np.sqrt(np.mean((m.predict(X) - y) ** 2)) < 0.1)
    True
    """

    _parameter_constraints = {**_BaseFFM._parameter_constraints,
                              "clip_predictions": ["boolean"]}

    def __init__(self, n_factors=LIBFFM_K, *, fields=None, n_iter=LIBFFM_ITERATIONS,
                 learning_rate=LIBFFM_ETA, reg_bias=0.0, reg_linear=LIBFFM_LAMBDA,
                 reg_pairwise=LIBFFM_LAMBDA, normalize_rows=True, init_stdev="auto",
                 early_stopping="auto", validation_fraction=0.1, n_iter_no_change=2,
                 tol=1e-4, clip_predictions=True, shuffle=True, warm_start=False,
                 random_state=None, n_jobs=None, verbose=0):
        super().__init__(n_factors, fields=fields, n_iter=n_iter, learning_rate=learning_rate,
                         reg_bias=reg_bias, reg_linear=reg_linear, reg_pairwise=reg_pairwise,
                         normalize_rows=normalize_rows, init_stdev=init_stdev,
                         early_stopping=early_stopping,
                         validation_fraction=validation_fraction,
                         n_iter_no_change=n_iter_no_change, tol=tol, shuffle=shuffle,
                         warm_start=warm_start, random_state=random_state, n_jobs=n_jobs,
                         verbose=verbose)
        self.clip_predictions = clip_predictions

    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, eval_set=None, callback=None):
        return self._fit(X, y, sample_weight, eval_set, callback)

    fit.__doc__ = _FIT_DOC % {"y": "Targets."}

    def partial_fit(self, X, y, sample_weight=None):
        """One epoch over the given rows in their order (see
        :meth:`FFMClassifier.partial_fit`)."""
        return self._partial_fit(X, y, sample_weight)

    def predict(self, X):
        """Predicted targets, shape (n_samples,), clipped to the training range when
        ``clip_predictions``."""
        return self._scores(X)
