# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test lint typecheck pytest demo proto bench bench-mechanisms bench-ingest clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy ldpcollect client aggregator ldpcollect_cli tests scripts bench

pytest: install
	$(BIN)/pytest -q

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
