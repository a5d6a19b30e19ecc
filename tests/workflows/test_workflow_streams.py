"""The live stream of a workflow run over HTTP (`GET /api/workflows/runs/{id}/stream`, read with `httpx-sse`):
finished steps arrive as `update` events exactly as polls list them, `status` events show the active step and the
progress of its child runs, the sign-off gate appears as a pending approval and the stream goes on after the
decision until `done`. The model is held (`hold_answers`) so the child run is certainly running when looked at."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httpx_sse import ServerSentEvent, connect_sse
from workflow_helpers import PROGRESS_TIMEOUT_S, child_run, decide, settle, start, view
from workflow_scripts import agent_rule, standard_script

from devhost.testing import InProcessHost
from scripted_model import Fault, Reply
from scripted_model.server import ScriptedModelServer

E2E_DIR = str(Path(__file__).resolve().parents[1] / "e2e")
if E2E_DIR not in sys.path:
    sys.path.insert(0, E2E_DIR)
from e2e_settings import watches_the_app_in_process  # noqa: E402


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
    # Through another host name too: `done`'s links name the host, whether it was had does not.
    elsewhere = {"Last-Event-ID": replay[-1].id, "Host": "agents.example.com"}
    assert host.client.get(f"/api/workflows/runs/{run_id}/stream", headers=elsewhere).status_code == 204
    refused = host.client.get(f"/api/runs/{run_id}/stream")
    assert refused.status_code == 404 and refused.json()["code"] == "run_is_a_workflow"


@pytest.fixture
def short_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    """Streams end (without `done`) after 20 s: a stream that never shows what the test waits for ends the test."""
    monkeypatch.setenv("STREAM_MAX_SECONDS", "20")


def child_is(run_id: str, status: str):
    return lambda e: e.event == "status" and {"run_id": run_id, "status": status} in e.json()["child_runs"]


def test_a_failed_child_run_rewound_directly_shows_running_again_in_the_workflow_stream(
    short_streams: None, host: InProcessHost, model: ScriptedModelServer
) -> None:
    """A branch of a parallel step fails while another waits for a person; the failed child run is rewound on its
    own (`POST /api/runs/{child}/rewind`) while the workflow's stream is open: the stream shows it going on and
    completing, not `failed` for good. The workflow, which records its children's outcomes once every branch has
    ended, then sees the rewound child completed and goes on."""
    standard = standard_script()
    refusing = [agent_rule("law and compliance", Reply(fault=Fault.bad_request())), *standard.rules]
    model.set_script(standard.model_copy(update={"rules": refusing}))
    run_id = start(host, "parallel_wait_flow", {"topic": "a DPA"})["run_id"]
    settle(host)
    mailer, legal, finance = view(host, run_id)["active_step"]["child_runs"]
    assert child_run(host, legal, legal)["status"] == "failed"
    with connect_sse(host.client, "GET", f"/api/workflows/runs/{run_id}/stream", timeout=PROGRESS_TIMEOUT_S) as source:
        events = source.iter_sse()
        failed = read_until(events, child_is(legal, "failed"))[-1].json()
        assert failed["status"] == "in_progress" and failed["active_step"]["id"] == "fan"
        assert {"run_id": finance, "status": "completed"} in failed["child_runs"]
        assert {"run_id": mailer, "status": "requires_action"} in failed["child_runs"]

        model.set_script(standard)  # the model is back
        rewound = host.client.post(f"/api/runs/{legal}/rewind")
        assert rewound.status_code == 202, rewound.text
        settle(host)
        assert child_run(host, legal, legal)["status"] == "completed"
        read_until(events, child_is(legal, "completed"))

        [approval] = host.client.get(f"/api/runs/{mailer}/approvals", params={"status": "pending"}).json()["approvals"]
        decide(host, mailer, approval["approval_id"])
        settle(host)
        done = read_until(events, lambda e: e.event == "done")[-1].json()
    assert done["status"] == "completed", done["error"]
    assert done["output"]["legal"] == "Legal: acceptable with a DPA."
    assert view(host, run_id)["status"] == "completed"


@watches_the_app_in_process  # counts the app's reads of its child runs' orchestrations
def test_a_workflow_stream_reads_a_settled_child_run_once(host: InProcessHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watcher reads the active step's child runs on every look (they move on without the workflow's status
    changing); one that completed is settled for good, so it is read once while a branch still waiting is read on."""
    run_id = start(host, "parallel_wait_flow", {"topic": "a DPA"})["run_id"]
    settle(host)
    mailer, legal, finance = view(host, run_id)["active_step"]["child_runs"]
    gateway = sys.modules["http_api.durable_gateway"].DurableGateway  # as the host loaded the app
    read_state = gateway.state
    reads: Counter[str] = Counter()
    looked_again = threading.Event()

    async def counted(self: Any, instance_id: str) -> Any:
        reads[instance_id] += 1
        if reads[mailer] >= 4:
            looked_again.set()
        return await read_state(self, instance_id)

    monkeypatch.setattr(gateway, "state", counted)
    with connect_sse(host.client, "GET", f"/api/workflows/runs/{run_id}/stream", timeout=PROGRESS_TIMEOUT_S) as source:
        events = source.iter_sse()  # kept: a generator dropped would close the response
        status = read_until(events, child_is(mailer, "requires_action"))[-1].json()
        assert {"run_id": legal, "status": "completed"} in status["child_runs"]
        assert looked_again.wait(PROGRESS_TIMEOUT_S)
    assert reads[legal] == reads[finance] == 1
