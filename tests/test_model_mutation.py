"""Crafted model files (issue 10, deliverable 3): edits of a saved state with recomputed digests
never crash ``fmlearn.load`` or what a user does next with the model.

For every estimator family a model is saved, then each learned array is edited (one row
dropped or added, flattened, a NaN, values times 1e200, an index set to -1 or to INT32_MAX,
another float dtype) and each learned scalar (counters to -1 or 10**12, NaN, infinity,
strings), the digests are recomputed so that only the state checks can catch the edit, and
the file is loaded; a file that loads is used: a prediction on every feature and, where the
model has one, a ``partial_fit``. The cases run in child processes (tests/hardening.py), so a
crash is a test failure that names the case: one child for the batch families and one for the
online ones (a child's import and kernel-cache load cost about as much as its cases).
"""

import collections

import pytest

from hardening import MUTATION_FAMILIES, is_online, run_in_child

BATCH = [f for f in MUTATION_FAMILIES if not is_online(f)]
ONLINE = [f for f in MUTATION_FAMILIES if is_online(f)]
GROUPS = [BATCH[i::3] for i in range(3)]

# Edits that always make the state inconsistent: each must be refused at load.
MUST_REFUSE = ("shape", "nan", "index")


def _check(report):
    wrong = {k: v for k, v in report.items() if v[1] == "wrong error"}
    assert not wrong, wrong
    for key, (kind, outcome, detail) in report.items():
        if kind in MUST_REFUSE:
            assert outcome == "refused", (key, detail)
        elif outcome == "loaded":
            # an edit that leaves a consistent state (a counter, a larger weight) may load,
            # but the model must then predict finite values and learn or refuse cleanly
            assert detail == "usable" or detail.startswith("partial_fit refused"), (key, detail)


def _of(report, families):
    """The part of ``report`` (keys "family/case") about ``families``."""
    return {k: v for k, v in report.items() if k.split("/", 1)[0] in families}


@pytest.fixture(scope="module")
def batch_report():
    return run_in_child("mutation", BATCH)


@pytest.fixture(scope="module")
def online_report():
    return run_in_child("mutation", ONLINE)


@pytest.mark.parametrize("group", GROUPS, ids=[f"batch{i}" for i in range(len(GROUPS))])
def test_crafted_batch_models_are_refused_or_usable_never_a_crash(batch_report, group):
    report = _of(batch_report, group)
    assert {k.split("/", 1)[0] for k in report} == set(group)
    _check(report)
    kinds = collections.Counter(v[0] for v in report.values())
    assert kinds["shape"] and kinds["nan"], kinds
    refused = sum(v[1] == "refused" for v in report.values())
    assert refused >= 0.6 * len(report)


def test_the_batch_suite_has_at_least_200_files():
    from hardening import fitted, mutations

    total = sum(len(mutations(fitted(name, n=60)[0])) for name in BATCH)
    assert total >= 200, total


@pytest.mark.parametrize("family", ONLINE)
def test_crafted_online_models_are_refused_or_usable_never_a_crash(online_report, family):
    report = _of(online_report, [family])
    assert report
    _check(report)
