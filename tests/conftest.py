"""Fixtures shared by several test modules."""

import pytest


@pytest.fixture(scope="session")
def two_process_cluster():
    """One LocalCluster of 2 single-threaded worker processes for the session: starting one,
    and its workers' import of fmlearn and loads of the compiled kernels, cost more than most
    of the tests that need one. A test that kills a worker waits until the nanny has replaced
    it (``client.wait_for_workers(2)``), so the next module finds two workers."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(two_process_cluster):
    """A client of the session's cluster, alive for one module only (a live client is Dask's
    default scheduler: the other modules must not compute on it by accident)."""
    import distributed

    with distributed.Client(two_process_cluster) as c:
        yield c
