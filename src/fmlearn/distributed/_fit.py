"""The entry point :func:`fmlearn.distributed.fit`: relational fits (``relation_blocks``) go
to :mod:`fmlearn.distributed._fm_relation`, every other fit to
:func:`fmlearn.distributed._fm.fit` (which dispatches the convex FM and SGD itself). The
dispatch lives here, above both modules, because ``_fm_relation`` builds on ``_fm``."""

import functools

from . import _fm

__all__ = ["fit"]


@functools.wraps(_fm.fit)
def fit(estimator, X, y=None, sample_weight=None, *, client=None, checkpoint=None,
        checkpoint_every=10, relation_blocks=None, rounds="workers"):
    if relation_blocks is not None:
        if checkpoint is not None:
            raise ValueError("checkpoints are not offered with relation_blocks")
        from ._fm_relation import fit_relation

        return fit_relation(estimator, X, y, sample_weight, relation_blocks, client)
    return _fm.fit(estimator, X, y, sample_weight, client=client, checkpoint=checkpoint,
                   checkpoint_every=checkpoint_every, rounds=rounds)
