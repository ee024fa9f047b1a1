"""Relational data (:class:`fmlearn.RelationData`, Rendle 2013) in the classic FM's estimators.

The glue between :class:`fmlearn.FMRegressor` / :class:`fmlearn.FMClassifier` and the
relational solvers (:mod:`fmlearn.solvers.relation`): validation of a relational ``X`` (at
fit, the width of every part is recorded as ``relation_features_``; later calls must match
it), the data summary and the merge of duplicate samples per block row, the ALS and MCMC runs
on the plan of :class:`~fmlearn.fm._plan.ClassicFMPlan`, and the predictions. SGD visits rows
one at a time and gains nothing from shared blocks: it runs on the expanded rows
(:meth:`fmlearn.RelationData.to_csr`).
"""

import numbers

import numpy as np
from scipy.special import ndtri
from sklearn.utils.validation import check_is_fitted

from .._data import to_csr
from .._plan import DataSummary
from ..relation import (
    check_relation_data,
    merge_relation_rows,
    relation_pair_stats,
    relation_square_stats,
)
from ._plan import raise_diverged

__all__ = ["LAYOUT", "check_loaded_layout", "check_warm_layout", "checked_predict_input",
           "expanded", "merge", "relation_eval_rows", "relation_predictions", "run_relation",
           "summarize", "validate_relation_X", "validate_relation_y"]

#: The fitted attribute recording the widths of the parts of the relational data of the fit.
LAYOUT = "relation_features_"


def _blocks(Xr):
    return [(b.indices, b.X) for b in Xr.blocks]


def validate_relation_X(est, X, *, reset, dtype=None):
    """The canonical relational ``X`` (:func:`fmlearn.relation.check_relation_data`).

    ``reset`` (a fit that starts over): records ``n_features_in_`` and ``relation_features_``
    and drops ``feature_names_in_``, as scikit-learn's validation does for a matrix. Otherwise
    the widths must match the fitted ones: the total (``n_features_in_``) and, when the model
    was fitted on relational data, every part."""
    layout = None if reset else getattr(est, LAYOUT, None)
    Xr = check_relation_data(X, dtype=dtype, layout=layout)
    d = Xr.shape[1]
    if reset:
        check_warm_layout(est, Xr.layout)
        est.n_features_in_ = d
        est.__dict__.pop("feature_names_in_", None)
        setattr(est, LAYOUT, list(Xr.layout))
    elif d != est.n_features_in_:
        raise ValueError(f"X has {d} features (expanded), but {type(est).__name__} is "
                         f"expecting {est.n_features_in_} features as input.")
    return Xr


def check_warm_layout(est, layout):
    """Refuse a warm start on relational data whose parts have other widths than the fitted
    model's of the same total (it would continue the model with its features shifted)."""
    fitted = getattr(est, LAYOUT, None)
    if (getattr(est, "warm_start", False) and fitted is not None and hasattr(est, "V_")
            and sum(layout) == est.n_features_in_ and list(layout) != list(fitted)):
        raise ValueError(f"warm_start=True continues a model fitted on relational data of "
                         f"feature counts {list(fitted)}; X has {list(layout)}: keep the "
                         "row-level features and every block at their fitted widths")


def validate_relation_y(y, n, numeric):
    """Targets of ``n`` relational samples: 1-D, of length n; float64 and finite when
    ``numeric`` (labels are left to the classifier's encoding)."""
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                         f"[{n}, {arr.shape[0]}]")
    if numeric:
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"y must be numeric, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise ValueError("Input y contains NaN or infinity.")
    return arr


def expanded(Xr, dtype):
    """The expanded rows of canonical relational data as canonical CSR (for SGD)."""
    return to_csr(Xr.to_csr(), dtype)


def summarize(Xr, sw):
    """The :class:`~fmlearn._plan.DataSummary` of the expanded rows (the squares computed per
    block row, :func:`fmlearn.relation.relation_square_stats`); the targets' range is added by
    the caller after the merge, as for a matrix."""
    sum_sq, n_nonzero = relation_square_stats(Xr, sw)
    return DataSummary(int(Xr.shape[0]), int(Xr.shape[1]), np.dtype(Xr.dtype).name,
                       float(np.sum(sw)), sum_sq=sum_sq, n_nonzero=n_nonzero,
                       sum_pairs=relation_pair_stats(Xr, sw))


def merge(Xr, y, sw):
    """Duplicate samples merged into weights (:func:`fmlearn.relation.merge_relation_rows`)."""
    return merge_relation_rows(Xr, y, sw)


def relation_eval_rows(Xr):
    """The :data:`~fmlearn.kernels.cd_relation.RelationRows` of a validated eval set (the fit's
    per-iteration validation metric, :class:`fmlearn.fm._history.FitRecorder`)."""
    from ..solvers.relation import relation_rows  # the relational kernels load when used

    return relation_rows(Xr.X, _blocks(Xr))


def run_relation(plan, Xr, y, sw, recorder):
    """ALS or MCMC (``plan.solver``) on merged relational samples: ``(state, n_done,
    result)`` for :meth:`ClassicFMPlan.commit`, as the matrix runs of :mod:`fmlearn.fm`
    return; raises ``DivergenceError`` as they do."""
    from ..solvers.relation import relation_als_solver, relation_column_data, relation_mcmc_solver

    data = relation_column_data(Xr.X, _blocks(Xr), y, sw)
    callback = recorder.sweep_callback(y, sw, plan.state)
    if plan.solver == "als":
        state, n_done, info = relation_als_solver(data, plan.state, plan.als, callback,
                                                  plan.context.start_clock)
        raise_diverged(info)
        return state, n_done, {}
    state, n_done, info = relation_mcmc_solver(data, plan.state, plan.chain, plan.mcmc,
                                               plan.seed, callback, plan.context.start_clock)
    raise_diverged(info)
    return state, n_done, {"chain": plan.chain}


def relation_predictions(est, Xr, probit, clip):
    """The raw scores of validated relational samples (``_raw_predict``'s): the posterior-mean
    predictor over the kept MCMC samples (each clipped to ``clip``, or Phi for ``probit``,
    returned on the margin scale as the matrix path does), else the model's f(x)."""
    from ..kernels.cd_relation import relation_predict, relation_predict_samples
    from ..solvers.relation import relation_rows

    rows = relation_rows(Xr.X, _blocks(Xr))
    out = np.empty(Xr.shape[0])
    if hasattr(est, "samples_V_") and getattr(est, "solver_", None) == "mcmc":
        relation_predict_samples(rows, est.samples_w0_, est.samples_w_, est.samples_V_, probit,
                                 float(clip[0]), float(clip[1]), out)
        if probit:
            out = ndtri(np.clip(out, 1e-300, 1.0 - 1e-16))
        return out
    relation_predict(rows, float(est.w0_), est.w_, est.V_, out)
    return out


def check_loaded_layout(est):
    """Refuse a loaded ``relation_features_`` that is not a list of non-negative integers
    summing to ``n_features_in_`` (absent: a model of a matrix)."""
    layout = est.__dict__.get(LAYOUT)
    if layout is None:
        return
    ok = (isinstance(layout, (list, tuple)) and len(layout) >= 1
          and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0
                  for v in layout))
    if not ok or sum(layout) != est.n_features_in_:
        raise ValueError(f"{LAYOUT} = {layout!r} must list non-negative feature counts "
                         f"summing to n_features_in_={est.n_features_in_}")


def checked_predict_input(est, X):
    """``_validate_X_predict`` for relational samples: fitted, widths of the fit, model
    dtype."""
    check_is_fitted(est)
    return validate_relation_X(est, X, reset=False, dtype=est._model_dtype())

