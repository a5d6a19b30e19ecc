# The two commands of the README: `make run` (the app on devhost, offline) and `make test` (every test).
PYTHON ?= python3
# Microsoft's agent hosting (AgentFunctionApp) is tested on devhost from an environment of its own: its dependencies
# (e.g. the PyPI `asyncio` package) must not enter the app's environment.
AF_VENV ?= .venv-agent-framework
# Tools with environments of their own: the lock resolver, the IaC checker, the Python 3.13 smoke run.
UV_VENV ?= .venv-uv
UV_VERSION = 0.13.9
CHECKOV_VENV ?= .venv-checkov
CHECKOV_VERSION = 3.3.30
PY313_VENV ?= .venv-py313
# pyenv's 3.13 first (its python3.13 shim may exist and refuse to run), else a working python3.13 on PATH.
PYTHON313 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python) \
	$(shell python3.13 -c 'import sys; print(sys.executable)' 2>/dev/null))
PIP_FLAGS = --quiet --disable-pip-version-check
# The lock's pins without their hashes: a constraints file for installing the test tools on top of the lock.
LOCK_CONSTRAINTS = .lock-constraints.txt

.PHONY: install install-test install-browser run test test-agent-framework test-py313 check-infra package lock lint bench

# The app's runtime dependencies exactly as locked (hash-checked), then the test tools on top (constrained by the lock,
# so a test tool can never move a runtime dependency away from what is deployed).
install: $(LOCK_CONSTRAINTS)
	$(PYTHON) -m pip install $(PIP_FLAGS) --require-hashes -r requirements.lock
	$(PYTHON) -m pip install $(PIP_FLAGS) -r requirements-dev.txt -c $(LOCK_CONSTRAINTS)

$(LOCK_CONSTRAINTS): requirements.lock
	sed -n 's/^\([A-Za-z0-9_.-]*==[^ ]*\)\( ;[^\\]*\)\{0,1\} *\\$$/\1\2/p' requirements.lock > $@

# The tests also need the local Cosmos server (npm package, exact pin in package-lock.json) and, for the page's
# browser tests, Debian's Chromium (Playwright drives it; no browser download).
install-test: install install-browser
	npm ci --no-audit --no-fund --loglevel=error

install-browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "!!! NO CHROMIUM and no apt-get as root: the browser tests of /api/ui will be SKIPPED !!!"; fi

# host.json names its task hub `%TASKHUB_NAME%`: with no local.settings.json, the offline run names one itself.
run: install
	$(if $(wildcard local.settings.json),,TASKHUB_NAME=$${TASKHUB_NAME:-local}) $(PYTHON) -m devhost

test: install-test test-agent-framework check-infra test-py313
	$(PYTHON) -m pytest

test-agent-framework:
	@[ -x $(AF_VENV)/bin/python ] || $(PYTHON) -m venv $(AF_VENV)
	$(AF_VENV)/bin/python -m pip install $(PIP_FLAGS) -r tests/requirements-agent-framework.txt
	REQUIRE_AGENT_FRAMEWORK=1 $(AF_VENV)/bin/python -m pytest -p no:cacheprovider tests/devhost/engine/test_agent_framework.py

# A smoke set on Python 3.13 (azure-functions 2.x there): devhost, the agent tour on both stores, the store contract.
test-py313: install-test $(LOCK_CONSTRAINTS)
	@[ -n "$(PYTHON313)" ] || { echo "Python 3.13 not found: set PYTHON313=/path/to/python3.13"; exit 1; }
	@[ -x $(PY313_VENV)/bin/python ] || $(PYTHON313) -m venv $(PY313_VENV)
	$(PY313_VENV)/bin/python -m pip install $(PIP_FLAGS) --require-hashes -r requirements.lock
	$(PY313_VENV)/bin/python -m pip install $(PIP_FLAGS) -r requirements-dev.txt -c $(LOCK_CONSTRAINTS)
	$(PY313_VENV)/bin/python -m pytest -p no:cacheprovider -q tests/devhost/host tests/devhost/protocol \
		tests/e2e/test_e2e_basic.py tests/e2e/test_e2e_approvals.py tests/store

# Offline checks of infra/ (the Bicep compiler is not available here): checkov, in an environment of its own.
check-infra:
	@[ -x $(CHECKOV_VENV)/bin/checkov ] || { $(PYTHON) -m venv $(CHECKOV_VENV) && \
		$(CHECKOV_VENV)/bin/python -m pip install $(PIP_FLAGS) checkov==$(CHECKOV_VERSION); }
	$(PYTHON) -m deploy.check_infra --checkov $(CHECKOV_VENV)/bin/checkov infra

# dist/functionapp.zip: what `func azure functionapp publish` / azd upload (.funcignore applied, the lock as
# requirements.txt); dist/functionapp/ holds the same files unpacked (azd deploys that folder).
package:
	$(PYTHON) -m deploy.package

# Re-resolve requirements.txt into requirements.lock (keeps existing pins; `make lock UPGRADE=1` takes new releases).
lock:
	@[ -x $(UV_VENV)/bin/uv ] || { $(PYTHON) -m venv $(UV_VENV) && $(UV_VENV)/bin/python -m pip install $(PIP_FLAGS) uv==$(UV_VERSION); }
	$(UV_VENV)/bin/uv pip compile requirements.txt --universal --python-version 3.11 --generate-hashes --quiet \
		$(if $(UPGRADE),--upgrade) -o requirements.lock

lint:
	$(PYTHON) -m ruff check .

bench: install
	$(PYTHON) -m bench
