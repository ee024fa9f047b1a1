"""The cost and the choice of ``trace_bound="auto"``'s scan (fmlearn.online._trace, "The cost
of the scan"): on wide sparse rows the saturated projections of a candidate bound are refused
after a bounded number, and bounds that would repeat the unprojected run are not run
(counters, never a timer); wherever no candidate is refused the scan picks the bound of a
one-pass oracle (every candidate run from scratch over the sample, largest first, stop at the
first rise), with the completed candidates' losses bit for bit the oracle's."""

import numpy as np
import pytest
from test_online_defaults import classification, regression, sparse_text

from fmlearn import CCFMClassifier, CCFMRegressor, OnlineCFMClassifier, OnlineCFMRegressor
from fmlearn._threads import blas_single_thread
from fmlearn.kernels.losses import loss_value_np
from fmlearn.online import _trace


def one_pass_losses(est, X, y, sw):
    """(bound, weighted prequential loss or None when diverged) of every candidate, each run
    from scratch in one call over the sample rows, largest bound first."""
    full = _trace.sample_rows(X.shape[0])
    rows = est._scan_rows(X.shape[0])
    rows = rows[np.random.RandomState(0).permutation(rows.shape[0])]
    Xs, ys, ws = X[rows], y[rows], sw[rows]
    csr = est._rows(Xs)
    order = np.arange(rows.shape[0], dtype=np.int64)
    classifier = est._is_classifier()
    off = None
    if est._intercept_outside():
        off, _ = _trace.running_intercepts(ys, ws, order, [0.0, 0.0], classifier)
    scored = order[rows.shape[0] // 4:]
    loss = "logistic" if classifier else "squared"
    out = []
    for cand in _trace.auto_candidates(y[full], sw[full], classifier, est._augment)[::-1]:
        est.trace_bound_ = cand
        learner = est._new_learner(X.shape[1], None)
        pred = np.zeros(rows.shape[0])
        with blas_single_thread():
            status, _, info = learner.learn(csr, ys, ws, order, pred, est._limit(ys), off)
        value = float(np.dot(ws[scored], loss_value_np(loss, pred[scored], ys[scored])))
        out.append((cand, value if status == 0 else None,
                    info.get("saturated_projections", 0)))
    return out


def first_rise_choice(losses):
    best, best_loss = None, np.inf
    for cand, value, _ in losses:
        if value is None:
            continue
        if value <= best_loss:
            best, best_loss = cand, value
        else:
            break
    return best


@pytest.fixture
def scans(monkeypatch):
    """The _Scan objects of the fits in the test, and the one-pass oracle's losses."""
    made, oracle = [], []

    class Spy(_trace._Scan):
        def __init__(self, est, *args):
            super().__init__(est, *args)
            made.append(self)

    select = _trace.TraceBounded._select_trace_bound

    def spy_select(est, X, y, sw):
        chosen = select(est, X, y, sw)
        if oracle is not None and getattr(est, "_oracle", False):
            oracle.append(one_pass_losses(est, X, y, sw))
        return chosen

    monkeypatch.setattr(_trace, "_Scan", Spy)
    monkeypatch.setattr(_trace.TraceBounded, "_select_trace_bound", spy_select)
    return made, oracle


def test_scan_work_is_bounded_on_wide_sparse_rows(scans):
    """Wide sparse text (1,500 columns, 600 rows), CCFMClassifier("ftrl") with its defaults:
    one full candidate run; the bounds under which it never projected are not run; the next
    smaller bound, whose projections saturate the tracked subspace (the one-pass oracle saturates
    in hundreds of rounds), is refused after at most AUTO_COSTLY_ROUNDS plus one chunk's rows of
    them; the bound is the oracle's, since the refused candidate's loss also rose."""
    made, oracle = scans
    X, y = sparse_text(n=600, d=1500, nnz=30, pos_rate=0.3)
    est = CCFMClassifier(learner="ftrl", random_state=0)
    est._oracle = True
    est.fit(X, y)
    (scan,) = made
    outcomes = [r[1] for r in scan.record]
    assert outcomes.count("run") == 1, scan.record
    assert "same" in outcomes and outcomes[-1] == "costly", scan.record
    n = scan.y.shape[0]
    chunk = max(1, n // _trace.CHUNK_DIVISOR)
    saturated = sum(r[3] for r in scan.record)
    assert saturated <= _trace.AUTO_COSTLY_ROUNDS + chunk, scan.record
    # rounds learned: one full run plus the refused candidate's rows
    assert sum(r[2] for r in scan.record) < 2 * n, scan.record
    # the oracle (the previous scan's runs) saturates far more and chooses the same bound
    losses = oracle[0]
    refused = scan.record[-1][0]
    assert dict((c, s) for c, _, s in losses)[refused] > 4 * (_trace.AUTO_COSTLY_ROUNDS + chunk)
    assert est.trace_bound_ == first_rise_choice(losses)


def test_psd_scan_skips_bounds_that_repeat_the_unprojected_run(scans):
    """OnlineCFMClassifier() (CFM-FTRL, the PSD trace simplex) on wide sparse text: the
    largest candidate's projections never threshold (tau = 0 while the positive eigenvalues of
    -eta_t S_t sum to at most eta_t b_t), so the bounds above that are not run ("same"), with
    the one-pass oracle's loss bit for bit and its choice."""
    made, oracle = scans
    X, y = sparse_text(n=400, d=600, nnz=20, pos_rate=0.3)
    est = OnlineCFMClassifier(random_state=0)
    est._oracle = True
    est.fit(X, y)
    (scan,) = made
    outcomes = [r[1] for r in scan.record]
    assert outcomes.count("same") >= 2, scan.record
    losses = oracle[0]
    assert est.trace_bound_ == first_rise_choice(losses)
    by_bound = {c: v for c, v, _ in losses}
    for cand, outcome, _, _, value in scan.record:
        if outcome in ("run", "same"):
            assert value == by_bound[cand], (cand, value, by_bound[cand])


@pytest.mark.parametrize("case", ["text-ftrl", "dense-ogd", "dense-reg-ocg", "cfm-reg"])
def test_scan_picks_the_one_pass_oracles_bound(scans, case):
    """Small cases where the one-pass runs are cheap: the chosen bound is the oracle's
    first-rise choice, and every candidate the scan ran to the end (or skipped as the
    unprojected run's twin) has the oracle's loss exactly."""
    made, oracle = scans
    if case == "text-ftrl":
        X, y = sparse_text(n=400, d=600, nnz=20, pos_rate=0.3)
        est = CCFMClassifier(learner="ftrl", random_state=0)
    elif case == "dense-ogd":
        X, y = classification(0.3, 1.0)
        X, y = X[:800], y[:800]
        est = CCFMClassifier(learner="ogd", random_state=0)
    elif case == "dense-reg-ocg":
        X, y = regression(1.0, 1.0)
        X, y = X[:800], y[:800]
        est = CCFMRegressor(learner="ocg", random_state=0)
    else:
        X, y = regression(1.0, 1.0)
        X, y = X[:800], y[:800]
        est = OnlineCFMRegressor(random_state=0)
    est._oracle = True
    est.fit(X, y)
    losses = oracle[0]
    assert est.trace_bound_ == first_rise_choice(losses)
    by_bound = {c: v for c, v, _ in losses}
    done = [r for r in made[0].record if r[1] in ("run", "same")]
    assert done
    for cand, _, _, _, value in done:
        assert value == by_bound[cand], (cand, value, by_bound[cand])


def test_occfm_scan_runs_half_the_rows_and_picks_the_full_scans_bound(scans, monkeypatch):
    """OCCFM (the default learner of CCFM) shares no work between candidates (its path depends
    on the bound from the first row): its candidates run on half the first batch's rows, spread
    evenly (``_scan_rows``; its floor of 2,000 rows lowered to 0 for this small set), so the
    scan learns at most about half the rounds of the scan on the whole sample, with the same
    candidates (delta0 from the whole sample's targets) and here the same chosen bound; the
    one-pass oracle on those rows agrees with it. Under the floor the scan is the previous."""
    made, oracle = scans
    X, y = regression(1.0, 1.0)
    X, y = X[:800], y[:800]
    make = lambda: CCFMRegressor(random_state=0)  # noqa: E731
    plain = make().fit(X, y)
    assert made[0].y.shape[0] == X.shape[0]  # 800 rows: under the floor, every row
    monkeypatch.setattr(_trace, "AUTO_OCG_MIN_ROWS", 0)
    est = make()
    est._oracle = True
    est.fit(X, y)
    assert est.learner == "ocg"
    half = made[1]
    assert half.y.shape[0] == X.shape[0] // 2
    assert est.trace_bound_ == first_rise_choice(oracle[0])
    full = made[0]
    assert plain.trace_bound_ == est.trace_bound_
    # the same candidates, in the same order, each on half the rows
    assert [r[0] for r in half.record] == [r[0] for r in full.record][:len(half.record)]
    rounds_half = sum(r[2] for r in half.record)
    rounds_full = sum(r[2] for r in full.record)
    assert rounds_half <= 0.6 * rounds_full, (half.record, full.record)
