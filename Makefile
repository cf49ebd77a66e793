# pyrepl — the two commands a newcomer needs:
#   make demo   set up everything and show a master serving data and reporting INFO
#   make test   set up everything and run the whole test suite (what CI runs)

PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed

.PHONY: all venv system-deps spark-deps redis-src redis-suite demo docs test test-quick test-pure bench lint clean

all: test

# (every C source and header: a change to any of them rebuilds the extensions)
$(STAMP): setup.cfg setup.py pyproject.toml $(wildcard pyrepl/*.[ch] pyrepl/*/*.[ch])
	@bash scripts/build-deps.sh $(PYTHON)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,spark,docs]'
	touch $(STAMP)

venv: $(STAMP)

# Debian's redis-server / redis-tools (interop tests, benchmarks); installed only when missing.
system-deps:
	@bash scripts/system-deps.sh

# Redis's own sources (test-suite RDB files, the redis.conf of Redis 7.0 and 8.x) and a Redis 8
# redis-server built from them, under .cache/redis-src/ (apt-get source; see the script).
redis-src:
	@bash scripts/redis-src.sh

# Redis 7.0.15's own test suite (tests/unit, unit/type, the non-replication integration files)
# with pyrepl standing in for redis-server, beside the same run on real redis-server 7.0.15:
# tests/redis-suite/RESULTS.md (scripts/redis_suite.py; FILES=unit/type/incr,... for a subset).
redis-suite: venv system-deps
	@REDIS8_BUILD=no VALKEY_BUILD=no bash scripts/redis-src.sh
	$(PY) scripts/redis_suite.py $(if $(FILES),--files $(FILES))

# A Java runtime for PySpark (the sync analytics job and its tests), only when java is missing;
# then the JVM's class-data-sharing archive of `pyrepl metrics` (under the venv, once: ~45 s).
spark-deps:
	@bash scripts/spark-deps.sh
	@if [ -x $(PY) ]; then $(PY) -m pyrepl.analytics.session; fi

demo: venv spark-deps
	@bash scripts/demo.sh

# The documentation site (docs/, mkdocs.yml) into build/site; --strict: a broken link or anchor
# fails it (no -q: it would silence the warnings that --strict counts).
docs: venv
	$(VENV)/bin/mkdocs build --strict -d build/site

# The whole suite on PYTEST_WORKERS processes (pytest-xdist). Most tests wait on servers and
# sockets, not the CPU, so three workers keep two cores busy; loadgroup (tests/conftest.py's
# scheduler): a worker takes the next test when it is done with its own, and the Spark tests
# (tests/analytics) run on one worker, one JVM. The tests marked serial hold live processes
# to wall-clock waits: they run after, alone.
PYTEST_WORKERS ?= 3

test: venv system-deps spark-deps redis-src docs
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup -m "not serial"
	$(PY) -m pytest -q -m serial
	$(MAKE) --no-print-directory test-pure

# The unit suite once more as plain Python: no compiled extension, their Python references
# (pyrepl/native.py).
test-pure: venv
	PYREPL_PURE=1 $(PY) -m pytest -q -m "not slow" tests/unit

test-quick: venv
	$(PY) -m pytest -q -m "not slow"

bench: venv system-deps spark-deps
	$(PY) bench/run_all.py

lint: venv
	$(VENV)/bin/ruff check pyrepl cli tests bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis var demo-out .cache
