# memors — two commands: `make demo` and `make test` (both set up .venv first;
# `make test` runs the suite on SQLite, then on PostgreSQL).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PYTEST_WORKERS ?= 2

.PHONY: setup demo test test-quick lint contracts typecheck unit unit-postgres bench-setup bench bench-quick man screenshots clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/python demo/run_demo.py

lint: setup
	$(BIN)/ruff check src tests benchmarks demo examples
	$(BIN)/ruff format --check src tests benchmarks demo examples

contracts: setup
	$(BIN)/lint-imports

# mypy ([tool.mypy] in pyproject.toml): strict on the storage boundary, the
# plugin surface and the built-in kinds; tests/typing/ checks that each
# engine is a Storage and its transactions a Tx.
typecheck: setup
	$(BIN)/python -m mypy

unit: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -q

# The same suite on the PostgreSQL engine (a fresh database per test, cloned
# from a migrated template; server: $$MEMORS_TEST_POSTGRES, default the local
# socket). An unreachable server fails the run instead of skipping it.
unit-postgres: setup
	MEMORS_REQUIRE_POSTGRES=1 $(BIN)/python -m pytest -n $(PYTEST_WORKERS) -q --engine=postgres

test: lint contracts typecheck unit unit-postgres

# The inner loop: the suite on SQLite without the tests marked `browser`
# (Chromium) or `subprocess` (they start the CLI, a server or a benchmark;
# tests/conftest.py marks them by reading their code). `make test` runs all.
test-quick: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -q -m "not browser and not subprocess"

# The benchmarks also need the `bench` extra (datasketch, the MinHash reference).
bench-setup: setup
	@$(BIN)/python -c "import datasketch" 2>/dev/null || $(BIN)/python -m pip install --quiet -e '.[dev,bench]'

bench: bench-setup
	$(BIN)/python -m benchmarks.run --size 100000
	$(BIN)/python -m benchmarks.startup

bench-quick: bench-setup
	$(BIN)/python -m benchmarks.run --quick
	$(BIN)/python -m benchmarks.startup

# The man page, by the step a package build runs ([tool.build_manpages] in
# pyproject.toml, via setup.py): build/man/memors-mcp.1; read it with `man -l`.
man: setup
	$(BIN)/python setup.py --quiet build_manpages

# The web view's screenshots in docs/images/ (a demo store, a real server,
# headless Chromium: Debian's `chromium` on PATH, never a downloaded one).
screenshots: setup
	$(BIN)/python docs/screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .demo build *.egg-info src/*.egg-info
