"""Hold a step of the app inside one of its store calls, wherever the app runs (the test side of
`fixture_agents.store_pause`, which the app installs in every process that runs it).

`paused(app, "put_approvals")` arms the pause: the next matching call completes, then waits until the block ends (or
`release()`), so the step is exactly in flight while the test acts. `equal` / `among` (one of several values) /
`absent` narrow which calls match (by the names of the store method's parameters). Only the timing changes: the store
and its data are the app's own.
`failing(app.host, "record_effect", equal={"kind": ...})` makes the matching calls raise instead (the store
unreachable for them), until the block ends; `outage=True` raises what the store raises for an outage
(`StoreUnavailableError`, which the app waits out) instead of a connection error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from e2e_harness import wait_for_file
from fixture_agents.store_pause import FAILING, MARKER_DIR_SETTING, PAUSABLE, pause_dir


class _Host(Protocol):
    env: dict[str, str]


class _App(Protocol):
    """An app under test, in this process or a child one: its host carries the app's settings."""

    @property
    def host(self) -> _Host: ...


class StepPause:
    def __init__(self, folder: Path, method: str) -> None:
        self._folder = folder
        self._method = method

    def wait_reached(self) -> None:
        """Block until a matching call completed and is holding (bounded)."""
        wait_for_file(self._folder / f"{self._method}.reached")

    def release(self) -> None:
        (self._folder / f"{self._method}.released").touch()


@contextmanager
def paused(app: _App, method: str, *, equal: dict[str, Any] | None = None,
           absent: tuple[str, ...] = ()) -> Iterator[StepPause]:
    folder = _folder(app.host, method)
    for leftover in (f"{method}.reached", f"{method}.released"):
        (folder / leftover).unlink(missing_ok=True)
    armed = _arm(folder / f"{method}.json", equal, absent)
    pause = StepPause(folder, method)
    try:
        yield pause
    finally:
        pause.release()
        armed.unlink(missing_ok=True)


@contextmanager
def failing(host: _Host, method: str, *, equal: dict[str, Any] | None = None,
            among: dict[str, list[Any]] | None = None, absent: tuple[str, ...] = (),
            outage: bool = False) -> Iterator[None]:
    """The matching calls of the store method raise (the store unreachable for them) until the block ends."""
    armed = _arm(_folder(host, method) / f"{method}{FAILING}.json", equal, absent, among, outage=outage)
    try:
        yield
    finally:
        armed.unlink(missing_ok=True)


def _folder(host: _Host, method: str) -> Path:
    assert method in PAUSABLE, f"{method} is not one of the pausable store methods {PAUSABLE}"
    folder = pause_dir(Path(host.env[MARKER_DIR_SETTING]))
    folder.mkdir(exist_ok=True)
    return folder


def _arm(armed: Path, equal: dict[str, Any] | None, absent: tuple[str, ...],
         among: dict[str, list[Any]] | None = None, *, outage: bool = False) -> Path:
    written = armed.with_name(armed.name + ".tmp")
    spec = {"equal": equal or {}, "among": among or {}, "absent": list(absent), "outage": outage}
    written.write_text(json.dumps(spec))
    written.replace(armed)  # atomic: the app never reads half a spec
    return armed
