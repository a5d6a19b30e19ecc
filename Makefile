# The two commands of the README: `make run` (the app on devhost, offline) and `make test` (every test).
PYTHON ?= python3

.PHONY: install run test lint bench

install:
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error; fi

run: install
	$(PYTHON) -m devhost

test: install
	$(PYTHON) -m pytest

lint:
	$(PYTHON) -m ruff check .

bench: install
	$(PYTHON) -m bench
