"""The one compiled part: the request reader's fast path (pyrepl/resp/_scan.c; the reason and
its figures are in bench/RESULTS.md, "The request reader in C"). Everything else is in
setup.cfg."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("pyrepl.resp._scan", ["pyrepl/resp/_scan.c"],
                             extra_compile_args=["-O2"])])
