"""Shared pieces of the testing hosts: loopback HTTP clients, free ports, status-name handling."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from pathlib import Path

import httpx

from devhost.engine.api import RuntimeStatus

StatusNames = Iterable[str | RuntimeStatus] | str | RuntimeStatus
TERMINAL = ("Completed", "Failed", "Terminated", "Canceled")
# Default bound of `wait_for_status` / `wait_until_idle`. It only limits how long a failing test waits, so it is
# generous: a loaded 2-core CI machine runs orchestrations several times slower than a developer's laptop.
DEFAULT_WAIT_SECONDS = 60.0
STATUS_PATH = "/runtime/webhooks/durabletask/instances/{}"
DEVHOST_DIR = Path(__file__).resolve().parent.parent
# The directory that holds the `devhost` package (put on PYTHONPATH of child processes).
PACKAGE_ROOT = str(DEVHOST_DIR.parent)


class HostStartError(RuntimeError):
    """The app could not be started (the message carries the host's own error output)."""


def loopback_client(base_url: str) -> httpx.Client:
    """Plain HTTP to 127.0.0.1: no TLS context to build (saves ~60 ms per client) and no proxy from the environment."""
    return httpx.Client(base_url=base_url, timeout=60, verify=False, trust_env=False)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def status_names(statuses: StatusNames | None) -> set[str]:
    if statuses is None:
        return set(TERMINAL)
    if isinstance(statuses, str | RuntimeStatus):
        statuses = [statuses]
    return {str(RuntimeStatus(s).value) for s in statuses}
