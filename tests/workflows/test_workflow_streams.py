"""The live stream of a workflow run over HTTP (`GET /api/workflows/runs/{id}/stream`, read with `httpx-sse`):
finished steps arrive as `update` events exactly as polls list them, `status` events show the active step and the
progress of its child runs, the sign-off gate appears as a pending approval and the stream goes on after the
decision until `done`. The model is held (`hold_answers`) so the child run is certainly running when looked at."""

from __future__ import annotations

import time
from collections.abc import Iterator

from httpx_sse import ServerSentEvent, connect_sse
from workflow_helpers import PROGRESS_TIMEOUT_S, decide, start, view

from devhost.testing import InProcessHost
from scripted_model.server import ScriptedModelServer


def read_until(events: Iterator[ServerSentEvent], wanted) -> list[ServerSentEvent]:
    seen = []
    for event in events:
        seen.append(event)
        if wanted(event):
            return seen
    raise AssertionError(f"the stream ended first: {[e.event for e in seen]}")


def status_is(name: str):
    return lambda e: e.event == "status" and e.json()["status"] == name


def test_a_workflow_stream_shows_steps_child_runs_and_the_gate(host: InProcessHost, model: ScriptedModelServer) -> None:
    model.hold_answers()
    run_id = start(host, "review_pipeline", {"topic": "durable agents"})["run_id"]
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    while not model.log.requests:  # the writer's child run is at its model call
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with connect_sse(host.client, "GET", f"/api/workflows/runs/{run_id}/stream", timeout=PROGRESS_TIMEOUT_S) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        events = source.iter_sse()
        writing = read_until(events, lambda e: e.event == "status" and e.json()["child_runs"])
        status = writing[-1].json()
        assert status["status"] == "in_progress" and status["active_step"]["id"] == "write"
        [child] = status["child_runs"]
        assert child["run_id"] == status["active_step"]["child_runs"][0] and child["status"] == "in_progress"
        model.release_answers()
        waiting = read_until(events, status_is("requires_action"))
        [gate] = waiting[-1].json()["pending_approvals"]
        assert waiting[-1].json()["active_step"]["id"] == "sign_off"
        decide(host, run_id, gate["approval_id"])
        rest = read_until(events, lambda e: e.event == "done")

    everything = writing + waiting + rest
    steps = [e.json() for e in everything if e.event == "update"]
    assert [s["step"] for s in steps][:5] == ["write", "review", "needs_revision", "revise", "final"]
    assert steps == view(host, run_id)["steps"]  # as the poll lists them
    assert [s["seq"] for s in steps] == sorted({s["seq"] for s in steps})
    children = {c["run_id"] for e in everything if e.event == "status" for c in e.json()["child_runs"]}
    # Child runs seen running (the writer certainly, as the model was held) are those the finished steps name.
    assert child["run_id"] in children and children <= {r for s in steps for r in s["run_ids"]}
    done = rest[-1].json()
    assert done["status"] == "completed" and done["output"]["published"] is True
    # A finished workflow replays and ends; the agent-run stream route refuses a workflow run, before streaming.
    with connect_sse(host.client, "GET", f"/api/workflows/runs/{run_id}/stream") as source:
        replay = list(source.iter_sse())
    assert [e.json() for e in replay if e.event == "update"] == steps and replay[-1].event == "done"
    # Back after `done` (an `EventSource` reconnects by itself): 204 No Content, which stops its reconnecting.
    again = host.client.get(f"/api/workflows/runs/{run_id}/stream", headers={"Last-Event-ID": replay[-1].id})
    assert again.status_code == 204
    refused = host.client.get(f"/api/runs/{run_id}/stream")
    assert refused.status_code == 404 and refused.json()["code"] == "run_is_a_workflow"


def test_a_workflow_stream_reads_a_finished_child_run_no_more() -> None:
    """The watcher reads each child run's status on every look (child runs move on without the workflow's status
    changing); a finished child's status is final, so it is read once, and only running children are read again."""
    import asyncio
    from types import SimpleNamespace

    from http_api.streams.feeds import WorkflowFeed

    statuses = {"child-a": "completed", "child-b": "in_progress"}
    reads: list[str] = []

    async def child_state(run_id: str) -> SimpleNamespace:
        reads.append(run_id)
        return SimpleNamespace(progress=SimpleNamespace(status=statuses[run_id]))

    async def workflow_state(run_id: str) -> SimpleNamespace:
        return SimpleNamespace(progress=SimpleNamespace(child_runs=["child-a", "child-b"]))

    async def main() -> list[tuple[tuple[str, str], ...]]:
        feed = WorkflowFeed(SimpleNamespace(), None, SimpleNamespace(run_id="wf"), "")  # type: ignore[arg-type]
        feed.gateway = SimpleNamespace(state=workflow_state)  # type: ignore[assignment]
        feed.children = SimpleNamespace(state=child_state)  # type: ignore[assignment]
        looks = []
        for _ in range(3):
            looks.append((await feed.read_state())[1])
        statuses["child-b"] = "failed"
        looks.append((await feed.read_state())[1])
        looks.append((await feed.read_state())[1])
        return looks

    looks = asyncio.run(main())
    assert looks[:3] == [(("child-a", "completed"), ("child-b", "in_progress"))] * 3
    assert looks[3:] == [(("child-a", "completed"), ("child-b", "failed"))] * 2
    assert reads == ["child-a", "child-b", "child-b", "child-b", "child-b"]
