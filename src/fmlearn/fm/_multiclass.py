"""Multiclass :class:`fmlearn.FMClassifier`: one binary FM per class (one-vs-rest), with every
solver.

With C >= 3 labels, ``fit`` runs the binary fit of each class c on the labels "c or not c"
(every solver: SGD, ALS, MCMC, VB), exactly as :class:`sklearn.multiclass.OneVsRestClassifier`
runs a clone of the binary classifier per class: the same validated rows, the same
``random_state`` for every class, hence the same models. The C models are stored side by side
in the fitted attributes (``w0_`` (C,), ``w_`` (C, d), ``V_`` (C, d, k), MCMC's samples
(C, S, ...), VB's variances (C, ...); ``chain_`` / ``vb_`` a list of C dicts), so that the
model file stays the safe format (arrays and JSON), and a warm start continues each class's
model. ``decision_function`` returns the C binary scores, ``predict`` the class of the largest
one (first on ties, as ``OneVsRestClassifier``), ``predict_proba`` each class's binary
probability normalised to sum to 1 (in log space when they all underflow).

Why one-vs-rest and not a multinomial model: it works with every solver as it is (MCMC's and
VB's probit models have no conjugate multinomial form; a multinomial probit needs a latent
vector per row), it is what scikit-learn users get by wrapping the binary classifier, and each
class's model is the binary classifier's, with everything tested for it.

This module is the family's glue: the per-class views the plan is built from, the stacking of
their attributes, the scores and the check of a loaded multiclass model. It imports no
estimator module.
"""

import copy

import numpy as np
from scipy.special import log_expit, log_ndtr
from sklearn.base import clone

__all__ = ["PER_CLASS", "SHARED", "check_loaded_multiclass", "class_view", "is_multiclass",
           "ovr_predict", "ovr_proba", "stack_views"]

#: Fitted attributes with one value per class (stacked on a leading axis, or a list of dicts).
PER_CLASS = ("w0_", "w_", "V_", "samples_w0_", "samples_w_", "samples_V_", "w_var_", "V_var_",
             "chain_", "vb_")
#: Fitted attributes the classes share (the same value for every class's fit).
SHARED = ("n_iter_", "t_", "init_stdev_", "solver_", "dtype_")
_DICTS = ("chain_", "vb_")


def is_multiclass(est):
    """Whether the fitted ``est`` holds one model per class (three labels or more)."""
    classes = getattr(est, "classes_", None)
    return classes is not None and np.shape(classes)[0] > 2


def class_view(est, c, warm):
    """A fresh estimator with ``est``'s parameters (a clone: ``random_state`` copied, as
    ``OneVsRestClassifier`` clones its estimator) holding class ``c``'s fitted attributes when
    ``warm`` (a warm start or a further ``partial_fit`` continues them): the object the plan
    of class c's binary fit is built from and committed to."""
    view = clone(est)
    if warm:
        for name in PER_CLASS:
            if name in est.__dict__:
                value = est.__dict__[name][c]
                if name == "w0_":
                    value = float(value)
                setattr(view, name, copy.deepcopy(value) if name in _DICTS else value.copy()
                        if isinstance(value, np.ndarray) else value)
        for name in SHARED:
            if name in est.__dict__:
                setattr(view, name, est.__dict__[name])
    return view


def stack_views(est, views, histories):
    """Write the classes' fits (``views``, committed by the plan) to ``est``: per-class
    attributes stacked, shared ones from the first class; ``history_`` (when recorded) holds
    the summed solver seconds per iteration and each class's history under ``"classes"``."""
    for name in PER_CLASS:
        present = [name in v.__dict__ for v in views]
        est.__dict__.pop(name, None)
        if not all(present):
            continue
        values = [v.__dict__[name] for v in views]
        if name in _DICTS:
            est.__dict__[name] = values
        elif name == "w0_":
            est.__dict__[name] = np.array(values, dtype=np.float64)
        else:
            est.__dict__[name] = np.stack(values)
    for name in SHARED:
        if name in views[0].__dict__:
            est.__dict__[name] = views[0].__dict__[name]
    if histories is not None:
        times = np.sum([h["iter_time"] for h in histories], axis=0).tolist()
        est.history_ = {"metric": histories[0]["metric"], "iter_time": times,
                        "classes": histories}


def ovr_proba(scores, link):
    """``predict_proba`` of C binary scores (n, C): each class's probability of its binary
    model (``link`` "probit" or "logistic") divided by their sum, as OneVsRestClassifier
    normalises; computed from the log-probabilities where every class's underflows, so that
    each row sums to 1."""
    log_p = log_ndtr(scores) if link == "probit" else log_expit(scores)
    p = np.exp(log_p)
    total = p.sum(axis=1, keepdims=True)
    small = total[:, 0] < 1e-300
    p = np.divide(p, total, out=np.zeros_like(p), where=total > 0)
    if np.any(small):
        z = log_p[small] - log_p[small].max(axis=1, keepdims=True)
        e = np.exp(z)
        p[small] = e / e.sum(axis=1, keepdims=True)
    return p


def ovr_predict(scores, classes):
    """The label of the largest score of each row (the first on ties)."""
    return classes[np.argmax(scores, axis=1)]


def check_loaded_multiclass(est, d, k, n_groups, check_chain, check_posterior):
    """Refuse a loaded multiclass model whose per-class attributes do not hold one model of
    shape (d, k) per class (``check_chain`` / ``check_posterior`` check each class's MCMC chain
    and VB posterior on a per-class view)."""
    C = np.shape(est.classes_)[0]
    w0 = est.w0_
    if not isinstance(w0, np.ndarray) or w0.shape != (C,) or w0.dtype.kind != "f":
        raise ValueError(f"w0_ must be a float array of shape ({C},) (one bias per class)")
    if est.w_.shape != (C, d) or est.V_.shape != (C, d, k):
        raise ValueError(f"w_ {est.w_.shape} / V_ {est.V_.shape} do not hold {C} models of "
                         f"n_features_in_={d}, n_factors={k}")
    if est.solver_ == "mcmc":
        chains = est.chain_
        if not isinstance(chains, list) or len(chains) != C:
            raise ValueError(f"chain_ must hold one chain per class ({C})")
        for name in ("samples_w0_", "samples_w_", "samples_V_"):
            value = getattr(est, name)
            if not isinstance(value, np.ndarray) or value.ndim < 2 or value.shape[0] != C:
                raise ValueError(f"{name} must hold the samples of each of the {C} classes")
    if est.solver_ == "vb":
        vb = est.vb_
        if not isinstance(vb, list) or len(vb) != C:
            raise ValueError(f"vb_ must hold one posterior per class ({C})")
        if est.w_var_.shape != (C, d) or est.V_var_.shape != (C, d, k):
            raise ValueError(f"w_var_ / V_var_ do not hold {C} posteriors of shape "
                             f"({d},) / ({d}, {k})")
    for c in range(C):
        view = class_view(est, c, True)
        if est.solver_ == "mcmc":
            check_chain(view, d, k, n_groups)
        elif est.solver_ == "vb":
            check_posterior(view, d, k, n_groups)
