"""Copied as `sitecustomize.py` into a directory on the worker processes' PYTHONPATH (test_worker_start_deaths.py):
a worker process dies during its handshake while deaths are left.

Python imports `sitecustomize` at every start (neither virtual environment has one of its own to shadow). This one
records the process (`started/<pid>`) and puts a finder first on `sys.meta_path`: when the worker library imports
the app's module (`function_app`, in its handling of the host's `WorkerInitRequest`, so after the worker connected
and the host accepted it), the process takes one death, if any is left, and exits at once with code 3, as a worker
that crashes in its start does. Deaths are the files in `markers/`: taking one is removing it, which exactly one
process can do (`os.remove` raises FileNotFoundError for the others), so concurrent workers never take the same one.
Each death is recorded (`died/<pid>`) before exiting. The state directory is `DEVHOST_TEST_DEATHS_DIR`.

With `DEVHOST_TEST_DEATHS_HOLD` set, a process that finds no death left records it (`held/<pid>`) and holds its
handshake until the host's worker listener (`--connect`) refuses connections, i.e. until the pool has closed (bounded:
HOLD_SECONDS), then goes on: its start completes after the pool closed.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any

STATE_VARIABLE = "DEVHOST_TEST_DEATHS_DIR"
HOLD_VARIABLE = "DEVHOST_TEST_DEATHS_HOLD"
HOLD_SECONDS = 60.0
APP_MODULE = "function_app"
EXIT_CODE = 3


def _record(state: str, kind: str) -> None:
    with open(os.path.join(state, kind, str(os.getpid())), "w"):
        pass


def _take_death(state: str) -> bool:
    markers = os.path.join(state, "markers")
    for name in sorted(os.listdir(markers)):
        try:
            os.remove(os.path.join(markers, name))
        except FileNotFoundError:
            continue  # another worker took this one
        return True
    return False


def _host_listening() -> bool:
    host, _, port = sys.argv[sys.argv.index("--connect") + 1].rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()  # the host closes a connection without hello
    except OSError:
        return False
    return True


def _hold_until_the_pool_closes() -> None:
    deadline = time.monotonic() + HOLD_SECONDS
    while _host_listening() and time.monotonic() < deadline:
        time.sleep(0.05)


class DieOnAppImport:
    def __init__(self, state: str) -> None:
        self.state = state

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == APP_MODULE and path is None:
            sys.meta_path.remove(self)  # one decision per process
            if _take_death(self.state):
                _record(self.state, "died")
                os._exit(EXIT_CODE)
            if os.environ.get(HOLD_VARIABLE):
                _record(self.state, "held")
                _hold_until_the_pool_closes()
        return None  # the regular finders import it


def install() -> None:
    state = os.environ.get(STATE_VARIABLE)
    if state:
        _record(state, "started")
        sys.meta_path.insert(0, DieOnAppImport(state))


install()
