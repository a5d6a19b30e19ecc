# The two commands of the README: `make run` (the app on devhost, offline) and `make test` (every test).
# Both work in the project's own environment, $(VENV), made with $(PYTHON) (never the system Python's packages:
# Debian's python3 refuses those, PEP 668). `make run PORT=8080` serves on another port.
PYTHON ?= python3
VENV ?= .venv
PY = $(VENV)/bin/python
PORT ?= 7071
# Microsoft's agent hosting (AgentFunctionApp) is tested on devhost from an environment of its own: its dependencies
# (e.g. the PyPI `asyncio` package) must not enter the app's environment.
AF_VENV ?= .venv-agent-framework
# The OpenAI Agents SDK's tests: the project's environment plus the SDK, which needs a newer urllib3 than the lock's.
OAI_AGENTS_VENV ?= .venv-openai-agents
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
# Each test host imports the app afresh (so do the real worker's processes): without cached bytecode every import
# compiles the app's modules again, a fifth of a host's start. A shell's PYTHONDONTWRITEBYTECODE does not reach make's
# commands.
unexport PYTHONDONTWRITEBYTECODE
# The lock's pins without their hashes: requirements.txt installs through it (see there), and the test tools are
# installed on top of the lock with it.
LOCK_CONSTRAINTS = requirements-constraints.txt
# Where `make test-requirements` finds each supported Python (pyenv's, else one on PATH).
PYTHONS_SUPPORTED = 3.11 3.12 3.13

.PHONY: FORCE install install-dev install-test install-browser run test test-main test-others test-agent-framework test-openai-agents test-py313 check-infra package \
	lock lint bench test-requirements

# The project's environment, made with $(PYTHON), which must be Python 3.11+ (said here, not deep in pip). One made by
# an older Python, or broken (its interpreter gone), or, when PYTHON is given (`make install PYTHON=python3.12`), by
# another version than it, is made again; otherwise an existing one is kept whatever python3 is now (not even run).
PYTHON_GIVEN = $(filter command line environment,$(origin PYTHON))
VERSION_OF = -c 'import sys; print("%d.%d" % sys.version_info[:2]); sys.exit(sys.version_info < (3, 11))'
# The check runs every time; the environment's pyvenv.cfg changes only when it is made (again), and then what is
# installed in it is installed again.
$(PY): $(VENV)/pyvenv.cfg
$(VENV)/pyvenv.cfg: FORCE
	@made=$$($(PY) $(VERSION_OF) 2>/dev/null) && [ -z "$(PYTHON_GIVEN)" ] && exit 0; \
	version=$$($(PYTHON) $(VERSION_OF) 2>/dev/null) || { \
		problem="Cannot run PYTHON=$(PYTHON)"; [ -z "$$version" ] || problem="PYTHON=$(PYTHON) is Python $$version"; \
		echo "$$problem: this app needs Python 3.11, 3.12 or 3.13; pass one, e.g." \
		"make $(or $(MAKECMDGOALS),run) PYTHON=python3.11"; exit 1; }; \
	if [ -e $(PY) ] || [ -L $(PY) ]; then \
		[ "$$made" = "$$version" ] && exit 0; \
		echo "$(VENV) was made by Python $${made:-(broken)}: making it again with PYTHON=$(PYTHON) (Python $$version)"; \
		rm -rf $(VENV); \
	fi; \
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); echo "Cannot make a virtual environment with \
	$(PYTHON): on Debian/Ubuntu install python3-venv (apt install python3-venv), or pass PYTHON=/path/to/python3.11+"; \
	exit 1; }

FORCE:

# What running needs, in $(VENV): the app's runtime dependencies exactly as locked (hash-checked) and the terminal
# client `agentctl` (pyproject.toml; editable, on the environment's PATH), and on Python 3.13+ Azure's worker library
# for devhost's real-worker mode (requirements-devhost.txt). Skipped while nothing it reads changed.
install: $(VENV)/.installed-run
$(VENV)/.installed-run: requirements.lock pyproject.toml requirements-devhost.txt $(VENV)/pyvenv.cfg
	$(PY) -m pip install $(PIP_FLAGS) --require-hashes -r requirements.lock
	$(PY) -m pip install $(PIP_FLAGS) -e .
	$(PY) -m pip install $(PIP_FLAGS) -r requirements-devhost.txt
	@touch $@

# The test tools on top (constrained by the lock, so a test tool can never move a runtime dependency away from what
# is deployed).
install-dev: $(VENV)/.installed-dev
$(VENV)/.installed-dev: $(VENV)/.installed-run requirements-dev.txt $(LOCK_CONSTRAINTS)
	$(PY) -m pip install $(PIP_FLAGS) -r requirements-dev.txt -c $(LOCK_CONSTRAINTS)
	@touch $@

$(LOCK_CONSTRAINTS): requirements.lock
	{ echo "# The pins of requirements.lock without their hashes (written by make from the lock: do not edit)."; \
	  sed -n 's/^\([A-Za-z0-9_.-]*==[^ ]*\)\( ;[^\\]*\)\{0,1\} *\\$$/\1\2/p' requirements.lock | sed 's/ *$$//'; } > $@

# requirements.txt installs in a fresh environment with the pip each supported Python ships (ensurepip's, not
# upgraded): what `pip install -r requirements.txt` and a remote build on Azure do.
test-requirements:
	@set -e; for version in $(PYTHONS_SUPPORTED); do \
		python=$$(ls -d $(HOME)/.pyenv/versions/$$version.*/bin/python 2>/dev/null | tail -1); \
		[ -n "$$python" ] || python=$$(command -v python$$version || true); \
		[ -n "$$python" ] || { echo "Python $$version not found: skipped"; continue; }; \
		venv=.venv-requirements-$$version; rm -rf $$venv; $$python -m venv $$venv; \
		echo "Python $$version, pip $$($$venv/bin/python -m pip --version | cut -d' ' -f2): pip install -r requirements.txt"; \
		$$venv/bin/python -m pip install $(PIP_FLAGS) -r requirements.txt; \
		$$venv/bin/python -m pip check; \
	done

# The tests also need the local Cosmos server (npm package, exact pin in package-lock.json) and, for the page's
# browser tests, Debian's Chromium (Playwright drives it; no browser download).
install-test: install-dev install-browser node_modules/.installed
node_modules/.installed: package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

install-browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "!!! NO CHROMIUM and no apt-get as root: the browser tests of /api/ui will be SKIPPED !!!"; fi

run: install
	$(PY) -m devhost --port $(PORT)

# Two at a time on separate cores: the main suite (one core: the app in the test process) beside the runs in
# environments of their own, the longest of which (Python 3.13 through Azure's worker) keeps the other core. Each
# run's output is printed whole when it ends (-O). Nothing they share is written by both: each Python has its own
# environment and bytecode, each pytest its own temporary directory, each server a free port.
test: install-test
	@$(MAKE) --no-print-directory -j2 -O test-main test-others

test-main: install-test
	$(PY) -m pytest --durations=15

test-others: test-agent-framework test-openai-agents check-infra test-py313 test-requirements

# A test tool's environment of its own ($(1)), made with the project's Python: made again when the project's
# environment was made for another one.
define own_environment
@[ "$$($(1)/bin/python $(VERSION_OF) 2>/dev/null)" = "$$($(PY) $(VERSION_OF))" ] || { rm -rf $(1); $(PY) -m venv $(1); }
endef

# Microsoft's Agent Framework hosting on devhost.
test-agent-framework: $(PY)
	$(call own_environment,$(AF_VENV))
	$(AF_VENV)/bin/python -m pip install $(PIP_FLAGS) -r tests/requirements-agent-framework.txt
	REQUIRE_AGENT_FRAMEWORK=1 $(AF_VENV)/bin/python -m pytest -p no:cacheprovider tests/devhost/engine/test_agent_framework.py

# The OpenAI Agents SDK against the app (tests/e2e/test_e2e_openai_agents_sdk.py, both stores): an environment of its
# own that sees the project's packages (a .pth after its own site-packages) and adds the SDK with the urllib3 it needs
# (tests/requirements-openai-agents.txt), so the lock's urllib3 pin stays where the app runs.
test-openai-agents: install-test
	$(call own_environment,$(OAI_AGENTS_VENV))
	$(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > \
		"$$($(OAI_AGENTS_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/project.pth"
	$(OAI_AGENTS_VENV)/bin/python -m pip install $(PIP_FLAGS) -r tests/requirements-openai-agents.txt
	REQUIRE_OPENAI_AGENTS=1 $(OAI_AGENTS_VENV)/bin/python -m pytest -p no:cacheprovider \
		tests/e2e/test_e2e_openai_agents_sdk.py

# Python 3.13 (azure-functions 2.x there): devhost's own mode on its host tests and the store contract, then the
# real-worker mode (Azure's worker library, azure-functions-runtime: the default wherever it is installed) on the
# refused apps, the sample apps, the end-to-end suite and the identity tests (SQLite store; the Cosmos variants run in
# the main suite, where the store code is the same). What crosses the worker's boundary (HTTP in and out, streams,
# the Durable client, activities and episodes, crashes, logs, telemetry, identity) is checked here; the main suite
# alone checks what is the app's own logic whatever runs it, each test of which would start two worker processes
# here (the in-process MCP runner, the CLI's printing, budgets, rewind and fork, the semantics table, schemas).
RUNTIME_LEFT_OUT = test_mcp_in_process test_e2e_cli test_e2e_cli_output test_e2e_cli_gate test_e2e_cli_repair \
	test_e2e_spend test_e2e_rewind test_e2e_fork test_e2e_run_semantics test_e2e_schema_refs
test-py313: install-test $(LOCK_CONSTRAINTS)
	@[ -n "$(PYTHON313)" ] || { echo "Python 3.13 not found: set PYTHON313=/path/to/python3.13"; exit 1; }
	@[ -x $(PY313_VENV)/bin/python ] || $(PYTHON313) -m venv $(PY313_VENV)
	$(PY313_VENV)/bin/python -m pip install $(PIP_FLAGS) --require-hashes -r requirements.lock
	$(PY313_VENV)/bin/python -m pip install $(PIP_FLAGS) -r requirements-dev.txt -c $(LOCK_CONSTRAINTS)
	DEVHOST_WORKER=inprocess $(PY313_VENV)/bin/python -m pytest -p no:cacheprovider -q tests/devhost/host \
		--ignore=tests/devhost/host/test_real_worker.py tests/devhost/protocol tests/store
	DEVHOST_WORKER=runtime E2E_STORES=sqlite $(PY313_VENV)/bin/python -m pytest -p no:cacheprovider -q --durations=15 \
		tests/devhost/host/test_real_worker.py tests/devhost/engine/test_sample_apps.py tests/e2e tests/auth \
		$(foreach module,$(RUNTIME_LEFT_OUT),--ignore=tests/e2e/$(module).py)

# Offline checks of infra/ (the Bicep compiler is not available here): checkov, in an environment of its own.
check-infra:
	@[ -x $(CHECKOV_VENV)/bin/checkov ] || { $(PYTHON) -m venv $(CHECKOV_VENV) && \
		$(CHECKOV_VENV)/bin/python -m pip install $(PIP_FLAGS) checkov==$(CHECKOV_VERSION); }
	$(PY) -m deploy.check_infra --checkov $(CHECKOV_VENV)/bin/checkov infra

# dist/functionapp.zip: what `func azure functionapp publish` / azd upload (.funcignore applied, the lock as
# requirements.txt); dist/functionapp/ holds the same files unpacked (azd deploys that folder).
package: install-dev
	$(PY) -m deploy.package

# Re-resolve requirements.txt into requirements.lock (keeps existing pins; `make lock UPGRADE=1` takes new releases).
lock:
	@[ -x $(UV_VENV)/bin/uv ] || { $(PYTHON) -m venv $(UV_VENV) && $(UV_VENV)/bin/python -m pip install $(PIP_FLAGS) uv==$(UV_VERSION); }
	sed '/^-c /d' requirements.txt > .requirements-ranges.txt  # the ranges alone: the constraints are the old lock
	$(UV_VENV)/bin/uv pip compile .requirements-ranges.txt --universal --python-version 3.11 --generate-hashes \
		--quiet --custom-compile-command "make lock" $(if $(UPGRADE),--upgrade) -o requirements.lock
	rm -f .requirements-ranges.txt
	$(MAKE) $(LOCK_CONSTRAINTS)

lint: install-dev
	$(PY) -m ruff check .

bench: install-dev
	$(PY) -m bench
