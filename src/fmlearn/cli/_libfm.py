"""libFM command-line compatibility: rewrite libFM's single-dash flags into ``fmlearn fit``'s.

libFM 1.4 takes ``-name value`` pairs (``-task r -method mcmc -dim 1,1,8 -iter 100 -train F
-test F -out F ...``). Each supported flag maps to one native option (see docs/cli.md); flags
whose meaning fmlearn cannot honour are refused with a message saying why, never ignored.
"""

from ._common import CLIError, note

# libFM flag -> native option (flags that need a value check are handled in ``translate``).
_DIRECT = {
    "-task": "--task",
    "-train": "--train",
    "-test": "--test",
    "-out": "--out",
    "-iter": "--n-iter",
    "-init_stdev": "--init-stdev",
    "-regular": "--reg",
    "-learn_rate": "--learning-rate",
    "-seed": "--seed",
    "-save_model": "--save",
    "-rlog": "--log",
    "-meta": "--groups",
    "-relation": "--relation",
}

_UNSUPPORTED = {
    "-validation": "is only used by libFM's adaptive SGD (sgda), which is not implemented",
    "-load_model": "libFM's text model files cannot be read; fmlearn models (.fmz) are loaded "
                   "by 'fmlearn predict'",
}

#: libFM 1.4's default of ``-init_stdev``, kept in libFM-flag mode.
LIBFM_INIT_STDEV = "0.1"

_METHODS = {"mcmc": "mcmc", "als": "als", "sgd": "sgd"}

#: Every libFM flag this module knows; a first argument among them selects libFM mode.
LIBFM_FLAGS = frozenset(_DIRECT) | frozenset(_UNSUPPORTED) | {
    "-method", "-dim", "-verbosity", "-cache_size", "-help"}


def is_libfm_style(argv):
    """True when ``argv`` (after the subcommand) starts with a libFM flag."""
    return bool(argv) and argv[0] in LIBFM_FLAGS


def _value(argv, i, flag):
    if i + 1 >= len(argv):
        raise CLIError(f"libFM option {flag} needs a value")
    return argv[i + 1]


def parse_dim(text):
    """libFM's ``-dim k0,k1,k2`` -> k2; k0 (bias) and k1 (linear terms) must be 1."""
    parts = text.split(",")
    try:
        k0, k1, k2 = (int(p) for p in parts)
    except ValueError:
        raise CLIError(
            f"-dim expects three integers 'k0,k1,k2' (e.g. 1,1,8), got {text!r}") from None
    if k0 not in (0, 1) or k1 not in (0, 1) or k2 < 0:
        raise CLIError(f"-dim {text}: k0 and k1 must be 0 or 1 and k2 a rank >= 0")
    if k0 == 0 or k1 == 0:
        off = " and ".join(n for n, k in (("the global bias", k0), ("the linear terms", k1))
                           if k == 0)
        raise CLIError(
            f"-dim {text} asks to switch off {off}; fmlearn's FMs always learn the bias and "
            f"the linear terms (use -dim 1,1,{k2})")
    return k2


def translate(argv):
    """Rewrite libFM flags in ``argv`` into native ``fit`` options; other tokens pass through.

    Returns the new argument list. With ``-task c`` and ``-out``, predictions are written as
    probabilities of the positive class, as libFM does.
    """
    out = []
    task = None
    has_out = False
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "-help":
            out.append("--help")
            i += 1
            continue
        if tok in _UNSUPPORTED:
            raise CLIError(f"libFM option {tok} is not supported: {_UNSUPPORTED[tok]}")
        if tok in _DIRECT:
            val = _value(argv, i, tok)
            if tok == "-task":
                task = val
            if tok == "-out":
                has_out = True
            out += [_DIRECT[tok], val]
        elif tok == "-method":
            val = _value(argv, i, tok)
            if val == "sgda":
                raise CLIError("libFM method sgda (SGD with adaptive regularization) is not "
                               "supported; use -method sgd with -regular, or -method mcmc")
            if val not in _METHODS:
                raise CLIError(f"unknown libFM method {val!r} (choose mcmc, als or sgd)")
            out += ["--solver", _METHODS[val]]
        elif tok == "-dim":
            out += ["--n-factors", str(parse_dim(_value(argv, i, tok)))]
        elif tok == "-verbosity":
            val = _value(argv, i, tok)
            try:
                level = int(val)
            except ValueError:
                raise CLIError(f"-verbosity expects an integer, got {val!r}") from None
            if level > 0:
                out.append("--verbose")
        elif tok == "-cache_size":
            _value(argv, i, tok)
            note("-cache_size ignored: fmlearn keeps the data in memory")
        else:
            out.append(tok)
            i += 1
            continue
        i += 2
    if task == "c" and has_out:
        out.append("--proba")
    if not any(a in ("-init_stdev", "--init-stdev") or a.startswith("--init-stdev=")
               for a in argv):
        # libFM's own default (libfm.cpp: "init_stdev ... default=0.1"): a libFM command line
        # gives libFM's start; native fmlearn fit uses the estimators' "auto"
        out += ["--init-stdev", LIBFM_INIT_STDEV]
    out.append("--libfm-output")
    return out
