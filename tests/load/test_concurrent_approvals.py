"""200 concurrent runs that each wait for an approval, over HTTP: none lost, none stuck, each approval applied once.

Run with every function in the host process, and with activity and HTTP functions in two worker processes sharing
the SQLite store file (the `FUNCTIONS_WORKER_PROCESS_COUNT` set-up that lets one devhost use both cores).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from load_helpers import app_store, tool_executions

from bench.workload.brain import email_prompt, emails_prompt
from bench.workload.client import async_client, decide_all, poll, session_messages, start_run
from bench.workload.host import REPO_ROOT, app_env, workload_host
from devhost.testing import SubprocessHost
from scripted_model.server import ScriptedModelServer
from session_store import StoreSettings, open_store

RUNS = int(os.environ.get("LOAD_TEST_RUNS", "200"))  # 200 is the requirement; fewer only to debug
# ~20 s on an idle 2-core machine, ~80 s with four other CPU-bound processes: the timeout only bounds a hang.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def _one_user(base_url: str, index: int) -> dict[str, Any]:
    """One user with a client of their own: one shared pool of 200 waiting requests spends most of the test's CPU in
    httpcore's connection assignment (it scans every connection for every queued request), which is the test
    client's cost, not the app's, and made the test's duration swing 2-3x with scheduling."""
    async with async_client(base_url, connections=1) as client:
        return await _one_run(client, index)


async def _one_run(client: httpx.AsyncClient, index: int) -> dict[str, Any]:
    view = await start_run(client, email_prompt(f"user{index}@example.com"))
    view, seen = await poll(client, view, until=frozenset({"requires_action", "completed", "failed", "cancelled"}),
                            deadline_s=120)
    assert view["status"] == "requires_action", view
    assert len(view["pending_approvals"]) == 1
    assert await decide_all(client, view) == 1
    # A second decision on the same approval is refused: it is applied once.
    pending = view["pending_approvals"][0]
    again = await client.post(f"/api/runs/{view['run_id']}/approvals/{pending['approval_id']}",
                              json={"decision": "reject"})
    assert again.status_code == 409 and again.json()["code"] == "approval_already_decided"
    final, more = await poll(client, view, deadline_s=120)
    seen += more[len(view["updates"]):]  # `poll` starts from the view it is given
    await _assert_updates_seen_once(client, final, seen)
    return final


async def _assert_updates_seen_once(client: httpx.AsyncClient, final: dict[str, Any], seen: list[dict]) -> None:
    """Following the continuation tokens, the client saw each message of its run exactly once, in order."""
    seqs = [update["seq"] for update in seen]
    assert seqs == sorted(set(seqs)), f"updates repeated or out of order: {seqs}"
    stored = [m["seq"] for m in await session_messages(client, final["session_id"]) if m["run_id"] == final["run_id"]]
    assert seqs == stored, (seqs, stored)


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "2-workers"])
async def test_200_concurrent_runs_with_approvals(
    model_server: ScriptedModelServer, store_path: str, workers: int
) -> None:
    with workload_host(model_server.base_url, store_path=store_path, workers=workers) as host:
        finals = await asyncio.gather(*(_one_user(host.base_url, i) for i in range(RUNS)))
        async with async_client(host.base_url) as client:
            assert [f["status"] for f in finals].count("completed") == RUNS, {f["status"] for f in finals}
            approvals = await asyncio.gather(
                *(client.get(f"/api/runs/{f['run_id']}/approvals") for f in finals)
            )
        for final, listed in zip(finals, approvals, strict=True):
            records = listed.json()["approvals"]
            assert [r["status"] for r in records] == ["approved"], records
            text = final["output"]["text"]  # the model quotes the tool's result
            assert "sent" in text and "already_sent" not in text, text
        store = app_store(host)
        effects = [host.run(store.list_effects(f["session_id"], kind="email")) for f in finals]
        assert all(len(e) == 1 for e in effects), "every approved email took effect exactly once"
        assert sorted(e[0].payload["to"] for e in effects) == sorted(f"user{i}@example.com" for i in range(RUNS))
        if not workers:  # the raw execution counter lives in the process that ran the tools
            executions = tool_executions()
            assert len(executions) == RUNS and set(executions.values()) == {1}


APPROVALS_PER_RUN = 3


async def _three_approvals(base_url: str, index: int) -> dict[str, Any]:
    """One user whose run asks for three approvals, decided by three people at the same moment."""
    addresses = [f"user{index}.{k}@example.com" for k in range(APPROVALS_PER_RUN)]
    async with async_client(base_url, connections=APPROVALS_PER_RUN) as client:
        view = await start_run(client, emails_prompt(addresses))
        view, _ = await poll(client, view, until=frozenset({"requires_action"}), deadline_s=120)
        assert len(view["pending_approvals"]) == APPROVALS_PER_RUN, view
        urls = [f"/api/runs/{view['run_id']}/approvals/{p['approval_id']}" for p in view["pending_approvals"]]
        responses = await asyncio.gather(*(client.post(url, json={"decision": "approve"}) for url in urls))
        assert [r.status_code for r in responses] == [202] * APPROVALS_PER_RUN
        final, _ = await poll(client, view, deadline_s=120)
        return final


async def test_200_runs_with_three_approvals_each_decided_at_once(
    model_server: ScriptedModelServer, store_path: str
) -> None:
    with workload_host(model_server.base_url, store_path=store_path) as host:
        finals = await asyncio.gather(*(_three_approvals(host.base_url, i) for i in range(RUNS)))
        assert [f["status"] for f in finals].count("completed") == RUNS, {f["status"] for f in finals}
        store = app_store(host)
        for index, final in enumerate(finals):
            sent = [e.payload["to"] for e in host.run(store.list_effects(final["session_id"], kind="email"))]
            assert sorted(sent) == [f"user{index}.{k}@example.com" for k in range(APPROVALS_PER_RUN)], sent
        executions = tool_executions()
        assert len(executions) == RUNS * APPROVALS_PER_RUN and set(executions.values()) == {1}


async def test_200_runs_with_approvals_survive_a_host_kill(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    """devhost is SIGKILLed while 200 runs wait for (and receive) their decisions; started again on the same state,
    every run completes and every approved email was sent once: 0 lost, 0 stuck, 0 duplicated."""
    store = str(tmp_path / "sessions.sqlite3")
    host = SubprocessHost(REPO_ROOT, state_path=tmp_path / "devhost.sqlite3", env=app_env(model_server.base_url, store))
    host.start()
    try:
        async with async_client(host.base_url) as client:
            starts = (start_run(client, email_prompt(f"user{i}@example.com")) for i in range(RUNS))
            views = await asyncio.gather(*starts)
            waiting = [(await poll(client, v, until=frozenset({"requires_action"}), deadline_s=120))[0] for v in views]
            half = RUNS // 2
            assert sum(await asyncio.gather(*(decide_all(client, v) for v in waiting[:half]))) == half
        host.kill()  # some of those decisions are applied, some are in flight, the rest are not made yet
        host.start()
        async with async_client(host.base_url) as client:
            assert sum(await asyncio.gather(*(decide_all(client, v) for v in waiting[half:]))) == RUNS - half
            finals = await asyncio.gather(*(poll(client, v, deadline_s=180) for v in waiting))
    finally:
        host.stop()
    assert [final["status"] for final, _ in finals].count("completed") == RUNS
    sent = await _emails_sent(store)
    assert sorted(sent) == sorted(f"user{i}@example.com" for i in range(RUNS)), "each approved email sent once"


async def _emails_sent(store_path: str) -> list[str]:
    """Every email the app recorded as sent, read from its store file by this process."""
    store = open_store(StoreSettings.model_validate({"SESSION_STORE_PATH": store_path}))
    try:
        sent: list[str] = []
        page = await store.list_sessions(limit=1000)
        for session in page.items:
            sent += [e.payload["to"] for e in await store.list_effects(session.session_id, kind="email")]
        return sent
    finally:
        await store.close()
