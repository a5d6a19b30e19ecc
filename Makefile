# The two commands of the README: `make run` (the app on devhost, offline) and `make test` (every test).
PYTHON ?= python3
# Microsoft's agent hosting (AgentFunctionApp) is tested on devhost from an environment of its own: its dependencies
# (e.g. the PyPI `asyncio` package) must not enter the app's environment.
AF_VENV ?= .venv-agent-framework
PIP_FLAGS = --quiet --disable-pip-version-check

.PHONY: install install-test install-browser run test test-agent-framework lint bench

install:
	$(PYTHON) -m pip install $(PIP_FLAGS) -r requirements-dev.txt

# The tests also need the local Cosmos server (npm package, exact pin in package-lock.json) and, for the page's
# browser tests, Debian's Chromium (Playwright drives it; no browser download).
install-test: install install-browser
	npm ci --no-audit --no-fund --loglevel=error

install-browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "!!! NO CHROMIUM and no apt-get as root: the browser tests of /api/ui will be SKIPPED !!!"; fi

run: install
	$(PYTHON) -m devhost

test: install-test test-agent-framework
	$(PYTHON) -m pytest

test-agent-framework:
	@[ -x $(AF_VENV)/bin/python ] || $(PYTHON) -m venv $(AF_VENV)
	$(AF_VENV)/bin/python -m pip install $(PIP_FLAGS) -r tests/requirements-agent-framework.txt
	REQUIRE_AGENT_FRAMEWORK=1 $(AF_VENV)/bin/python -m pytest -p no:cacheprovider tests/devhost/engine/test_agent_framework.py

lint:
	$(PYTHON) -m ruff check .

bench: install
	$(PYTHON) -m bench
