# The two commands of the README: `make run` (the app on devhost, offline) and `make test` (every test).
PYTHON ?= python3
# Microsoft's agent hosting (AgentFunctionApp) is tested on devhost from an environment of its own: its dependencies
# (e.g. the PyPI `asyncio` package) must not enter the app's environment.
AF_VENV ?= .venv-agent-framework
PIP_FLAGS = --quiet --disable-pip-version-check

.PHONY: install run test test-agent-framework lint bench

install:
	$(PYTHON) -m pip install $(PIP_FLAGS) -r requirements-dev.txt
	@if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error; fi

run: install
	$(PYTHON) -m devhost

test: install test-agent-framework
	$(PYTHON) -m pytest

test-agent-framework:
	@[ -x $(AF_VENV)/bin/python ] || $(PYTHON) -m venv $(AF_VENV)
	$(AF_VENV)/bin/python -m pip install $(PIP_FLAGS) -r tests/requirements-agent-framework.txt
	REQUIRE_AGENT_FRAMEWORK=1 $(AF_VENV)/bin/python -m pytest -p no:cacheprovider tests/devhost/engine/test_agent_framework.py

lint:
	$(PYTHON) -m ruff check .

bench: install
	$(PYTHON) -m bench
