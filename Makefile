# StrictCall developer entry points. Every target is safe to re-run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.strictcall-installed
HOST   ?= 127.0.0.1
PORT   ?= 8000
PYTEST_ARGS ?=

.PHONY: setup serve test test-fast bench clean

setup: $(STAMP)
	$(BIN)/strictcall fetch-model

# Reinstall only when the dependency list changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

serve: setup
	$(BIN)/strictcall serve --host $(HOST) --port $(PORT)

# The whole suite, slow tiers (real model, real server process) included.
test: setup
	$(BIN)/python -m pytest -q -rs $(PYTEST_ARGS)

# Unit tier only: no model load, no server process.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

bench: setup
	$(BIN)/python -m bench.decode_speed

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
