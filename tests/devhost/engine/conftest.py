"""Engine test fixtures: open a DurableEngine on a sample app with a virtual clock, closed at teardown.

With `DEVHOST_WORKER=runtime` (Python 3.13+, `make test-py313`), the app runs in real-worker processes
(devhost.worker): the same tests then check the samples through Azure's worker library.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
from engine_helpers import APPS, START, OpenEngine

from devhost.app_loader import load_app
from devhost.engine.api import Clock, DurableEngine, EngineOptions, VirtualClock
from devhost.host import use_real_worker
from devhost.worker.pool import RuntimeWorkerPool


@pytest.fixture
async def open_engine() -> AsyncIterator[OpenEngine]:
    """`await open_engine("chaining", state_path=..., options=..., auto_skip=False)` -> DurableEngine."""
    engines: list[DurableEngine] = []
    pools: list[RuntimeWorkerPool] = []

    async def _open(app: str, *, state_path: str = ":memory:", options: EngineOptions | None = None,
                    auto_skip: bool = False, clock: Clock | None = None) -> DurableEngine:
        pool = None
        if use_real_worker(APPS / app, os.environ.get("DEVHOST_WORKER") or "inprocess"):
            pool = await RuntimeWorkerPool.start(APPS / app, 1)
            pools.append(pool)
            index = pool.index
        else:
            index = load_app(APPS / app)
        engine = await DurableEngine.open(index, state_path=state_path, options=options,
                                          clock=clock or VirtualClock(START, auto_skip=auto_skip),
                                          functions=pool)
        engines.append(engine)
        return engine

    yield _open
    for engine in engines:
        if not engine.crashed:
            await engine.close()
    for pool in pools:
        await pool.close()
