"""Decisions, duplicates, cancels, the deadline and host crashes in random order (seeded, so a failure replays).

Each scenario starts a run that asks for 2-4 approvals, then sends random groups of actions at once: approve or
reject an approval (sometimes the same decision twice, sometimes a conflicting one), cancel the run, move the
virtual clock past the deadline. Some scenarios run on an engine that dies at a random commit step; a new host then
reopens the same state and store files and the actions go on. Whatever happened, the invariants hold:
- the run ends (completed or cancelled), and the view and the store agree on how;
- each approval is decided at most once, as the first decision the API accepted, and the conversation holds exactly
  one decision per approval;
- each approved email is sent at most once, and exactly once when the run completed; nothing rejected is sent.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import httpx
import pytest
from load_helpers import PROGRESS_TIMEOUT_S, app_store
from load_invariants import assert_conversation_sound, contents

from bench.workload.brain import emails_prompt
from bench.workload.client import async_client, poll, request, session_messages, start_run
from bench.workload.host import workload_host
from devhost.engine.api import EngineOptions, FaultPlan
from devhost.testing import InProcessHost
from scripted_model.server import ScriptedModelServer

SCENARIOS = 16
CRASH_POINTS = ["episode_before_commit", "episode_after_commit", "activity_before_commit"]
DEADLINE_S = 86400  # the default approval timeout
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def plan(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    count = rng.randint(2, 4)
    actions: list[tuple[str, int, str]] = []
    for index in range(count):
        if rng.random() < 0.8:
            decision = rng.choice(["approve", "reject"])
            actions.append(("decide", index, decision))
            if rng.random() < 0.3:  # the same again (a retry), or the other one (a second person)
                other = "approve" if decision == "reject" else "reject"
                actions.append(("decide", index, rng.choice([decision, other])))
    if rng.random() < 0.25:
        actions.append(("cancel", -1, ""))
    if rng.random() < 0.3:
        actions.append(("deadline", -1, ""))
    rng.shuffle(actions)
    groups: list[list[tuple[str, int, str]]] = []
    while actions:  # consecutive actions sent at the same moment
        size = rng.randint(1, len(actions))
        groups.append(actions[:size])
        actions = actions[size:]
    crash = rng.choice(CRASH_POINTS) if rng.random() < 0.4 else None
    return {"count": count, "groups": groups, "crash": crash, "crash_after": rng.randint(3, 9)}


class Scenario:
    """The app on devhost with file state, and what the API accepted."""

    def __init__(self, model_url: str, tmp_path: Path, seed: int) -> None:
        self.model_url = model_url
        self.state, self.store = str(tmp_path / "engine.sqlite3"), str(tmp_path / "sessions.sqlite3")
        self.plan = plan(seed)
        self.accepted: dict[str, str] = {}  # approval id -> the first decision the API stored for it

    def host(self, *, faults: bool) -> Any:
        options = None
        if faults and self.plan["crash"]:
            crash = FaultPlan(crash_at={self.plan["crash"]}, crash_after=self.plan["crash_after"])
            options = EngineOptions(faults=crash)
        return workload_host(self.model_url, store_path=self.store, state_path=self.state, clock="virtual",
                             options=options)

    async def act(self, host: InProcessHost, view: dict[str, Any], action: tuple[str, int, str]) -> None:
        kind, index, decision = action
        async with async_client(host.base_url) as client:
            if kind == "decide":
                approval_id = view["pending_approvals"][index]["approval_id"]
                url = f"/api/runs/{view['run_id']}/approvals/{approval_id}"
                response = await request(client, "POST", url, json={"decision": decision})
                if response.status_code in (202, 503):  # 503: stored, not yet delivered
                    self.accepted.setdefault(approval_id, "approved" if decision == "approve" else "rejected")
                else:
                    assert response.status_code in (409, 410), response.text
            elif kind == "cancel":
                response = await request(client, "POST", f"/api/runs/{view['run_id']}/cancel")
                # 503 `cancel_not_delivered`: flagged, its event refused by a dying engine (a poll rings it again)
                assert response.status_code in (202, 409) or response.json()["code"] == "cancel_not_delivered", (
                    response.text)
            else:
                host.clock.advance(DEADLINE_S + 1)  # the approval timer fires (virtual clock)


async def _view(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    response = await request(client, "GET", f"/api/runs/{run_id}")
    return response.json()


@pytest.mark.parametrize("seed", range(SCENARIOS))
async def test_random_interleavings_keep_every_decision_once(
    model_server: ScriptedModelServer, tmp_path: Path, seed: int
) -> None:
    scenario = Scenario(model_server.base_url, tmp_path, seed)
    addresses = [f"person{i}@example.com" for i in range(scenario.plan["count"])]
    host_cm = scenario.host(faults=True)
    host = host_cm.__enter__()
    try:
        async with async_client(host.base_url) as client:
            view = await start_run(client, emails_prompt(addresses))
        while len(view.get("pending_approvals") or []) < scenario.plan["count"]:
            if host.engine.crashed:  # the crash came before the approvals were requested
                host_cm.__exit__(None, None, None)
                host_cm = scenario.host(faults=False)
                host = host_cm.__enter__()
            async with async_client(host.base_url) as client:
                view, _ = await poll(client, view, until=frozenset({"requires_action"}), deadline_s=5, wait_seconds=0.5)
            # a view taken while the engine was dying may still be in progress: poll again
        for group in scenario.plan["groups"]:
            if host.engine.crashed:  # a new host on the same files, as after a kill
                host_cm.__exit__(None, None, None)
                host_cm = scenario.host(faults=False)
                host = host_cm.__enter__()
            await asyncio.gather(*(scenario.act(host, view, action) for action in group))
        if host.engine.crashed or scenario.plan["crash"]:
            host_cm.__exit__(None, None, None)
            host_cm = scenario.host(faults=False)
            host = host_cm.__enter__()
        host.clock.advance(2 * DEADLINE_S)  # whatever nobody decided times out: every run ends
        async with async_client(host.base_url) as client:
            final, _ = await poll(client, view, deadline_s=PROGRESS_TIMEOUT_S)
            messages = await session_messages(client, view["session_id"])
            approvals = (await request(client, "GET", f"/api/runs/{view['run_id']}/approvals")).json()["approvals"]
            again = await _view(client, view["run_id"])
        store = app_store(host)
        stored_run = host.run(store.get_run(view["run_id"]))
        sent = [e.payload["to"] for e in host.run(store.list_effects(view["session_id"], kind="email"))]
    finally:
        host_cm.__exit__(None, None, None)

    context = {"seed": seed, "plan": scenario.plan, "final": final["status"]}
    assert final["status"] in ("completed", "cancelled"), (context, final)
    assert (again["status"], stored_run.status) == (final["status"], final["status"]), context
    assert again["pending_approvals"] == [], context
    statuses = {a["approval_id"]: a["status"] for a in approvals}
    for approval_id, decision in scenario.accepted.items():
        assert statuses[approval_id] == decision, (context, approval_id, statuses)
    assert all(status in ("approved", "rejected", "expired") for status in statuses.values()), (context, statuses)
    responses = [c["id"] for c in contents(messages, "function_approval_response")]
    assert len(responses) == len(set(responses)), (context, responses)
    if final["status"] == "completed":
        assert sorted(responses) == sorted(statuses), context
    assert_conversation_sound(messages)
    approved_to = {a["arguments"]["to"] for a in approvals if a["status"] == "approved"}
    assert len(sent) == len(set(sent)), (context, sent)
    assert set(sent) <= approved_to, (context, sent, approved_to)
    if final["status"] == "completed":
        assert set(sent) == approved_to, (context, sent, approved_to)
