"""LIBFFM command-line compatibility: rewrite ``ffm-train`` / ``ffm-predict`` flags into
``fmlearn fit --model ffm`` / ``fmlearn predict`` options.

LIBFFM (Juan et al. 2016) takes ``ffm-train [options] training_set_file [model_file]`` with
``-l -k -t -r -s -p --quiet --no-norm --auto-stop``, and ``ffm-predict test_file model_file
output_file``. Each flag maps to one native option (see docs/cli.md); ``fmlearn fit --model
ffm`` accepts them mixed with native options, and ``fmlearn ffm-train ...`` /
``fmlearn ffm-predict ...`` take LIBFFM's command lines as they are.
"""

from ._common import CLIError

# LIBFFM flag -> native option
_VALUED = {
    "-k": "--n-factors",
    "-t": "--n-iter",
    "-r": "--learning-rate",
    "-l": "--reg",
    "-s": "--n-jobs",
    "-p": "--test",
}
_SWITCHES = {"--auto-stop": "--auto-stop", "--no-norm": "--no-norm", "--quiet": "--quiet"}

#: Every LIBFFM flag this module knows.
LIBFFM_FLAGS = frozenset(_VALUED) | frozenset(_SWITCHES)


def _lambda(text):
    """LIBFFM's ``-l lambda`` (L2 of the latent vectors) -> ``--reg 0,lambda,lambda``: the
    bias free, fmlearn's linear terms (which LIBFFM does not have) as the factors."""
    try:
        value = float(text)
    except ValueError:
        raise CLIError(f"-l expects a number (the regularization), got {text!r}") from None
    if not value >= 0:
        raise CLIError(f"-l: regularization must be >= 0, got {text!r}")
    return f"0,{value!r},{value!r}"


def translate_flags(argv):
    """Rewrite LIBFFM's flags in ``argv`` (other tokens pass through); returns the new list."""
    out = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok in _VALUED:
            if i + 1 >= len(argv):
                raise CLIError(f"LIBFFM option {tok} needs a value")
            val = argv[i + 1]
            out += [_VALUED[tok], _lambda(val) if tok == "-l" else val]
            i += 2
            continue
        out.append(_SWITCHES.get(tok, tok))
        i += 1
    return out


def translate_train(argv):
    """``ffm-train [options] training_set_file [model_file]`` -> ``fit --model ffm`` arguments:
    the flags translated, the training file, ``--save model_file`` when one is given (LIBFFM
    then writes ``<training file>.model``; fmlearn saves only when asked) and LIBFFM's
    per-iteration lines."""
    flags = translate_flags(argv)
    valued = set(_VALUED.values())
    out, positional = [], []
    i = 0
    while i < len(flags):
        tok = flags[i]
        if tok in valued:
            out += flags[i:i + 2]
            i += 2
            continue
        if tok.startswith("-"):
            out.append(tok)
        else:
            positional.append(tok)
        i += 1
    if not positional or len(positional) > 2:
        raise CLIError("usage: fmlearn ffm-train [options] training_set_file [model_file]")
    out = ["--model", "ffm", positional[0]] + out
    if len(positional) == 2:
        out += ["--save", positional[1]]
    return out + ["--libffm-output"]


def translate_predict(argv):
    """``ffm-predict test_file model_file output_file`` -> ``predict`` arguments (the output
    holds P(click) per line, as LIBFFM writes; the log-loss is printed)."""
    if len(argv) != 3 or any(a.startswith("-") for a in argv):
        raise CLIError("usage: fmlearn ffm-predict test_file model_file output_file")
    test, model, output = argv
    return [model, test, "--out", output, "--proba", "--log-loss"]
