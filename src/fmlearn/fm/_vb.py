"""The variational posterior of the classic FM (``solver="vb"``) between the estimator and a
model file: the check of a loaded ``w_var_``, ``V_var_`` and ``vb_``
(:class:`fmlearn.solvers.vb.VBPosterior`; built and committed by
:class:`fmlearn.fm._plan.ClassicFMPlan`)."""

import numbers

import numpy as np

__all__ = ["check_loaded_posterior"]


def check_loaded_posterior(est, d, k, n_groups):
    """Refuse loaded variational factors that do not match d, k and the groups, or whose
    variances and precisions are not positive and finite."""
    from ..solvers.vb import ATTRIBUTE_SHAPES

    w_var, V_var, vb = est.w_var_, est.V_var_, est.vb_
    if (not isinstance(w_var, np.ndarray) or not isinstance(V_var, np.ndarray)
            or w_var.shape != (d,) or V_var.shape != (d, k)):
        raise ValueError(f"w_var_ / V_var_ do not match n_features_in_={d}, n_factors={k}")
    if not (np.all(w_var > 0) and np.all(V_var > 0) and np.all(np.isfinite(w_var))
            and np.all(np.isfinite(V_var))):
        raise ValueError("w_var_ / V_var_ must hold positive finite variances")
    if not isinstance(vb, dict) or set(vb) != set(ATTRIBUTE_SHAPES):
        raise ValueError(f"vb_ must hold exactly the keys {sorted(ATTRIBUTE_SHAPES)}")
    shapes = {(): (), "G": (n_groups,), "kG": (k, n_groups)}
    t = vb.get("t")
    if not isinstance(t, (int, np.integer)) or isinstance(t, bool) or t < 0:
        raise ValueError("vb_['t'] must be a non-negative integer (the sweeps done)")
    for name, kind in ATTRIBUTE_SHAPES.items():
        value = vb[name]
        if kind == "int":
            continue
        if kind == ():
            ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
            arr = np.asarray(value, dtype=np.float64) if ok else None
        else:
            arr = np.asarray(value)
            ok = arr.shape == shapes[kind] and arr.dtype.kind in "fi"
        if not ok or not np.all(np.isfinite(arr)):
            raise ValueError(f"vb_[{name!r}] must be finite with shape {shapes[kind]}")
        positive = name not in ("mu_w", "mu_v")
        if positive and not np.all(arr > 0):
            raise ValueError(f"vb_[{name!r}] must be positive")
