# Two entry points on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test lint typecheck unit bench clean system-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	rm -f $(VENV)/.installed-*
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

demo: $(STAMP)
	$(BIN)/python examples/quickstart.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy src

# System tools the tests use, installed only when missing (CI starts from a bare machine).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
system-deps:
	@command -v rg >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq ripgrep >/dev/null; }

unit: $(STAMP) system-deps
	$(BIN)/python -m pytest -q

test: lint typecheck unit

bench: $(STAMP) system-deps
	$(BIN)/python bench/loop_overhead.py
	$(BIN)/python bench/file_search.py --repeat 3

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
