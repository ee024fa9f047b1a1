"""Run the numerically sensitive tests (marker ``blas``) again under the other OpenBLAS kernels.

OpenBLAS picks its kernel from the CPU at load time: on this project's machines (AMD EPYC with
AVX-512) it takes SkylakeX by itself, while the same machine kind with another OpenBLAS build,
or a CPU without AVX-512, takes Haswell (which is also what ``Zen`` means in NumPy's
OpenBLAS). The kernels block and vectorise matrix products differently, so results differ in
their last digits, and a test whose tolerance was tuned to one kernel fails on another. The
tests marked ``blas`` compare results that pass through OpenBLAS across code paths or
against a threshold; this script runs them once under each kernel of :data:`KERNELS` that
this CPU takes, after checking with threadpoolctl which kernel OpenBLAS really took for the
request (a request the CPU or the build cannot honour is mapped to another kernel: a kernel
already run is not run again, and the script says so). So a tolerance tuned on a Haswell
machine fails here under SkylakeX, and one tuned under SkylakeX fails under Haswell, whatever
OpenBLAS picks by itself. Exit status: that of the first failing run, else 0.

    .venv/bin/python .ci/blas_kernels.py [pytest arguments, default -q -n 0]
"""

import os
import subprocess
import sys

#: Kernels this machine kind can get (the request; the one OpenBLAS takes is checked).
KERNELS = ("SkylakeX", "Haswell", "Zen", "Cooperlake")

PROBE = ("import numpy\nfrom threadpoolctl import threadpool_info\n"
         "print(next((i.get('architecture') for i in threadpool_info()"
         " if i.get('internal_api') == 'openblas'), None))")


def kernel(coretype):
    """The architecture OpenBLAS reports in a fresh process with ``OPENBLAS_CORETYPE``."""
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def main(argv):
    args = argv or ["-q", "-n", "0"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print(f"blas_kernels: OpenBLAS takes {kernel(None)} by itself", flush=True)
    done = set()
    for want in KERNELS:
        got = kernel(want)
        if got in done:
            print(f"blas_kernels: OPENBLAS_CORETYPE={want} -> the {got} kernel, already run",
                  flush=True)
            continue
        done.add(got)
        print(f"blas_kernels: OPENBLAS_CORETYPE={want} -> the {got} kernel: the tests marked "
              "blas", flush=True)
        env = dict(os.environ, OPENBLAS_CORETYPE=want)
        rc = subprocess.call([sys.executable, "-m", "pytest", "-m", "blas", "-p", "no:randomly",
                              *args], env=env, cwd=root)
        if rc:
            print(f"blas_kernels: FAILED under the {got} kernel", flush=True)
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
