"""Helpers shared by the engine tests."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from devhost.engine.api import DurableEngine, InstanceStatus

APPS = Path(__file__).resolve().parent.parent / "apps"
START = datetime(2030, 1, 1, tzinfo=UTC)

OpenEngine = Callable[..., Awaitable[DurableEngine]]


async def run(engine: DurableEngine, name: str, payload: object = None, *, instance_id: str | None = None,
              skip_timers: bool = True) -> InstanceStatus:
    """Start `name` with `payload` (sent as the Python client does: a JSON string literal of json.dumps) and run
    until idle, skipping timers."""
    input_json = None if payload is None else json.dumps(json.dumps(payload))
    iid = await engine.start_new(name, instance_id, input_json)
    await engine.run_until_idle(skip_timers=skip_timers)
    status = await engine.get_status(iid)
    assert status is not None
    return status


def output(status: InstanceStatus) -> object:
    return status.to_json()["output"]


def raw_history(engine: DurableEngine, instance_id: str) -> list[dict]:
    """White-box: the stored DTFx history of the instance's current execution."""
    instance = engine._rt.instances[instance_id]
    engine._rt.episodes.ensure_history(instance)
    return instance.history or []
