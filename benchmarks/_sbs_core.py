"""Plumbing of the side-by-side harness (``sbs.py``): running one system in a fresh process,
finding the peers, the benchmark lock, medians and Markdown tables.

Nothing here knows about factorization machines; ``sbs.py`` holds the scenarios.
"""

import contextlib
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

from _sbs_child import RESULT_TAG

# Every system runs on one thread unless a scenario is about threads.
ONE_THREAD = {
    "NUMBA_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
}
# A child reports its own measurements on one stdout line starting with RESULT_TAG.
LIBFM_VERSION = "1.4.4"


def child_env(extra=None, one_thread=True):
    """The environment of a child: ours, one thread each (``ONE_THREAD``), then ``extra``."""
    env = dict(os.environ)
    if one_thread:
        env.update(ONE_THREAD)
    env.update(extra or {})
    return env


# A tiny process (no site, no NumPy) between the harness and each system: it forks and execs the
# system and reports the system's own rusage. Started straight from the harness, a child's
# ru_maxrss would include the harness's resident size at the fork (Linux keeps the high-water
# mark of the memory a process replaces by exec), hundreds of MB of NumPy and data.
_LAUNCHER = r"""
import json, os, sys, time
report, cmd = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
with open(report, "w") as fh:
    json.dump({"user": ru.ru_utime, "sys": ru.ru_stime, "maxrss_kb": ru.ru_maxrss,
               "wall": wall, "code": os.waitstatus_to_exitcode(status)}, fh)
"""


def measure(cmd, env=None, cwd=None, timeout=None):
    """Run ``cmd`` in a fresh process and measure it from the outside.

    Returns a dict: ``cpu_s`` (user + system CPU seconds of the process and everything it
    waited for, from ``os.wait4``), ``user_s``, ``sys_s``, ``wall_s``, ``maxrss_mb`` (its peak
    resident set), ``load_before`` / ``load_after`` (1-minute load average), ``returncode``,
    ``payload`` (the JSON the process printed after ``RESULT_TAG``, merged) and, on failure,
    ``error`` (the end of its stderr). Output goes to temporary files, so a chatty process
    never blocks on a full pipe; ``timeout`` (seconds) kills it.
    """
    fd, report = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            load_before = os.getloadavg()[0]
            proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _LAUNCHER, report,
                                     *cmd], stdout=out, stderr=err, env=env, cwd=cwd,
                                    text=True, start_new_session=True)
            timer = None
            if timeout:
                timer = threading.Timer(timeout, _kill, (proc.pid,))
                timer.start()
            try:
                proc.wait()
            finally:
                if timer is not None:
                    timer.cancel()
            load_after = os.getloadavg()[0]
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        with open(report) as fh:
            text = fh.read()
    finally:
        os.unlink(report)
    if not text:  # the launcher itself failed or was killed
        ru = {"user": 0.0, "sys": 0.0, "maxrss_kb": 0, "wall": 0.0,
              "code": proc.returncode or -9}
    else:
        ru = json.loads(text)
    payload = {}
    for line in stdout.splitlines():
        if line.startswith(RESULT_TAG):
            payload.update(json.loads(line[len(RESULT_TAG):]))
    run = {"cpu_s": ru["user"] + ru["sys"], "user_s": ru["user"], "sys_s": ru["sys"],
           "wall_s": ru["wall"], "maxrss_mb": ru["maxrss_kb"] / 1024.0,
           "load_before": load_before, "load_after": load_after, "returncode": ru["code"],
           "payload": payload}
    if ru["code"] != 0:
        tail = (stderr.strip() or stdout.strip())[-1500:]
        run["error"] = tail or f"exit status {ru['code']}"
    return run


def _kill(pid):
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, 9)


@contextlib.contextmanager
def bench_lock(enabled=True):
    """Hold ``$TMPDIR/fmlearn-bench.lock`` so that two harness runs never overlap."""
    if not enabled:
        yield None
        return
    path = os.path.join(tempfile.gettempdir(), "fmlearn-bench.lock")
    with open(path, "a") as fh:
        t0 = time.perf_counter()
        fcntl.flock(fh, fcntl.LOCK_EX)
        waited = time.perf_counter() - t0
        if waited > 1:
            print(f"(waited {waited:.0f} s for {path})", file=sys.stderr)
        try:
            yield path
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# -- peers ------------------------------------------------------------------------------------
def peers_cache():
    """``${XDG_CACHE_HOME:-~/.cache}/fmlearn-peers``: where libFM is built and the peers' venv
    lives."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "fmlearn-peers")


def _executable(path, what):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SystemExit(f"{what}: {path} is not an executable file")
    return os.path.abspath(path)


def find_libfm(binary=None, tarball=None):
    """libFM's binary: ``binary``, else ``$FMLEARN_LIBFM``, else one built from ``tarball``
    (or ``$FMLEARN_LIBFM_TARBALL``) into the peers cache, else one built there before; None
    when there is none."""
    binary = binary or os.environ.get("FMLEARN_LIBFM")
    if binary:
        return _executable(binary, "libFM")
    built = os.path.join(peers_cache(), f"libfm-{LIBFM_VERSION}", "bin", "libFM")
    tarball = tarball or os.environ.get("FMLEARN_LIBFM_TARBALL")
    if tarball and not os.access(built, os.X_OK):
        build_libfm(tarball)
    return built if os.access(built, os.X_OK) else None


def build_libfm(tarball):
    """Unpack ``libfm-1.4.4.tar.gz`` into the peers cache and ``make`` it (once)."""
    cache = peers_cache()
    src = os.path.join(cache, f"libfm-{LIBFM_VERSION}")
    binary = os.path.join(src, "bin", "libFM")
    if os.access(binary, os.X_OK):
        return binary
    os.makedirs(cache, exist_ok=True)
    shutil.rmtree(src, ignore_errors=True)
    with tarfile.open(tarball) as tf:
        kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tf.extractall(cache, **kw)
    if not os.path.isdir(src):
        raise SystemExit(f"{tarball} did not unpack to libfm-{LIBFM_VERSION}/")
    log = os.path.join(cache, "libfm-build.log")
    with open(log, "w") as fh:
        done = subprocess.run(["make", "-s", "all"], cwd=src, stdout=fh, stderr=fh)
    if done.returncode != 0 or not os.access(binary, os.X_OK):
        raise SystemExit(f"building libFM failed, see {log}")
    return binary


PEER_PACKAGES = ("myfm", "river", "vowpalwabbit", "numpy", "scipy", "scikit-learn")


def find_peers_python(python=None, create=False):
    """The Python of the peers' venv (myFM, River, Vowpal Wabbit): ``python``, else
    ``$FMLEARN_PEERS_PYTHON``, else ``<peers cache>/peers-venv`` (created with ``pip`` when
    ``create``); None when there is none."""
    python = python or os.environ.get("FMLEARN_PEERS_PYTHON")
    if python:
        return _executable(python, "peers python")
    venv = os.path.join(peers_cache(), "peers-venv")
    exe = os.path.join(venv, "bin", "python")
    if not os.access(exe, os.X_OK) and create:
        os.makedirs(peers_cache(), exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([exe, "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True)
    return exe if os.access(exe, os.X_OK) else None


# -- summaries --------------------------------------------------------------------------------
def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def spread(values, fmt="{:.2f}"):
    """``median (min-max)`` of the non-missing values, or ``n/a``."""
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    med = fmt.format(statistics.median(values))
    if len(values) == 1 or min(values) == max(values):
        return med
    return f"{med} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def ratio(a, b, fmt="{:.2f}x"):
    """``a / b`` formatted (two significant digits below 0.1), or empty when undefined."""
    if a is None or b is None or b == 0:
        return ""
    r = a / b
    return f"{r:.2g}x" if 0 < r < 0.1 else fmt.format(r)


def md_table(heads, rows):
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def load_range(runs):
    """``a-b`` over the 1-minute load averages seen before and after the runs."""
    loads = [r[k] for r in runs for k in ("load_before", "load_after") if k in r]
    if not loads:
        return "n/a"
    return f"{min(loads):.2f}-{max(loads):.2f}"


def git_describe(path):
    """The commit (and ``-dirty``) of the checkout holding ``path``, or ``unknown``."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=path,
                             capture_output=True, text=True, check=True).stdout.strip()
        return out or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
