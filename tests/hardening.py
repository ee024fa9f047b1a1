"""Shared material of the hardening tests: one small configuration of every public estimator,
data each can fit, and a runner that plays hostile cases in a child process.

A compiled kernel that indexes out of bounds kills the process (SIGSEGV, SIGABRT) instead of
raising; so the cases run in ``python tests/hardening.py CASESET [names...]`` and the parent
asserts that the child exited normally and that every case ended as expected. The child prints
``START <case>`` before each case (flushed), so a crash names the case that caused it.
"""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))


def estimators():
    """name -> (factory, kind) for every public estimator family and solver (small settings).

    ``kind`` is "reg", "clf", "rank" (FMRanker: fit ignores y) or "ord" (ordinal levels). The
    online estimators are included: they go through the same validators in ``_base``."""
    import fmlearn as F

    return {
        "FMRegressor-mcmc": (lambda: F.FMRegressor(n_factors=2, n_iter=6, random_state=0),
                             "reg"),
        "FMRegressor-als": (lambda: F.FMRegressor(n_factors=2, solver="als", n_iter=4,
                                                  random_state=0), "reg"),
        "FMRegressor-sgd": (lambda: F.FMRegressor(n_factors=2, solver="sgd", n_iter=4,
                                                  random_state=0), "reg"),
        "FMClassifier-mcmc": (lambda: F.FMClassifier(n_factors=2, n_iter=6, random_state=0),
                              "clf"),
        "FMClassifier-sgd": (lambda: F.FMClassifier(n_factors=2, solver="sgd", n_iter=4,
                                                    random_state=0), "clf"),
        "GFMRegressor": (lambda: F.GFMRegressor(n_factors=2, random_state=0), "reg"),
        "GFMRegressor-moment": (lambda: F.GFMRegressor(n_factors=2, solver="moment",
                                                       random_state=0), "reg"),
        "IFMRegressor": (lambda: F.IFMRegressor(n_factors=2, random_state=0), "reg"),
        "SymmetricRankOneSensing": (lambda: F.SymmetricRankOneSensing(n_factors=2,
                                                                      random_state=0), "reg"),
        "PhaseRetrieval": (lambda: F.PhaseRetrieval(random_state=0), "reg"),
        "AsymmetricRankOneSensing": (lambda: F.AsymmetricRankOneSensing(n_factors=2,
                                                                        random_state=0), "reg"),
        "ConvexFMRegressor": (lambda: F.ConvexFMRegressor(max_iter=5), "reg"),
        "ConvexFMClassifier": (lambda: F.ConvexFMClassifier(max_iter=5), "clf"),
        "CCFMRegressor": (lambda: F.CCFMRegressor(trace_bound=3.0, n_iter=2), "reg"),
        "CCFMRegressor-ftrl": (lambda: F.CCFMRegressor(learner="ftrl", n_iter=2), "reg"),
        "CCFMRegressor-ogd": (lambda: F.CCFMRegressor(learner="ogd", n_iter=2), "reg"),
        "CCFMClassifier": (lambda: F.CCFMClassifier(n_iter=2), "clf"),
        "OnlineFMRegressor": (lambda: F.OnlineFMRegressor(n_iter=2), "reg"),
        "OnlineFMClassifier": (lambda: F.OnlineFMClassifier(n_iter=2), "clf"),
        "OnlineFMRegressor-ogd": (lambda: F.OnlineFMRegressor(learner="ogd", n_iter=2), "reg"),
        "OnlineCFMRegressor": (lambda: F.OnlineCFMRegressor(n_iter=2), "reg"),
        "OnlineCFMClassifier": (lambda: F.OnlineCFMClassifier(n_iter=2), "clf"),
        # without row normalisation, so that overflowing rows overflow (a normalised FFM is
        # scale-invariant: tests/ffm)
        "FFMClassifier": (lambda: F.FFMClassifier(n_factors=2, n_iter=4, normalize_rows=False,
                                                  learning_rate=0.05, random_state=0), "clf"),
        "FFMRegressor": (lambda: F.FFMRegressor(n_factors=2, n_iter=20, normalize_rows=False,
                                                learning_rate=0.1, random_state=0), "reg"),
        # the first column is each event's item, the others its context; y is ignored
        "FMRanker": (lambda: F.FMRanker(n_factors=2, n_iter=3, item_columns=[0],
                                        random_state=0), "rank"),
        "FMRanker-squared": (lambda: F.FMRanker(n_factors=2, loss="squared", n_iter=3,
                                                item_columns=[0], random_state=0), "rank"),
        # ordinal labels: the regression target cut into four levels 0..3
        "FMOrdinalRegressor": (lambda: F.FMOrdinalRegressor(n_factors=2, n_iter=6,
                                                            random_state=0), "ord"),
    }


#: The estimators whose fit / partial_fit are failure-atomic through ``_base.failure_atomic``
#: (the online ones keep their own transaction, branch ``online``).
ONLINE = ("CCFM", "OnlineFM", "OnlineCFM")


def is_online(name):
    return name.startswith(ONLINE)


def data(kind, n=240, d=6, seed=0):
    """(X, y) a model of ``kind`` learns from: y = x0 x1 + x2 (+ noise), labels for "clf"."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X[:, 0] * X[:, 1] + X[:, 2] + 0.1 * rng.normal(size=n)
    if kind == "clf":
        y = np.where(y > np.median(y), 1.0, -1.0)
    elif kind == "ord":
        y = np.searchsorted(np.quantile(y, [0.25, 0.5, 0.75]), y).astype(np.float64)
    return X, y


def fitted(name, **kw):
    factory, kind = estimators()[name]
    X, y = data(kind, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return factory().fit(X, y), X, y


# -- malformed sparse input --------------------------------------------------------------------
def malformed(n_rows, d):
    """name -> a sparse matrix of shape (n_rows, d) whose structure or values are invalid.

    SciPy builds most of these without complaint (its constructor checks little) or they are
    edited after construction, as user code can do."""
    good = sp.random(n_rows, d, density=0.5, format="csr", random_state=0)
    good.data[:] = 1.0
    cases = {}

    def csr(data, indices, indptr):
        return sp.csr_matrix((np.asarray(data, float), np.asarray(indices, np.int32),
                              np.asarray(indptr, np.int32)), shape=(n_rows, d))

    nnz = good.nnz
    one = np.zeros(n_rows + 1, np.int32)
    one[1:] = 1
    cases["index_too_large"] = csr([1.0], [10**7], one)
    cases["index_equal_d"] = csr([1.0], [d], one)
    cases["index_negative"] = csr([1.0], [-1], one)
    m = good.copy()
    m.indptr = m.indptr.copy()
    m.indptr[0] = 1
    cases["indptr_not_from_zero"] = m
    m = good.copy()
    m.indptr = m.indptr.copy()
    m.indptr[1] = m.indptr[-1] + 5
    cases["indptr_decreasing"] = m
    m = good.copy()
    m.indptr = m.indptr.copy()
    m.indptr[-1] = nnz + 1000
    cases["indptr_past_the_end"] = m
    m = good.copy()
    m.indptr = m.indptr[:-1].copy()
    cases["indptr_too_short"] = m
    m = good.copy()
    m.data = m.data[:-1].copy()
    cases["data_shorter_than_indices"] = m
    m = good.tocsc()
    m.indices = m.indices.copy()
    m.indices[0] = n_rows + 3
    cases["csc_row_index_too_large"] = m
    m = good.tocoo()
    m.col = m.col.copy()
    m.col[0] = d + 2
    cases["coo_col_too_large"] = m
    m = good.copy()
    m.data = m.data.copy()
    m.data[0] = np.nan
    cases["nan_value"] = m
    m = good.copy()
    m.data = m.data.copy()
    m.data[-1] = -np.inf
    cases["inf_value"] = m
    a = sp.csr_array(good)
    a.indices = a.indices.copy()
    a.indices[0] = 10**6
    cases["csr_array_index_too_large"] = a
    return cases


def _malformed_cases(names):
    """Every malformed case through fit, predict (and partial_fit) of the named estimators."""
    report = {}
    for name in names:
        model, X, y = fitted(name)
        d = X.shape[1]
        factory, _ = estimators()[name]
        for case, bad in malformed(X.shape[0], d).items():
            for method in ("fit", "predict", "partial_fit"):
                key = f"{name}/{case}/{method}"
                print("START", key, flush=True)
                est = factory() if method == "fit" else model
                if not hasattr(est, method):
                    continue
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        if method == "predict":
                            est.predict(bad)
                        else:
                            getattr(est, method)(bad, y)
                    report[key] = "no error"
                except ValueError as exc:
                    report[key] = "ValueError: " + str(exc)
                except Exception as exc:  # noqa: BLE001 - reported to the parent
                    report[key] = f"{type(exc).__name__}: {exc}"
    return report


# -- crafted model files ---------------------------------------------------------------------
#: The families of the mutation suite: one saved model each. Adding a family is one entry.
MUTATION_FAMILIES = [
    "FMRegressor-mcmc", "FMRegressor-als", "FMRegressor-sgd", "FMClassifier-mcmc",
    "FMClassifier-sgd", "GFMRegressor", "GFMRegressor-moment", "IFMRegressor",
    "SymmetricRankOneSensing", "PhaseRetrieval", "AsymmetricRankOneSensing",
    "ConvexFMRegressor", "ConvexFMClassifier", "FFMClassifier", "FFMRegressor",
    # online families: every learner's named state (model format 2)
    "CCFMRegressor", "CCFMRegressor-ftrl", "CCFMRegressor-ogd", "CCFMClassifier",
    "OnlineFMRegressor", "OnlineFMRegressor-ogd", "OnlineFMClassifier",
    "OnlineCFMRegressor", "OnlineCFMClassifier",
    "FMRanker", "FMRanker-squared", "FMOrdinalRegressor",
]

#: Kinds of edit that make a state inconsistent or unusable: each must end in ModelFileError.
MUST_REFUSE = ("shape", "nan", "huge", "index", "counter")


def _array_edits(arr):
    """(kind, label, edited array) for one learned array."""
    out = []
    if arr.ndim and arr.shape[0]:
        out.append(("shape", "drop_last", arr[:-1]))
    out.append(("shape", "add_row", np.concatenate([arr, arr[:1]]) if arr.ndim and arr.shape[0]
                else np.zeros((1,) + arr.shape[1:], arr.dtype)))
    if arr.ndim >= 2:
        out.append(("shape", "flatten", arr.ravel()))
    elif arr.ndim == 1 and arr.size > 1:
        out.append(("shape", "as_row", arr.reshape(1, -1)))
    if arr.size and arr.dtype.kind == "f":
        a = arr.copy()
        a.flat[arr.size // 2] = np.nan
        out.append(("nan", "nan", a))
        out.append(("huge", "times_1e200", arr * 1e200 + np.copysign(1e200, arr)))
    if arr.size and arr.dtype.kind in "iu":
        for label, value in (("minus_one", -1), ("int32_max", np.iinfo(np.int32).max)):
            if value < 0 and arr.dtype.kind == "u":
                continue
            a = arr.copy()
            a.flat[-1] = value
            # a one-element integer array is a counter or a flag (online learners store their
            # scalars so): -1 must be refused, a large count may be legitimate
            kind = "index" if arr.size > 1 or value < 0 else "counter"
            out.append((kind, label, a))
    if arr.dtype.kind in "fiu":
        out.append(("dtype", "as_float32" if arr.dtype != np.float32 else "as_float64",
                    arr.astype(np.float64 if arr.dtype == np.float32 else np.float32)))
    return out


def _scalar_edits(value):
    if isinstance(value, bool):
        return [("flag", "flipped", not value)]
    if isinstance(value, int):
        return [("counter", "minus_one", -1), ("counter", "huge", 10**12),
                ("value", "zero", 0)]
    if isinstance(value, float):
        return [("nan", "nan", float("nan")), ("huge", "inf", float("inf")),
                ("value", "times_1e200", value * 1e200 + 1e200)]
    if isinstance(value, str):
        return [("value", "bogus", "bogus")]
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
        return [("nan", "nan", [float("nan")] * len(value)), ("shape", "drop", value[:-1])]
    return []


def _write_model(meta, members, path):
    import hashlib
    import zipfile

    import fmlearn.io as fio

    for spec in meta["arrays"].values():
        spec["sha256"] = hashlib.sha256(members[spec["file"]]).hexdigest()
    meta["digest"] = fio.manifest_digest(meta)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(fio._META, json.dumps(meta))
        for name, blob in members.items():
            zf.writestr(name, blob)


def mutations(model):
    """(case, kind, edit) for every edit of ``model``'s saved state; ``edit(meta, members)``
    changes the parsed manifest and the member bytes in place (digests are recomputed)."""
    import fmlearn.io as fio

    arrays, attributes = fio._split_state(model)
    cases = []
    for name, arr in sorted(arrays.items()):
        for kind, label, new in _array_edits(arr):
            def edit(meta, members, name=name, new=new):
                spec = meta["arrays"][name]
                members[spec["file"]] = fio._npy_bytes(new)
                spec["shape"] = list(new.shape)
                spec["dtype"] = new.dtype.str
            cases.append((f"{name}:{label}", kind, edit))
    for name, value in sorted(attributes.items()):
        for kind, label, new in _scalar_edits(value):
            def edit(meta, members, name=name, new=new):
                meta["attributes"][name] = new
            cases.append((f"{name}:{label}", kind, edit))
    return cases


def _use(loaded, X, y):
    """What a user does next with a loaded model: predict on every feature, learn more."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = loaded.predict(X)
        if hasattr(loaded, "decision_function"):
            out = loaded.decision_function(X)
        if not np.all(np.isfinite(np.asarray(out, dtype=np.float64))):
            return "non-finite prediction"
        if hasattr(loaded, "partial_fit"):
            try:
                loaded.partial_fit(X, y)
            except (ValueError, FloatingPointError) as exc:
                return f"partial_fit refused: {type(exc).__name__}"
    return "usable"


def _mutation_cases(names):
    import tempfile
    import zipfile

    import fmlearn
    import fmlearn.io as fio
    from fmlearn.exceptions import ModelFileError

    report = {}
    folder = tempfile.mkdtemp()
    for name in names:
        model, X, y = fitted(name, n=240)
        blob_path = os.path.join(folder, "model.fmz")
        model.save(blob_path)
        with zipfile.ZipFile(blob_path) as zf:
            original = {n: zf.read(n) for n in zf.namelist()}
        for case, kind, edit in mutations(model):
            key = f"{name}/{case}"
            print("START", key, flush=True)
            members = dict(original)
            meta = json.loads(members.pop(fio._META))
            edit(meta, members)
            path = os.path.join(folder, "edited.fmz")
            _write_model(meta, members, path)
            try:
                loaded = fmlearn.load(path)
            except ModelFileError as exc:
                report[key] = [kind, "refused", str(exc)[-160:]]
                continue
            except Exception as exc:  # noqa: BLE001 - reported to the parent
                report[key] = [kind, "wrong error", f"{type(exc).__name__}: {exc}"]
                continue
            try:
                report[key] = [kind, "loaded", _use(loaded, X, y)]
            except Exception as exc:  # noqa: BLE001
                report[key] = [kind, "loaded", f"then {type(exc).__name__}: {exc}"]
    return report


CASESETS = {"malformed": _malformed_cases, "mutation": _mutation_cases}


def run_in_child(caseset, names, timeout=900):
    """Run ``CASESETS[caseset](names)`` in a child Python; return its report (dict).

    Fails (AssertionError naming the case being played) if the child died."""
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "hardening.py"), caseset, *names],
        capture_output=True, text=True, timeout=timeout)
    started = [line[6:] for line in proc.stdout.splitlines() if line.startswith("START ")]
    last = started[-1] if started else None
    assert proc.returncode == 0, (
        f"child exited with {proc.returncode} during {last!r}: {proc.stderr[-2000:]}")
    tail = proc.stdout.splitlines()[-1]
    return json.loads(tail)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    result = CASESETS[sys.argv[1]](sys.argv[2:])
    print(json.dumps(result), flush=True)
