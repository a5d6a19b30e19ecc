"""A terminate that arrives while an instance's first episode waits out its retry back-off (the episode was aborted,
e.g. past functionTimeout) is processed with the redelivered ExecutionStarted, as the extension's backends lock an
instance with all its messages; DTFx never writes a history that lacks ExecutionStarted (TaskOrchestrationDispatcher
drops such a work item: ReconcileMessagesWithState, a runtime state of only OrchestratorStarted).

Real parts: the real SDK through devhost's engine, a virtual clock (the back-off passes without sleeping).
"""

from __future__ import annotations

import pytest
from engine_helpers import OpenEngine, raw_history

from devhost.engine.api import EngineOptions, RuntimeStatus
from devhost.engine.episodes import EpisodeAbortedError, EpisodeProcessor
from devhost.protocol.events import EventType


async def test_a_terminate_during_the_first_episodes_back_off_leaves_a_well_formed_history(
    open_engine: OpenEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    invoke = EpisodeProcessor._invoke
    calls = 0

    async def aborted_once(self: EpisodeProcessor, *args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 1:  # as a functionTimeout or a dead worker aborts it
            raise EpisodeAbortedError("Timeout value of 00:00:01 was exceeded by function: Functions.chaining")
        return await invoke(self, *args, **kwargs)

    monkeypatch.setattr(EpisodeProcessor, "_invoke", aborted_once)
    engine = await open_engine("chaining", options=EngineOptions(episode_retry_seconds=10))
    iid = await engine.start_new("chaining", "t1", None)
    await engine.run_until_idle()  # the first episode is aborted; its ExecutionStarted waits out the back-off
    assert calls == 1
    await engine.terminate("t1", "stop")
    await engine.run_until_idle()
    await engine.advance(10)
    await engine.run_until_idle()

    status = await engine.get_status(iid)
    assert status is not None and status.runtime_status == RuntimeStatus.Terminated
    assert status.to_json()["output"] == "stop"
    types = [EventType(e["EventType"]).name for e in raw_history(engine, iid)]
    assert types == ["OrchestratorStarted", "ExecutionStarted", "ExecutionTerminated", "OrchestratorCompleted",
                     "ExecutionCompleted"]
    assert calls == 1  # terminated before its code ran again
