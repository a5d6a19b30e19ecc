"""The fault matrix on devhost: each run completes or fails with a clear reason; no duplicated message or effect.

Faults: duplicate activity delivery and reordered completions (the engine's `FaultPlan`), crash and restart at each
commit step (a new host reopens the same engine state and session store files), model 429/500 bursts with
`Retry-After` (the scripted model), a tool that never answers (its timeout). Cosmos 429/503: test_cosmos_faults.py.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from load_helpers import PROGRESS_TIMEOUT_S, app_store, tool_executions
from load_invariants import assert_conversation_sound, contents, final_texts

from bench.workload.brain import WorkloadBrain, email_prompt, parallel_prompt, steps_prompt
from bench.workload.client import async_client, decide_all, poll, session_messages, start_run
from bench.workload.host import workload_host
from devhost.engine.api import EngineOptions, FaultPlan
from devhost.testing import InProcessHost
from scripted_model.script import Fault
from scripted_model.server import ScriptedModelServer

FAST_MODEL_RETRIES = {"MODEL_RETRY_INITIAL_DELAY": "0.01", "MODEL_RETRY_MAX_DELAY": "0.05"}
CRASH_POINTS = [f"{step}_{when}_commit" for step in ("episode", "activity") for when in ("before", "after")]


async def _run_to_end(host: InProcessHost, prompt: str, *, approve: bool = False) -> tuple[dict, list[dict]]:
    async with async_client(host.base_url) as client:
        view = await start_run(client, prompt)
        if approve:
            view, _ = await poll(client, view, until=frozenset({"requires_action"}), deadline_s=PROGRESS_TIMEOUT_S)
            await decide_all(client, view)
        final, _ = await poll(client, view, deadline_s=PROGRESS_TIMEOUT_S)
        return final, await session_messages(client, final["session_id"])


def _effects(host: InProcessHost, session_id: str, kind: str) -> list[Any]:
    return host.run(app_store(host).list_effects(session_id, kind=kind))


@pytest.mark.parametrize(
    "faults",
    [
        FaultPlan(duplicate_activity_results=True),
        FaultPlan(reorder_completions=True, batch_completions=3, seed=7),
        FaultPlan(duplicate_activity_results=True, reorder_completions=True, batch_completions=2, seed=11),
    ],
    ids=["duplicate", "reorder", "duplicate+reorder"],
)
async def test_delivery_faults_change_nothing(
    model_server: ScriptedModelServer, store_path: str, faults: FaultPlan
) -> None:
    with workload_host(model_server.base_url, store_path=store_path, options=EngineOptions(faults=faults)) as host:
        for prompt, kind, count in ((steps_prompt(3), "step", 3), (parallel_prompt(4), "step", 4)):
            final, messages = await _run_to_end(host, prompt)
            assert final["status"] == "completed", final
            assert_conversation_sound(messages)
            assert len(_effects(host, final["session_id"], kind)) == count
            assert len(contents(messages, "function_result")) == count
        final, messages = await _run_to_end(host, email_prompt("ops@example.com"), approve=True)
        assert final["status"] == "completed", final
        assert_conversation_sound(messages)
        assert len(_effects(host, final["session_id"], "email")) == 1


@pytest.mark.parametrize("point", CRASH_POINTS)
async def test_crash_and_restart_at_each_commit_step(
    model_server: ScriptedModelServer, tmp_path: Path, point: str
) -> None:
    state, store = str(tmp_path / "engine.sqlite3"), str(tmp_path / "sessions.sqlite3")
    faults = FaultPlan(crash_at={point}, crash_after=4)
    with workload_host(model_server.base_url, store_path=store, state_path=state,
                       options=EngineOptions(faults=faults)) as crashing:
        async with async_client(crashing.base_url) as client:
            started = await start_run(client, steps_prompt(3))
        await _until_crashed(crashing)
        executions = sum(tool_executions().values())  # this host's import of the tools, gone at its stop
    with workload_host(model_server.base_url, store_path=store, state_path=state) as reopened:
        async with async_client(reopened.base_url) as client:
            final, _ = await poll(client, started, deadline_s=PROGRESS_TIMEOUT_S)
            messages = await session_messages(client, started["session_id"])
        executions += sum(tool_executions().values())
        assert final["status"] == "completed", final
        assert_conversation_sound(messages)
        assert len(_effects(reopened, started["session_id"], "step")) == 3
        assert final_texts(messages)[-1] == "Recorded 3 steps."
    # The 4th activity is the 2nd tool call. Dying before the engine commits its completion delivers the activity
    # again (at-least-once), but the step finds the call's result already stored and does not run the tool again.
    assert executions == 3, executions


@pytest.mark.parametrize(("point", "after"), [
    ("activity_before_commit", 3),  # apply_decision done, its completion lost
    ("activity_before_commit", 4),  # send_email done, its completion lost
    ("episode_after_commit", 4),  # the episode that scheduled send_email committed, then the host died
])
async def test_crash_around_an_approved_tool_call_sends_once(
    model_server: ScriptedModelServer, tmp_path: Path, point: str, after: int
) -> None:
    state, store = str(tmp_path / "engine.sqlite3"), str(tmp_path / "sessions.sqlite3")
    faults = FaultPlan(crash_at={point}, crash_after=after)
    with workload_host(model_server.base_url, store_path=store, state_path=state,
                       options=EngineOptions(faults=faults)) as crashing:
        async with async_client(crashing.base_url) as client:
            view = await start_run(client, email_prompt("ops@example.com"))
            view, _ = await poll(client, view, until=frozenset({"requires_action"}), deadline_s=PROGRESS_TIMEOUT_S)
            assert await decide_all(client, view) == 1
        await _until_crashed(crashing)
        executions = sum(tool_executions().values())
    with workload_host(model_server.base_url, store_path=store, state_path=state) as reopened:
        async with async_client(reopened.base_url) as client:
            final, _ = await poll(client, view, deadline_s=PROGRESS_TIMEOUT_S)
            messages = await session_messages(client, view["session_id"])
            approvals = (await client.get(f"/api/runs/{view['run_id']}/approvals")).json()["approvals"]
        executions += sum(tool_executions().values())
        assert final["status"] == "completed", final
        assert_conversation_sound(messages)
        assert [a["status"] for a in approvals] == ["approved"]
        assert len(_effects(reopened, view["session_id"], "email")) == 1
    assert executions == 1, executions


async def _until_crashed(host: InProcessHost, deadline_s: float = PROGRESS_TIMEOUT_S) -> None:
    deadline = time.monotonic() + deadline_s
    while not host.engine.crashed:
        assert time.monotonic() < deadline, "the engine never reached the crash point"
        await _tick()


async def _tick() -> None:
    import asyncio

    await asyncio.sleep(0.02)  # polling a flag with a bounded deadline (the crash happens on the host's thread)


async def test_model_429_and_500_bursts_are_retried(model_server: ScriptedModelServer, store_path: str) -> None:
    with workload_host(model_server.base_url, store_path=store_path, env=FAST_MODEL_RETRIES) as host:
        model_server.reset(WorkloadBrain())
        model_server.fail_next(Fault.rate_limited(retry_after=0.05), times=2)
        model_server.fail_next(Fault.server_error(500), times=1)
        final, messages = await _run_to_end(host, steps_prompt(2))
        assert final["status"] == "completed", final
        assert [r.status for r in model_server.log.requests][:4] == [429, 429, 500, 200]
        assert_conversation_sound(messages)
        assert len(_effects(host, final["session_id"], "step")) == 2


@pytest.mark.parametrize(
    ("fault", "times", "reason"),
    # A refusal is the model's answer, shown as is; a server error that outlasts the retries is an internal failure:
    # a stable code and a safe message (the exception text goes to the log, never to the client).
    [(Fault.bad_request("this model refuses the request"), 1, "refuses"),
     (Fault.server_error(503), 40, "model_call_failed")],
    ids=["400-fails-fast", "503-outlasts-retries"],
)
async def test_model_failing_for_good_fails_the_run_with_a_clear_reason(
    model_server: ScriptedModelServer, store_path: str, fault: Fault, times: int, reason: str
) -> None:
    with workload_host(model_server.base_url, store_path=store_path, env=FAST_MODEL_RETRIES) as host:
        model_server.reset(WorkloadBrain())
        model_server.fail_next(fault, times=times)
        final, messages = await _run_to_end(host, steps_prompt(1))
        model_server.reset(WorkloadBrain())
        assert final["status"] == "failed", final
        assert final["error"] and reason in f'{final["error"]["code"]} {final["error"]["message"]}', final["error"]
        assert "Activity function" not in final["error"]["message"] and "Error:" not in final["error"]["message"]
        assert_conversation_sound(messages)


async def test_a_tool_that_never_answers_times_out_and_the_run_goes_on(
    model_server: ScriptedModelServer, store_path: str
) -> None:
    with workload_host(model_server.base_url, store_path=store_path) as host:
        final, messages = await _run_to_end(host, "stuck")
        assert final["status"] == "completed", final
        assert_conversation_sound(messages)
        [result] = contents(messages, "function_result")
        assert "did not finish within" in str(result), result
        assert "did not finish within" in final_texts(messages)[-1]
