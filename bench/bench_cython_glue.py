"""Issue 36 part 3, reproducible: the C glue against its prototypes in Cython's pure Python mode.

    .venv/bin/python bench/bench_cython_glue.py [--cython-python PATH]
        [--variants hot,hot_descr,plainrun] [--tests] [--keep]

bench/cython_glue/ holds the prototypes measured for bench/RESULTS.md ("The C glue in Cython's
pure Python mode?"): ``_hot.py``/``.pxd`` and ``_plainrun.py``/``.pxd`` (slots read by
getattr) and ``_hot_descr.py``/``.pxd`` (through the member descriptors, compiled only). They
are data, not pyrepl code: nothing imports or builds them where they are.

For the C figure and for each variant, the script exports this repository's HEAD
(``git archive``) into a temporary directory and builds the extensions there as C
(``setup.py build_ext --inplace`` with this interpreter); for a variant it then puts the
prototype in place of the C module (``pyrepl/commands/_hot.py`` + ``.pxd``, or
``pyrepl/_plainrun.py`` + ``.pxd``), translates it with Cython (``binding=False,
boundscheck=False, wraparound=False``, language level 3, as the attempt's ``cythonize``) and
compiles the C that Cython wrote with ``-O2`` against this interpreter, replacing the C
module's build. Each tree is checked (pyrepl runs its native extensions, the swapped module is
Cython's build) and measured with ``bench/bench_dispatch_instr.py --tree <export>``: the
``hot`` variants at ``-P 1 -n 1000``, ``plainrun`` at ``-P 16 -n 4000``. The temporary
directory goes at the end, on error too (``--keep`` leaves it, to look at a build).

Cython runs from ``--cython-python`` (an interpreter that has it), or else from a throwaway
venv made in the temporary directory with ``pip install cython==3.3.1``: the project's venv
is not touched. ``--tests`` also runs the module's differential tests on the Cython build
(tests/unit/test_hot.py, tests/unit/test_plainrun_loops.py). Needs git, valgrind and a C
compiler; ~10 minutes for every variant on the project's machine.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROTOTYPES = os.path.join(HERE, "cython_glue")
CYTHON_VERSION = "3.3.1"
DIRECTIVES = "language_level=3,binding=False,boundscheck=False,wraparound=False"
P1_CASES = ("SET", "GET", "INCR", "LPUSH", "HSET", "ZADD", "SET+1R")


@dataclass(frozen=True)
class Variant:
    prototype: str        # bench/cython_glue/<prototype>.py and .pxd
    path: str             # the module in the tree, without suffix
    module: str
    cases: tuple[str, ...]
    pipeline: int
    n: int
    tests: str


VARIANTS = {
    "hot": Variant("_hot", "pyrepl/commands/_hot", "pyrepl.commands._hot", P1_CASES, 1, 1000,
                   "tests/unit/test_hot.py"),
    "hot_descr": Variant("_hot_descr", "pyrepl/commands/_hot", "pyrepl.commands._hot",
                         ("SET", "GET", "INCR"), 1, 1000, "tests/unit/test_hot.py"),
    "plainrun": Variant("_plainrun", "pyrepl/_plainrun", "pyrepl._plainrun",
                        ("SET", "GET", "INCR"), 16, 4000, "tests/unit/test_plainrun_loops.py"),
}
LABELS = {"hot": "Cython `_hot` (getattr)", "hot_descr": "Cython `_hot` (descriptor calls)",
          "plainrun": "Cython `_plainrun` (getattr)"}

# A compile of one module, run from a directory of its own (so that no setup.cfg is read).
_COMPILE = """\
import sys
from setuptools import Extension, setup
name, source, out, tmp = sys.argv[1:5]
setup(name="cython-glue-bench", script_args=["-q", "build_ext", "--build-lib", out,
                                             "--build-temp", tmp],
      ext_modules=[Extension(name, [source], extra_compile_args=["-O2"])])
"""


class Failed(Exception):
    pass


def run(argv: list[str], timeout: float, cwd: str | None = None,
        env: dict[str, str] | None = None) -> str:
    """argv's output; its whole process group is killed on a timeout or an interruption."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
        raise
    if proc.returncode != 0:
        raise Failed(f"{' '.join(argv)} exited {proc.returncode}:\n{out[-4000:]}")
    return out


def tree_env(tree: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYREPL_")}
    return dict(env, PYTHONPATH=tree, PYTHONHASHSEED="0")


def cython_python(given: str | None, tmp: str) -> str:
    if given is None:
        venv = os.path.join(tmp, "cython-venv")
        print(f"creating a venv with cython=={CYTHON_VERSION} in {venv}", flush=True)
        run([sys.executable, "-m", "venv", venv], timeout=300)
        given = os.path.join(venv, "bin", "python")
        run([given, "-m", "pip", "install", "-q", f"cython=={CYTHON_VERSION}"], timeout=900)
    version = run([given, "-c", "import Cython; print(Cython.__version__)"], timeout=60).strip()
    if version != CYTHON_VERSION:
        print(f"note: Cython {version}, the figures in bench/RESULTS.md are {CYTHON_VERSION}'s",
              file=sys.stderr)
    return given


def export(tmp: str, name: str) -> str:
    """HEAD of this repository in tmp/name, its extensions built as C."""
    tree = os.path.join(tmp, name)
    archive = os.path.join(tmp, "head.tar")
    if not os.path.exists(archive):
        run(["git", "-C", ROOT, "archive", "--format=tar", "-o", archive, "HEAD"], timeout=300)
    os.makedirs(tree)
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree, timeout=900)
    return tree


def swap_in(cy: str, tmp: str, tree: str, v: Variant) -> None:
    """The prototype in place of the C module, compiled by Cython, as the module's build."""
    for suffix in (".py", ".pxd"):
        shutil.copyfile(os.path.join(PROTOTYPES, v.prototype + suffix),
                        os.path.join(tree, v.path + suffix))
    gen = os.path.join(tmp, f"gen-{v.prototype}")
    os.makedirs(gen)
    c_file = os.path.join(gen, os.path.basename(v.path) + ".c")
    # (Cython finds the .pxd beside the .py, and the module's full name from the packages')
    run([cy, "-m", "cython", "--directive", DIRECTIVES, "-o", c_file,
         os.path.join(tree, v.path + ".py")], timeout=600)
    script = os.path.join(gen, "compile.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(_COMPILE)
    out = os.path.join(gen, "lib")
    run([sys.executable, script, v.module, c_file, out, os.path.join(gen, "tmp")], cwd=gen,
        timeout=900)
    folder, base = os.path.split(v.path)
    built = [f for f in os.listdir(os.path.join(out, folder)) if f.startswith(base + ".")]
    if len(built) != 1:
        raise Failed(f"Cython build of {v.module}: {built}")
    for f in os.listdir(os.path.join(tree, folder)):   # the C module's build
        if f.startswith(base + ".") and f.endswith(".so"):
            os.remove(os.path.join(tree, folder, f))
    shutil.copyfile(os.path.join(out, folder, built[0]), os.path.join(tree, folder, built[0]))


_CHECK = """\
import importlib, sys
import pyrepl.native as native
assert not native.PURE, native.WHY_PURE
for name in native.EXTENSIONS:
    importlib.import_module(name)
m = importlib.import_module(sys.argv[1])
with open(m.__file__, "rb") as f:
    print(m.__file__, b"__pyx_" in f.read())
"""


def check(tree: str, module: str, cython: bool) -> None:
    """pyrepl in tree runs its native extensions, module being Cython's build or not."""
    out = run([sys.executable, "-c", _CHECK, module], cwd=tree, env=tree_env(tree), timeout=120)
    path, made_by_cython = out.split()[-2:]
    if not path.startswith(tree) or made_by_cython != str(cython):
        raise Failed(f"{module} in {tree}: {out.strip()}")


def measure(tree: str, cases: tuple[str, ...], pipeline: int, n: int) -> dict[str, int]:
    out = run([sys.executable, os.path.join(HERE, "bench_dispatch_instr.py"), "--tree", tree,
               "--cases", ",".join(cases), "-P", str(pipeline), "-n", str(n)],
              cwd=ROOT, timeout=300 + 120 * len(cases))
    found = {m[1]: int(m[2].replace(",", ""))
             for m in re.finditer(r"^(\S+)\s+-P\d+\s+([\d,]+) instructions/command", out, re.M)}
    if set(found) != set(cases):
        raise Failed(f"bench_dispatch_instr printed:\n{out}")
    for case in cases:
        print(f"  {case} -P{pipeline}: {found[case]:,}", flush=True)
    return found


def table(name: str, c: dict[tuple[str, int], int], cy: dict[str, int], v: Variant) -> str:
    rows = [f"| case | C | {LABELS[name]} | |", "|---|---:|---:|---:|"]
    for case in v.cases:
        before, after = c[case, v.pipeline], cy[case]
        rows.append(f"| {case} -P{v.pipeline} | {before:,} | {after:,} | "
                    f"{100 * (after - before) / before:+.1f} % |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cython-python", help="an interpreter with Cython (default: a throwaway "
                    f"venv with cython=={CYTHON_VERSION})")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"some of {','.join(VARIANTS)}")
    ap.add_argument("--tests", action="store_true",
                    help="also run each Cython build's differential tests")
    ap.add_argument("--keep", action="store_true", help="leave the temporary directory")
    args = ap.parse_args()
    names = args.variants.split(",")
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        ap.error(f"no variant {unknown[0]} (there are {', '.join(VARIANTS)})")
    for tool in ("git", "valgrind", "cc"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed", file=sys.stderr)
            return 1
    # (a SIGTERM unwinds as an exception, so that the temporary directory goes)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="pyrepl-cython-glue-")
    try:
        cy = cython_python(args.cython_python, tmp)
        head = run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], timeout=60).strip()
        print(f"HEAD {head}; {sys.executable}; Cython from {cy}", flush=True)

        print("C (every extension C)", flush=True)
        tree = export(tmp, "c")
        check(tree, "pyrepl.commands._hot", cython=False)
        c: dict[tuple[str, int], int] = {}
        for pipeline in sorted({VARIANTS[name].pipeline for name in names}):
            cases = tuple(dict.fromkeys(case for name in names for case in VARIANTS[name].cases
                                        if VARIANTS[name].pipeline == pipeline))
            n = next(VARIANTS[name].n for name in names if VARIANTS[name].pipeline == pipeline)
            c.update({(case, pipeline): x for case, x in measure(tree, cases, pipeline,
                                                                 n).items()})
        shutil.rmtree(tree)

        tables = []
        for name in names:
            v = VARIANTS[name]
            print(f"{name} (bench/cython_glue/{v.prototype}.py for {v.module})", flush=True)
            tree = export(tmp, name)
            swap_in(cy, tmp, tree, v)
            check(tree, v.module, cython=True)
            if args.tests:
                out = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           v.tests], cwd=tree, env=tree_env(tree), timeout=900)
                print("  " + out.strip().splitlines()[-1], flush=True)
            tables.append(table(name, c, measure(tree, v.cases, v.pipeline, v.n), v))
            shutil.rmtree(tree)
        print(f"\nInstructions per command, HEAD {head} (bench/bench_dispatch_instr.py; "
              f"{time.monotonic() - started:.0f} s):\n")
        print("\n\n".join(tables))
        return 0
    except Failed as e:
        print(e, file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
