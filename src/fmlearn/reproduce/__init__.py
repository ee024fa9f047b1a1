"""Paper reproductions, run by ``fmlearn reproduce NAME``.

Each experiment is a module of this package exposing ``run(out_dir, quick=False)``: it builds its
data, fits the models, prints a table of results and writes its figure(s) as PNG into
``out_dir`` (which exists when ``run`` is called). ``quick=True`` is a smaller version of the
same experiment for smoke tests, with the same outputs. ``run`` may return a dict of results.

To add an experiment, write ``fmlearn/reproduce/<module>.py`` and add one line to
:data:`REGISTRY`::

    "gfm-synthetic": Experiment("fmlearn.reproduce.gfm_synthetic",
                                "Lin and Ye 2016, Fig. 2: one-pass gFM recovery on Gaussian data"),

Modules are imported only when their experiment runs, so ``fmlearn reproduce --list`` stays
fast and one broken or heavy module never affects the others. Besides the registry, this module
offers the small helpers experiments share: :func:`format_table`, :func:`pyplot` and
:func:`optional_pyplot`. Figures are optional outputs: an experiment prints (and saves) its
results first and draws with :func:`optional_pyplot`, so that a missing matplotlib costs a
warning and the PNG, never the results.
"""

import difflib
import importlib
import os
import warnings
from dataclasses import dataclass

__all__ = ["Experiment", "REGISTRY", "names", "get", "load_runner", "run", "format_table",
           "pyplot", "optional_pyplot", "save_figure"]


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: the module that implements it and a one-line summary."""

    module: str
    summary: str


#: name -> Experiment, one line per paper experiment (kept sorted by name).
REGISTRY = {
    "cfm-movielens": Experiment("fmlearn.reproduce.cfm_movielens",
                                "Yamada et al. 2017, Table 2 / Fig. 2: convex FM on "
                                "MovieLens-100K"),
    "cfm-synthetic": Experiment("fmlearn.reproduce.cfm_synthetic",
                                "Yamada et al. 2017, Fig. 1: convex FM vs FM-ALS/MCMC on "
                                "§4.1 data"),
    "gfm-convergence": Experiment(
        "fmlearn.reproduce.gfm_convergence",
        "Lin and Ye 2016: one-pass gFM error vs mini-batch for n = c k d, noise, d = 1000"),
    "ifm-vs-fm": Experiment(
        "fmlearn.reproduce.ifm_vs_fm",
        "Lin et al. 2019, Fig. 1: test RMSE of iFM vs classic FM on FM, sign-flipped, mixed "
        "labels"),
    "occfm": Experiment(
        "fmlearn.reproduce.occfm",
        "Zhang et al. 2018, Tables 3-4, Fig. 1-2: OCCFM vs FM/CFM/CCFM online baselines"),
    "vtec": Experiment(
        "fmlearn.reproduce.vtec",
        "Lin et al. 2019, §4.2 Table 1: online vTEC from GNSS double differences (simulated; "
        "--rinex DIR: real RINEX files)"),
}


def names():
    """Sorted names of the registered experiments."""
    return sorted(REGISTRY)


def get(name):
    """The :class:`Experiment` registered as ``name``; ``KeyError`` with suggestions if none."""
    try:
        return REGISTRY[name]
    except KeyError:
        pass
    known = names()
    if not known:
        raise KeyError(f"unknown experiment {name!r}: no experiments are registered")
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise KeyError(f"unknown experiment {name!r} (known: {', '.join(known)}){hint}")


def load_runner(name):
    """Import the module of experiment ``name`` and return its ``run`` function."""
    exp = get(name)
    module = importlib.import_module(exp.module)
    runner = getattr(module, "run", None)
    if not callable(runner):
        raise TypeError(f"experiment {name!r}: module {exp.module} has no run(out_dir, quick)")
    return runner


def run(name, out_dir, quick=False):
    """Run experiment ``name``, writing its outputs into ``out_dir`` (created if needed)."""
    runner = load_runner(name)
    os.makedirs(out_dir, exist_ok=True)
    return runner(out_dir, quick=quick)


def _cell(value, floatfmt):
    if isinstance(value, float):
        return format(value, floatfmt)
    return str(value)


def format_table(rows, headers, floatfmt=".4f"):
    """Plain-text table: one header line, a rule, then one line per row.

    Floats are formatted with ``floatfmt``; numbers are right-aligned, text left-aligned.

    Examples
    --------
    >>> print(format_table([["als", 0.91234, 2], ["mcmc", 0.9, 10]], ["solver", "rmse", "s"]))
    solver    rmse   s
    ------  ------  --
    als     0.9123   2
    mcmc    0.9000  10
    """
    cells = [[_cell(v, floatfmt) for v in row] for row in rows]
    numeric = [all(isinstance(row[j], (int, float)) and not isinstance(row[j], bool)
                   for row in rows) and bool(rows) for j in range(len(headers))]
    widths = [max([len(h)] + [len(r[j]) for r in cells]) for j, h in enumerate(headers)]

    def line(values):
        parts = [v.rjust(w) if num else v.ljust(w)
                 for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    out = [line(list(headers)), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (figures go to files only).

    Raises ``ImportError`` naming the extra to install when matplotlib is missing.
    """
    try:
        import matplotlib
    except ImportError:
        raise ImportError("figures need matplotlib: pip install 'fmlearn[plot]'") from None
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def optional_pyplot(filename):
    """:func:`pyplot`, or ``None`` with a warning naming ``filename`` (the figure that will not
    be written) when matplotlib is missing. Experiments call it after their results are out."""
    try:
        return pyplot()
    except ImportError as exc:
        warnings.warn(f"{filename} not written: {exc}", stacklevel=2)
        return None


def save_figure(fig, out_dir, filename):
    """Save ``fig`` as ``out_dir/filename`` (PNG), close it and return the path."""
    path = os.path.join(out_dir, filename)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    pyplot().close(fig)
    return path
