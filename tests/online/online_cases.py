"""Estimator lists and helpers shared by the online-estimator test modules (fixtures are in
conftest.py)."""

import numpy as np

from fmlearn.losses import LOGISTIC, SQUARED
from fmlearn.online import ESTIMATORS as _BY_MODEL

CCFMRegressor, CCFMClassifier = _BY_MODEL["ccfm"]
OnlineFMRegressor, OnlineFMClassifier = _BY_MODEL["fm"]
OnlineCFMRegressor, OnlineCFMClassifier = _BY_MODEL["cfm"]

LOSS = {"squared": SQUARED, "logistic": LOGISTIC}


# the learners on X as given (standardize=False): what the learners share; standardize
# has its own tests (test_online_standardize.py)
ESTIMATORS = [
    CCFMRegressor(trace_bound=3.0, gamma_power=1.0, standardize=False),
    CCFMRegressor("ogd", trace_bound=3.0, standardize=False),
    CCFMRegressor("pa", trace_bound=3.0, standardize=False),
    CCFMRegressor("ftrl", trace_bound=3.0, standardize=False),
    OnlineFMRegressor(n_factors=3, learning_rate=0.1, standardize=False),
    OnlineFMRegressor("ogd", n_factors=3, standardize=False),
    OnlineFMRegressor("pa", n_factors=3, standardize=False),
    OnlineCFMRegressor(trace_bound=3.0, learning_rate=0.1, standardize=False),
]


CLASSIFIERS = [
    CCFMClassifier(trace_bound=20.0, gamma_power=1.0, standardize=False),
    CCFMClassifier("ftrl", trace_bound=20.0, standardize=False),
    OnlineFMClassifier(n_factors=3, learning_rate=0.1, standardize=False),
    OnlineCFMClassifier(trace_bound=20.0, learning_rate=0.1, standardize=False),
]


ALL_LEARNERS = ESTIMATORS + CLASSIFIERS[:1]


def scores(m, X):
    return m.decision_function(X) if hasattr(m, "decision_function") else m.predict(X)


def snapshot_dict(est):
    return {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else copy_value(v))
            for k, v in vars(est).items() if not k.startswith("_")}


def copy_value(v):
    import copy

    return copy.deepcopy(v)


def assert_same_dict(est, before):
    after = {k: v for k, v in vars(est).items() if not k.startswith("_")}
    assert set(after) == set(before)
    for k, v in before.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(after[k], v, err_msg=k)
        else:
            assert after[k] == v, k


def crafted(tmp_path, est, edit):
    """Save ``est``, change one state array with ``edit`` and recompute every digest."""
    import hashlib
    import io as _io
    import json
    import zipfile

    from fmlearn.io import manifest_digest

    src, dst = tmp_path / "m.fmz", tmp_path / "evil.fmz"
    est.save(src)
    with zipfile.ZipFile(src) as zf:
        meta = json.loads(zf.read("fmlearn.json"))
        blobs = {n: zf.read(n) for n in zf.namelist() if n != "fmlearn.json"}
    name, arr = edit({k: np.load(_io.BytesIO(blobs[s["file"]]))
                      for k, s in meta["arrays"].items()})
    buf = _io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr))
    spec = meta["arrays"][name]
    blobs[spec["file"]] = buf.getvalue()
    spec.update(shape=list(arr.shape), dtype=arr.dtype.str,
                sha256=hashlib.sha256(buf.getvalue()).hexdigest())
    meta["digest"] = manifest_digest(meta)
    with zipfile.ZipFile(dst, "w") as zf:
        zf.writestr("fmlearn.json", json.dumps(meta))
        for n, b in blobs.items():
            zf.writestr(n, b)
    return dst


MUTATIONS = {
    "C_r beyond the cap": ("state_C_r_", lambda a: a + 10_000),
    "negative counter": ("state_t_", lambda a: a - 10**6),
    "S index out of range": ("state_S_indices_", lambda a: a + 10_000),
    "S pointer past the end": ("state_S_indptr_", lambda a: a * 3 + 1),
    "NaN in C": ("state_C_K_", lambda a: a * np.nan),
    "truncated basis": ("state_C_K_", lambda a: a[:-1]),
    "tracker size": ("state_tr_nb_", lambda a: a + 100),
    "V of the wrong width": ("state_V_", lambda a: a[:, :-1]),
    "w truncated": ("state_w_", lambda a: a[:-1]),
    "huge k": ("state_k_", lambda a: a + 100),
}


_S = ["S index out of range", "S pointer past the end", "tracker size"]


CRAFTED = [
    (CCFMRegressor(trace_bound=3.0), ["C_r beyond the cap", "negative counter", "NaN in C",
                                      "truncated basis"] + _S),
    (CCFMRegressor("ogd", trace_bound=3.0, max_rank=20),
     ["C_r beyond the cap", "negative counter", "NaN in C", "truncated basis"]),
    (CCFMRegressor("ftrl", trace_bound=3.0), ["negative counter", "huge k"] + _S),
    (OnlineFMRegressor("ftrl", n_factors=3),
     ["negative counter", "V of the wrong width", "w truncated"]),
    (OnlineCFMRegressor(trace_bound=3.0), ["negative counter", "huge k", "w truncated"] + _S),
]

