"""FMRanker: a classic factorization machine learned from implicit feedback (positive events
only) to rank items for a context (a user, its features, the situation).

    f(x) = w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l,     x = context features + item features

The estimator validates, summarises the events (:mod:`._data`), builds the plan
(:func:`.plan.make_plan`), runs one solver (:mod:`.solvers`) and stores the result.
"""

import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import validate_data

from .._base import BaseFM, check_sample_weight, failure_atomic, progress
from .._data import check_sparse_structure, raw, to_csr
from .._threads import n_threads
from ..exceptions import DivergenceError
from ._data import item_mask, summarize
from .interactions import Interactions
from .kernels.sampled import Model
from .plan import RunContext, make_plan


class FMRanker(BaseFM):
    """Factorization machine for implicit feedback: ranks items from positive events.

    Model (Rendle 2010)::

        f(x) = w0 + sum_j w_j x_j + sum_{j<l} <v_j, v_l> x_j x_l

    over the features of a context (the user, its side features, the situation of the event)
    and of an item (its id, its side features). Only positive events (user, item[, context])
    are observed, optionally weighted (play counts, confidences); ``f`` is learned so that a
    context's positives score above the other items:

    - ``loss="warp"`` (default): WARP (Weston et al. 2011) with LightFM's adaptive sampling
      (Kula 2015): negatives are drawn until one scores within the margin of the positive, and
      the step is weighted by the rank this implies: the top of the list is learned first.
      Best precision at the top (precision@k, NDCG@k).
    - ``loss="bpr"``: Bayesian personalised ranking (Rendle et al. 2009), the logistic loss
      of f(c, i) - f(c, j) for one sampled negative j: optimises the AUC, the whole order.
    - ``loss="squared"``: the weighted squared loss over *every* (context, item) pair (Hu,
      Koren & Volinsky 2008): positives target 1 with weight ``sample_weight``, every other
      pair target 0 with weight ``negative_weight``; no sampling. Solved by implicit
      coordinate descent (``solver="icd"``; Bayer, He, Kanagal & Rendle 2017), whose sweep
      costs O(k nnz + k^2 (contexts + items)) however many pairs there are.

    Negatives are the items of the training events that are not positives of the context;
    the context's own terms (w0, its linear weights) cancel in the pairwise losses and stay
    zero there. Features that no training event holds (the id of a cold-start item) end with
    zero weights and factors: an unseen item is scored through its side features alone.

    Parameters
    ----------
    n_factors : int, default=32
        Rank k of the pairwise interactions.
    loss : {"warp", "bpr", "squared"}, default="warp"
    solver : {"auto", "adagrad", "sgd", "icd"}, default="auto"
        ``"auto"``: Adagrad (Duchi et al. 2011) for WARP and BPR, iCD for the squared loss.
        ``"sgd"``: constant step ``learning_rate``.
    n_iter : int or "auto", default="auto"
        Epochs over the events (WARP, BPR) or iCD sweeps (squared loss); ``"auto"``: 30
        epochs, 10 sweeps (iCD converges in a few: on MovieLens-100K's validation cuts 5, 10,
        15 and 30 sweeps gave precision@10 0.1456, 0.1471, 0.1474, 0.1481).
    learning_rate : float or "auto", default="auto"
        Step size of Adagrad / SGD; ``"auto"``: 0.03 for WARP, 0.1 for BPR (WARP's steps carry
        the rank weight L(rank), up to ~8 on a thousand items).
    reg_bias : float, default=0.0
        L2 penalty on w0 (squared loss only: w0 cancels in the pairwise losses).
    reg_linear, reg_pairwise : float or "auto", default="auto"
        L2 penalties on w and V. WARP and BPR add ``reg * theta`` to the gradient of every
        parameter a step touches, so a feature is shrunk in proportion to its number of
        events. The squared loss penalises ``reg m_l theta^2`` with m_l the total weight of
        the pairs that hold feature l (its events' weights plus ``negative_weight`` times the
        other side's rows): the same frequency scaling, and a penalty that does not depend on
        the data's size (Rendle et al. 2021 scale iALS's penalty the same way). ``"auto"``:
        1e-4 for WARP, 0.01 for BPR, 0.1 (w) and 0.03 (V) for the squared loss, chosen on
        validation cuts of MovieLens-100K's training events (benchmarks/bench_ranking.py).
    negative_weight : float, default=0.1
        Squared loss: the weight a0 of every (context, item) pair that is not an event,
        relative to an event of weight 1 (Hu et al.'s confidence of a positive is 1 / a0).
    max_sampled : int, default=10
        WARP: the most items drawn per event in search of a violating negative (LightFM's
        ``max_sampled``); BPR: the most draws to find one negative.
    negative_sampling : {"uniform", "popularity"}, default="uniform"
        Negatives drawn uniformly from the catalogue, or in proportion to their number of
        events (a popular item is a harder negative; WARP's rank estimate then counts draws
        of that distribution).
    init_stdev : float or "auto", default="auto"
        Standard deviation of the initial factors; ``"auto"``: 0.05 / sqrt(n_factors).
    item_columns : (start, stop), array of int or None, default=None
        For a matrix of event rows: the columns that describe the item (the rest describe the
        context). Not needed (and must be None or agree) when fitting an
        :class:`~fmlearn.ranking.Interactions`, which knows its blocks.
    warm_start : bool, default=False
        Start from the fitted model (Adagrad's accumulators start afresh).
    random_state : int, RandomState or None, default=None
        Initial factors, event orders and negative draws.
    n_jobs : int or None, default=None
        Threads of ``predict``; the solvers run on one thread (their result never depends on
        it).
    verbose : int, default=0
        Progress bar with the running loss.

    Attributes
    ----------
    w0_ : float
    w_ : ndarray of shape (n_features,)
    V_ : ndarray of shape (n_features, n_factors)
    item_columns_ : ndarray of int
        The item columns of the training data.
    n_iter_ : int
    settings_ : dict
        What the fit ran with ("auto" resolved): loss, solver, penalties, ...
    history_ : dict
        ``"loss"`` per iteration: WARP's and BPR's mean loss per unit of event weight over
        the epoch's steps; the squared loss's objective per event after the sweep (computed
        after the last sweep, and after every sweep with ``verbose`` or a ``callback``; NaN
        where not computed, as it costs about a fifth of a sweep); ``"iter_time"``: CPU
        seconds per iteration.
    n_features_in_ : int

    References
    ----------
    S. Rendle. Factorization machines. ICDM 2010.
    S. Rendle, C. Freudenthaler, Z. Gantner, L. Schmidt-Thieme. BPR: Bayesian personalized
    ranking from implicit feedback. UAI 2009.
    J. Weston, S. Bengio, N. Usunier. WSABIE: scaling up to large vocabulary image annotation.
    IJCAI 2011.
    M. Kula. Metadata embeddings for user and item cold-start recommendations. CBRecSys 2015.
    Y. Hu, Y. Koren, C. Volinsky. Collaborative filtering for implicit feedback datasets.
    ICDM 2008.
    I. Bayer, X. He, B. Kanagal, S. Rendle. A generic coordinate descent framework for
    learning from implicit feedback. WWW 2017.
    S. Rendle, W. Krichene, L. Zhang, Y. Koren. Revisiting the performance of iALS on item
    recommendation benchmarks. RecSys 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import recommend
    >>> from fmlearn.ranking import FMRanker, Interactions
    >>> rng = np.random.default_rng(0)
    >>> users = rng.integers(50, size=2000)
    >>> items = (users % 5) * 8 + rng.integers(8, size=2000)   # 5 tastes, 8 items each
    >>> data = Interactions(users, items, n_users=50, n_items=40)
    >>> model = FMRanker(n_factors=8, random_state=0).fit(data)
    >>> top = recommend(model, data.user_rows([0, 1]), data.item_rows(), k=3)
    >>> (top.indices // 8).tolist()   # users 0 and 1 get items of their taste
    [[0, 0, 0], [1, 1, 1]]
    """

    _parameter_constraints = {
        "n_factors": [Interval(numbers.Integral, 1, None, closed="left")],
        "loss": [StrOptions({"warp", "bpr", "squared"})],
        "solver": [StrOptions({"auto", "adagrad", "sgd", "icd"})],
        "n_iter": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither"),
                          StrOptions({"auto"})],
        "reg_bias": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_linear": [Interval(numbers.Real, 0, None, closed="left"), StrOptions({"auto"})],
        "reg_pairwise": [Interval(numbers.Real, 0, None, closed="left"), StrOptions({"auto"})],
        "negative_weight": [Interval(numbers.Real, 0, None, closed="neither")],
        "max_sampled": [Interval(numbers.Integral, 1, None, closed="left")],
        "negative_sampling": [StrOptions({"uniform", "popularity"})],
        "init_stdev": [Interval(numbers.Real, 0, None, closed="left"), StrOptions({"auto"})],
        "item_columns": ["array-like", tuple, None],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "n_jobs": [Interval(numbers.Integral, -1, None, closed="left"), None],
        "verbose": ["verbose"],
    }

    def __init__(self, n_factors=32, *, loss="warp", solver="auto", n_iter="auto",
                 learning_rate="auto", reg_bias=0.0, reg_linear="auto", reg_pairwise="auto",
                 negative_weight=0.1, max_sampled=10, negative_sampling="uniform",
                 init_stdev="auto", item_columns=None, warm_start=False, random_state=None,
                 n_jobs=None, verbose=0):
        self.n_factors = n_factors
        self.loss = loss
        self.solver = solver
        self.n_iter = n_iter
        self.learning_rate = learning_rate
        self.reg_bias = reg_bias
        self.reg_linear = reg_linear
        self.reg_pairwise = reg_pairwise
        self.negative_weight = negative_weight
        self.max_sampled = max_sampled
        self.negative_sampling = negative_sampling
        self.init_stdev = init_stdev
        self.item_columns = item_columns
        self.warm_start = warm_start
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    # -- validation ---------------------------------------------------------------------------
    def _events(self, X, sample_weight):
        """(EventData, n_features) of the training input; sets ``n_features_in_``."""
        if isinstance(X, Interactions):
            d = X.n_features
            mask = np.zeros(d, dtype=bool)
            mask[X.item_columns[0]:X.item_columns[1]] = True
            if self.item_columns is not None and not np.array_equal(
                    item_mask(self.item_columns, d), mask):
                raise ValueError(f"item_columns={self.item_columns!r} disagrees with the "
                                 f"Interactions' item block {X.item_columns}; leave it None")
            sw = None
            if sample_weight is not None:
                if X.weights is not None:
                    raise ValueError("the Interactions carry weights already: give the "
                                     "weights once (weights= or sample_weight=)")
                sw = check_sample_weight(sample_weight, len(X))
            if len(X) == 0:
                raise ValueError("the Interactions hold no event: there is nothing to fit")
            data = summarize(X, sw)
            self.n_features_in_ = d
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            return data
        check_sparse_structure(X)
        X = validate_data(self, X, reset=True, accept_sparse=["csr", "csc", "coo"],
                          dtype=[np.float64, np.float32], ensure_min_samples=1)
        if sp.issparse(X) and X.nnz and not np.all(np.isfinite(X.data)):
            raise ValueError("Input X contains NaN or infinity.")
        mask = item_mask(self.item_columns, X.shape[1])
        sw = check_sample_weight(sample_weight, X.shape[0])
        return summarize(to_csr(X, np.float64), sw, mask)

    # -- fit ----------------------------------------------------------------------------------
    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None, callback=None):
        """Learn from positive events.

        Parameters
        ----------
        X : Interactions, or {array-like, sparse matrix} of shape (n_events, n_features)
            The events: an :class:`~fmlearn.ranking.Interactions` (ids and side features),
            or one FM row per event (context features + item features) with the estimator's
            ``item_columns`` saying which columns describe the item. Equal events add up.
        y : None
            Ignored: every event is a positive (present for scikit-learn's API).
        sample_weight : array-like of shape (n_events,), optional
            Non-negative weight of each event (a count, a confidence); default 1.
        callback : callable, optional
            ``callback(i, history)`` after iteration ``i``; a true return value stops the
            fit.

        Returns
        -------
        self
        """
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
        data = self._events(X, sample_weight)
        plan = make_plan(self.get_params(), data)
        if plan.loss != "squared" and not np.any(data.n_negatives() > 0):
            warnings.warn(
                f"every context's positives cover all {data.n_items} items of the events: "
                f"loss={plan.loss!r} has no negative item to rank a positive against, so the "
                "model keeps its initial parameters. Add events of other items, or use "
                "loss='squared', which also learns from the pairs that are not events",
                UserWarning, stacklevel=2)
        rs = check_random_state(self.random_state)
        seed = int(rs.randint(np.iinfo(np.int32).max))
        model, warm = self._initial_model(plan, rs)
        bar = progress(self.verbose, plan.settings.n_iter, f"FMRanker[{plan.loss}]")
        run = RunContext(callback=callback, bar=bar,
                         tracking=bool(self.verbose) or callback is not None)
        with bar:
            if plan.solver == "icd":
                from .solvers.icd import icd_solver

                model, n_done, info = icd_solver(data, model, plan.settings, run)
            else:
                from .solvers.sampled import sampled_solver

                model, n_done, info = sampled_solver(data, model, plan.settings, seed, run)
        if info["diverged"]:
            raise DivergenceError(info["diverged"] + "; the estimator keeps its previous state")
        self._store(model, data, plan, run, n_done, warm)
        return self

    def _store(self, model, data, plan, run, n_done, warm):
        """Write the fitted state (the last step of ``fit``)."""
        if not warm:  # features no training row holds carry no information: zero them
            unused = ~data.used_features()
            model.w[unused] = 0.0
            model.V[unused] = 0.0
        self.w0_ = float(model.scal[0])
        self.w_ = model.w
        self.V_ = model.V
        self.item_columns_ = np.flatnonzero(data.item_mask).astype(np.int64)
        self.n_iter_ = int(n_done)
        self.settings_ = plan.resolved()
        self.history_ = run.history
        self.dtype_ = "float64"

    def _initial_model(self, plan, rs):
        d, k = plan.n_features, plan.n_factors
        if (self.warm_start and hasattr(self, "V_") and self.V_.shape == (d, k)):
            return Model(self.w_.copy(), self.V_.copy(), np.array([self.w0_])), True
        V = rs.normal(0.0, plan.init_stdev, size=(d, k)) if plan.init_stdev > 0 \
            else np.zeros((d, k))
        return Model(np.zeros(d), np.ascontiguousarray(V), np.zeros(1)), False

    # -- scores -------------------------------------------------------------------------------
    def _raw_predict(self, X):
        from ..kernels.predict import fm_predict_csr

        indptr, indices, data = raw(to_csr(X, np.float64))
        out = np.empty(indptr.shape[0] - 1)
        with n_threads(self.n_jobs):
            fm_predict_csr(indptr, indices, data, self.w0_, self.w_, self.V_, out)
        return out

    def decision_function(self, X):
        """The model's score f(x) of each row (higher ranks first), shape (n_rows,).

        ``X``: FM rows (context + item features) of ``n_features_in_`` columns, or an
        :class:`~fmlearn.ranking.Interactions` (the score of each of its events).
        """
        if isinstance(X, Interactions):
            if X.n_features != getattr(self, "n_features_in_", X.n_features):
                raise ValueError(f"the Interactions have {X.n_features} features, the model "
                                 f"{self.n_features_in_}")
            X = X.rows()
        return self._scores(X)

    def predict(self, X):
        """The scores f(x) (the same as :meth:`decision_function`)."""
        return self.decision_function(X)

    # -- persistence --------------------------------------------------------------------------
    def _check_loaded_state(self):
        d = int(self.n_features_in_)
        k = int(self.n_factors)
        if self.w_.shape != (d,) or self.V_.shape != (d, k):
            raise ValueError(f"w_ {self.w_.shape} / V_ {self.V_.shape} do not match "
                             f"n_features_in_={d}, n_factors={k}")
        for name in ("w_", "V_"):
            if getattr(self, name).dtype != np.float64:
                raise ValueError(f"{name} must be float64")
        cols = self.item_columns_
        if (not isinstance(cols, np.ndarray) or cols.ndim != 1 or cols.dtype.kind not in "iu"
                or cols.size == 0 or cols.min() < 0 or cols.max() >= d
                or np.any(np.diff(cols) <= 0)):
            raise ValueError("item_columns_ must be increasing column indices in "
                             f"[0, {d})")
        if not isinstance(self.settings_, dict) or "loss" not in self.settings_:
            raise ValueError("settings_ is missing or malformed")
        if not isinstance(self.w0_, float):
            raise ValueError("w0_ must be a float")
