# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test lint typecheck pytest demo proto bench bench-mechanisms bench-ingest clean

# The first install takes about 2 minutes: it says so, and lists each package as pip fetches
# it (the full log goes to $(VENV)/install.log).
$(BIN)/.installed: pyproject.toml
	@echo "==> first run: creating $(VENV) and installing ldpcollect, its dependencies and dev tools"
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
	@echo "==> pytest (hypothesis profile: $${HYPOTHESIS_PROFILE:-$$( [ "$${CI:-}" = true ] && echo ci || echo dev)}; about 2-3 minutes on 2 cores)"
	$(BIN)/pytest -q --durations=5

test: lint typecheck pytest

demo: install
	$(BIN)/ldpcollect demo

proto: install
	$(BIN)/python scripts/gen_proto.py

bench: bench-mechanisms bench-ingest

bench-mechanisms: install
	$(BIN)/python bench/mechanisms.py

bench-ingest: install
	$(BIN)/python -m bench.ingest --plot out/ingest.png

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
