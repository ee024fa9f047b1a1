"""Renamed parameters, accepted for one minor release with a ``FutureWarning``.

fmlearn 0.2 gave every concept one name across the estimators (docs/parameters.md). Code
written for 0.1 keeps working until 0.3: an old keyword is translated to its new name, its
value passed through unchanged, with a ``FutureWarning`` that names the replacement.

* Estimators declare ``_renamed_params = {old: new}`` (or ``{old: Renamed(new, learners)}``
  when the old parameter acted only for some learners: elsewhere it was ignored, and it is
  dropped with the warning saying so). :meth:`fmlearn._base.BaseFM.__init_subclass__` wraps
  such a class's ``__init__`` with :func:`accept_renamed_init`; the wrapper keeps the new
  signature (``inspect.signature`` follows ``__wrapped__``), so ``get_params`` lists only
  the new names and ``sklearn.base.clone`` passes only those. ``set_params`` translates too
  (:func:`translate`), so a parameter grid written with the old names still works.
* Functions take the :func:`renamed_kwargs` decorator; the command line the
  :class:`RenamedFlag` action (an old flag, hidden from ``--help``).

Passing an old name together with its new one is a ``TypeError`` (which one was meant?).
"""

import argparse
import functools
import inspect
import warnings
from typing import NamedTuple

__all__ = ["Renamed", "RenamedFlag", "accept_renamed_init", "renamed_kwargs", "translate",
           "REMOVED_IN"]

#: The release that removes the old names.
REMOVED_IN = "0.3"


class Renamed(NamedTuple):
    """``new``: the new name; ``learners``: the values of ``learner`` for which the old
    parameter had an effect (None: all of them)."""

    new: str
    learners: frozenset = None


def _spec(value):
    return value if isinstance(value, Renamed) else Renamed(value)


def translate(owner, table, kwargs, explicit=(), learner=None, stacklevel=3):
    """``kwargs`` with the old names of ``table`` replaced by the new ones (a new dict).

    ``explicit``: names the caller also gave (positionally or by keyword); an old name whose
    new name is among them raises ``TypeError``. ``learner``: the value of the estimator's
    ``learner`` parameter, for entries that acted only for some learners.
    """
    given = set(explicit) | {k for k in kwargs if k not in table}
    out, mapped = {}, {}
    for key, value in kwargs.items():
        if key not in table:
            out[key] = value
            continue
        spec = _spec(table[key])
        if spec.learners is not None and learner not in spec.learners:
            warnings.warn(
                f"{owner}: {key!r} was renamed {spec.new!r} in fmlearn 0.2 and the old name "
                f"will be removed in {REMOVED_IN}; {key!r} has no effect with "
                f"learner={learner!r} (it acted only for {sorted(spec.learners)}) and is "
                "ignored, as before", FutureWarning, stacklevel=stacklevel)
            continue
        if spec.new in given:
            raise TypeError(f"{owner} got both {key!r} and {spec.new!r}; {key!r} is the old "
                            f"name of {spec.new!r}: pass only {spec.new!r}")
        if spec.new in mapped:
            raise TypeError(f"{owner} got both {mapped[spec.new]!r} and {key!r}, two old names "
                            f"of {spec.new!r}: pass only {spec.new!r}")
        warnings.warn(
            f"{owner}: the parameter {key!r} was renamed {spec.new!r} in fmlearn 0.2; the old "
            f"name will be removed in {REMOVED_IN}. Use {spec.new}={value!r}",
            FutureWarning, stacklevel=stacklevel)
        mapped[spec.new] = key
        out[spec.new] = value
    return out


def accept_renamed_init(cls, init):
    """``init`` (a class's ``__init__``) also taking the old names of
    ``cls._renamed_params`` as keywords."""
    sig = inspect.signature(init)
    has_learner = "learner" in sig.parameters

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        table = type(self)._renamed_params
        if not any(k in table for k in kwargs):
            return init(self, *args, **kwargs)
        rest = {k: v for k, v in kwargs.items() if k not in table}
        try:
            bound = sig.bind_partial(self, *args, **rest)
        except TypeError:  # let the plain call raise Python's own message
            return init(self, *args, **kwargs)
        learner = None
        if has_learner:
            learner = bound.arguments.get("learner", sig.parameters["learner"].default)
        new = translate(f"{type(self).__name__}()", table, kwargs,
                        explicit=[k for k in bound.arguments if k != "self"],
                        learner=learner, stacklevel=3)
        return init(self, *args, **new)

    __init__._renamed_wrapper = True
    return __init__


def renamed_kwargs(**table):
    """Decorator of a function whose keyword ``old`` is now ``new`` (``old="new"``)."""

    def decorate(func):
        sig = inspect.signature(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if any(k in table for k in kwargs):
                rest = {k: v for k, v in kwargs.items() if k not in table}
                try:
                    explicit = sig.bind_partial(*args, **rest).arguments
                except TypeError:
                    return func(*args, **kwargs)
                kwargs = translate(f"{func.__name__}()", table, kwargs, explicit=explicit,
                                   stacklevel=3)
            return func(*args, **kwargs)

        return wrapper

    return decorate


class RenamedFlag(argparse.Action):
    """argparse action of an old flag: stores into the new flag's destination with a
    ``FutureWarning`` naming the new flag (``new_flag=``). Give it ``help=argparse.SUPPRESS``."""

    def __init__(self, option_strings, dest, new_flag=None, **kwargs):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        warnings.warn(f"{option_string} was renamed {self.new_flag} in fmlearn 0.2; the old "
                      f"flag will be removed in {REMOVED_IN}", FutureWarning, stacklevel=2)
        setattr(namespace, self.dest, values)
