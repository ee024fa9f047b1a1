"""fmlearn._memory: the huge-page switch around fits."""

import threading

import numpy as np
import pytest

from fmlearn import FMRegressor
from fmlearn._memory import _SET, small_pages

pytestmark = pytest.mark.skipif(_SET is None, reason="this NumPy has no huge-page switch")


def _advice():
    previous = _SET(False)  # read the flag by setting it, then put it back
    _SET(previous)
    return bool(previous)


@pytest.fixture(autouse=True)
def _keep_numpys_advice():
    initial = _advice() if _SET is not None else None
    yield
    if _SET is not None:
        _SET(initial)


@pytest.mark.parametrize("start", [True, False])
def test_small_pages_restores_the_previous_advice(start):
    _SET(start)
    with small_pages():
        assert _advice() is False
        with small_pages():  # nested: still off, restored only by the outer block
            assert _advice() is False
        assert _advice() is False
    assert _advice() is start
    with pytest.raises(ZeroDivisionError):
        with small_pages():
            raise ZeroDivisionError("inside the block")
    assert _advice() is start


def test_small_pages_concurrent_blocks_restore_once():
    _SET(True)
    inside = threading.Barrier(2)
    seen = []

    def work():
        with small_pages():
            inside.wait()
            seen.append(_advice())
            inside.wait()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [False, False] and _advice() is True


def test_fit_leaves_the_advice_as_it_found_it():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 4)), rng.normal(size=50)
    for start in (True, False):
        _SET(start)
        FMRegressor(2, solver="als", n_iter=2, random_state=0).fit(X, y)
        assert _advice() is start
        with pytest.raises(ValueError):
            FMRegressor(2, solver="als", n_iter=2).fit(X, y[:10])
        assert _advice() is start


def test_arrays_for_sweeps_keep_the_outside_advice(monkeypatch):
    # empty_for_sweeps inside small_pages: allocated with the advice of outside the block,
    # which stays off for the block's other allocations
    import fmlearn._memory as memory
    from fmlearn._memory import empty_for_sweeps

    seen = []

    def spy(value):
        seen.append(bool(value))
        return _SET(value)

    for start in (True, False):
        _SET(start)
        with small_pages():
            seen.clear()
            monkeypatch.setattr(memory, "_SET", spy)
            a = empty_for_sweeps((10, 3), np.float64)
            monkeypatch.setattr(memory, "_SET", _SET)
            assert a.shape == (10, 3) and a.dtype == np.float64
            assert seen == [start, False] and _advice() is False
        assert _advice() is start
    assert empty_for_sweeps(4, np.int32).shape == (4,)  # outside any block
