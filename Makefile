# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test lint typecheck pytest demo proto bench bench-mechanisms bench-ingest bench-overload bench-tokens bench-vdaf bench-secure clean

$(BIN)/.installed: pyproject.toml
	@echo "==> creating $(VENV) and installing ldpcollect with its dev tools (about 2 minutes the first time)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
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

bench: bench-mechanisms bench-ingest bench-vdaf bench-tokens bench-overload

bench-mechanisms: install
	$(BIN)/python bench/mechanisms.py

bench-ingest: install
	$(BIN)/python -m bench.ingest --plot out/ingest.png

bench-tokens: install
	$(BIN)/python -m bench.tokens

bench-vdaf: install
	$(BIN)/python bench/vdaf.py

bench-secure: install
	$(BIN)/python bench/secure.py

bench-overload: install
	$(BIN)/python -m bench.overload

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
