"""Engine test fixtures: open a DurableEngine on a sample app with a virtual clock, closed at teardown."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from engine_helpers import APPS, START, OpenEngine

from devhost.app_loader import load_app
from devhost.engine.api import Clock, DurableEngine, EngineOptions, VirtualClock


@pytest.fixture
async def open_engine() -> AsyncIterator[OpenEngine]:
    """`await open_engine("chaining", state_path=..., options=..., auto_skip=False)` -> DurableEngine."""
    engines: list[DurableEngine] = []

    async def _open(app: str, *, state_path: str = ":memory:", options: EngineOptions | None = None,
                    auto_skip: bool = False, clock: Clock | None = None) -> DurableEngine:
        index = load_app(APPS / app)
        engine = await DurableEngine.open(index, state_path=state_path, options=options,
                                          clock=clock or VirtualClock(START, auto_skip=auto_skip))
        engines.append(engine)
        return engine

    yield _open
    for engine in engines:
        if not engine.crashed:
            await engine.close()
