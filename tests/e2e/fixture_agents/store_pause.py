"""The app side of `step_pause.StepPause`: hold one store call of the app in flight, in whichever process runs it.

The app imports this package (`AGENTS_PACKAGE=fixture_agents`) in every process that runs its functions: the test's
own (devhost in-process) or the worker processes of Azure's worker library (real-worker mode). Importing it wraps
the store methods in `PAUSABLE` on both store classes. A wrapped call looks for `<E2E_MARKER_DIR>/pause/<method>.json`,
written by the test; when it is there and the call's arguments match it, the call completes, then writes
`<method>.reached` and waits for `<method>.released`. A `<method>.fail.json` instead makes a matching call raise
before it reaches the store (the store unreachable for it: a connection error, or with `"outage": true` what the
store raises for an outage), for as long as the file is there. Without the files the
call goes straight through, so the tests that pause nothing see the store unchanged. Files, not events: the two
sides may be different processes.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

MARKER_DIR_SETTING = "E2E_MARKER_DIR"
PAUSE_DIR = "pause"
PAUSABLE = (
    "put_approvals", "list_approvals", "decide_approval", "escalate_approval", "finish_run", "reopen_run", "get_run",
    "record_effect",
)
FAILING = ".fail"
HOLD_LIMIT_S = 120.0  # a test that never releases fails by its own timeout; the step then goes on
_WRAPPED = "__e2e_store_pause__"


def pause_dir(marker_dir: Path) -> Path:
    return marker_dir / PAUSE_DIR


def _armed(method: str, mode: str = "") -> tuple[Path, dict[str, Any]] | None:
    marker_dir = os.environ.get(MARKER_DIR_SETTING)
    if not marker_dir:
        return None
    folder = pause_dir(Path(marker_dir))
    try:
        spec = json.loads((folder / f"{method}{mode}.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):  # not armed, or being written: a call then goes through
        return None
    return folder, spec


def _matches(spec: dict[str, Any], arguments: dict[str, Any]) -> bool:
    """`equal`: arguments the call passed with these values; `among`: with one of these values; `absent`: arguments
    it did not pass."""
    equal_ok = all(arguments.get(name) == value for name, value in spec.get("equal", {}).items())
    among_ok = all(arguments.get(name) in values for name, values in spec.get("among", {}).items())
    return equal_ok and among_ok and not any(name in arguments for name in spec.get("absent", []))


async def _hold(folder: Path, method: str) -> None:
    released = folder / f"{method}.released"
    if released.exists():
        return
    (folder / f"{method}.reached").touch()
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not released.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)  # another process writes the release file: there is no event to wait on


def _pausable(method: str, original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        failing = _armed(method, FAILING)
        if failing is not None and _matches(failing[1], signature.bind(self, *args, **kwargs).arguments):
            if failing[1].get("outage"):
                from session_store import StoreUnavailableError

                raise StoreUnavailableError(f"Cosmos DB request failed: HTTP 503 (for {method}: a test says so)")
            raise ConnectionError(f"the store is unreachable (for {method}: a test says so)")
        result = await original(self, *args, **kwargs)
        armed = _armed(method)
        if armed is not None:
            folder, spec = armed
            if _matches(spec, signature.bind(self, *args, **kwargs).arguments):
                await _hold(folder, method)
        return result

    setattr(call, _WRAPPED, True)
    return call


def install() -> None:
    from session_store.cosmos_store import CosmosSessionStore
    from session_store.sqlite_store import SqliteSessionStore

    for store_class in (SqliteSessionStore, CosmosSessionStore):
        for method in PAUSABLE:
            original = getattr(store_class, method)
            if not getattr(original, _WRAPPED, False):
                setattr(store_class, method, _pausable(method, original))
