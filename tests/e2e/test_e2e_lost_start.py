"""A run whose orchestration start failed on the client's side after the host took it (a timeout, a lost answer):
before, the run was closed `start_failed` and its start answered with an error while its orchestration ran all the
same - and the caller's retry ran the turn a second time. Now the start reads whether the orchestration exists before
giving the run up, and answers with the run when it does. An orchestration that starts after its run was given up
ends at its first model call without asking the model (runs with run middleware asked it before); a workflow's
orchestration ends before its first step (it ran that step: a child run, a gate, a timer). Both stores, over real
HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import InProcessApp, completed_activities
from e2e_settings import watches_the_app_in_process
from mcp_process import McpServerProcess
from webhook_receiver import SECRET, WebhookReceiver

from scripted_model import Script, ScriptedModelServer

RUNS = "/api/agents/helper/runs"


def starts_lose_their_answer(app: InProcessApp, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The app's next orchestration start reaches the host, then fails on the client's side. Returns the ids of the
    runs started so."""
    gateway = app.app_module("http_api.durable_gateway").DurableGateway
    start_run, started = gateway.start_run, []

    async def start_then_fail(self: Any, run_input: Any) -> None:
        monkeypatch.setattr(gateway, "start_run", start_run)
        await start_run(self, run_input)
        started.append(run_input.run.run_id)
        raise TimeoutError("the start's answer was lost")

    monkeypatch.setattr(gateway, "start_run", start_then_fail)
    return started


def starts_land_late(
    app: InProcessApp, monkeypatch: pytest.MonkeyPatch, *, workflow: bool = False
) -> list[tuple[str, Callable[[], None]]]:
    """The app's next orchestration start (of an agent run, or of a workflow) fails on the client's side before the
    host took it, and lands on the host later all the same (a request slower than its timeout): its run's id and its
    landing, for the test to make happen."""
    if workflow:
        gateway, method = app.app_module("http_api.workflow_gateway").WorkflowGateway, "start"
    else:
        gateway, method = app.app_module("http_api.durable_gateway").DurableGateway, "start_run"
    start, landings = getattr(gateway, method), []

    async def start_late(self: Any, start_input: Any) -> None:
        monkeypatch.setattr(gateway, method, start)
        run_id = start_input.ref.run_id if workflow else start_input.run.run_id
        landings.append((run_id, lambda: app.host.run(start(self, start_input))))
        raise TimeoutError("the start timed out")

    monkeypatch.setattr(gateway, method, start_late)
    return landings


@watches_the_app_in_process  # makes the app's orchestration start lose its answer
def test_a_start_the_host_took_though_its_answer_was_lost_answers_with_the_run(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    model.set_script(Script.of("Hello there."))
    started = starts_lose_their_answer(app, monkeypatch)
    answer = app.http.post(RUNS, json={"input": "Say hello"})
    assert (answer.status_code, [answer.json().get("run_id")]) == (202, started), answer.text
    app.settle()
    run = app.http.get(f"/api/runs/{started[0]}").json()
    assert (run["status"], run["output"]["text"]) == ("completed", "Hello there."), run
    assert len(model.log.requests) == 1
    again = app.http.post(RUNS, json={"input": "Say hello", "session_id": run["session_id"]})
    assert again.status_code == 202, again.text  # the session was left free


@watches_the_app_in_process  # makes the app's orchestration start land after it failed
def test_a_run_closed_as_not_started_whose_orchestration_starts_late_asks_the_model_nothing(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start failed and no orchestration was found: the run is given up as before (an error answer,
    `start_failed`, so a retry starts afresh). The start lands on the host later all the same: its orchestration ends
    at its first model call with the run as closed, without asking the model."""
    closed_run_starts_late(app, model, monkeypatch, RUNS)


@watches_the_app_in_process  # makes the app's orchestration start land after it failed
@pytest.mark.parametrize("agent", ["mw_upper", "mw_short_str"])
def test_the_same_for_an_agent_with_run_middleware(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer, marker_dir: Path,
    monkeypatch: pytest.MonkeyPatch, agent: str,
) -> None:
    """A run with run middleware closes its run in `finish_run`, not in its model call: its model call too reads the
    run closed and asks nothing; and its middleware does not run either (`mw_short_str` answers on its own: that
    answer was written into the session of a run reported as never started)."""
    with app_with(AGENTS_PACKAGE="semantics_agents") as semantics_app:
        closed_run_starts_late(semantics_app, model, monkeypatch, f"/api/agents/{agent}/runs")


@watches_the_app_in_process  # makes the app's orchestration start land after it failed
def test_the_same_for_an_agent_with_mcp_tools(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    """Its first step lists its MCP tools: for a run given up, it lists nothing and records nothing (before, it
    contacted the MCP server and recorded the tools of a run reported as never started), as for any closed run."""
    server = McpServerProcess(tmp_path / "mcp-http").start()
    try:
        settings = {"AGENTS_PACKAGE": "fixture_mcp_agents", "WORKFLOWS_PACKAGE": "none", "E2E_MCP_URL": server.url,
                    "E2E_MCP_KEY": "e2e-mcp-secret-4711", "E2E_MCP_STATE": str(tmp_path / "mcp-stdio")}
        with app_with(**settings) as mcp_app:
            run_id = closed_run_starts_late(mcp_app, model, monkeypatch, "/api/agents/mcp_helper/runs")
            record = mcp_app.store_call(lambda store: store.get_run(run_id))
            assert (record.discovered_tools, record.skipped_servers) == (None, []), record
    finally:
        server.stop()


def closed_run_starts_late(app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch,
                           route: str) -> str:
    model.set_script(Script.of("never asked"))
    landings = starts_land_late(app, monkeypatch)
    answer = app.http.post(route, json={"input": "Say hello"})
    assert answer.status_code >= 500 and len(landings) == 1, answer.text
    run_id, land = landings[0]
    land()
    app.settle()
    status = app.host.wait_for_status(run_id)
    assert status["runtimeStatus"] == "Completed", status
    assert model.log.requests == []
    run = app.http.get(f"/api/runs/{run_id}").json()
    assert (run["status"], run["error"]["code"]) == ("failed", "start_failed"), run
    messages = app.http.get(f"/api/sessions/{run['session_id']}/messages").json()["messages"]
    assert [m["role"] for m in messages] == ["user"], messages  # the input only: nothing ran
    # Given up, it is no failed step to repeat (the caller was told it never started, and may have started it again):
    # a rewind is refused, as for a run whose orchestration never started at all.
    rewind = app.http.post(f"/api/runs/{run_id}/rewind")
    assert (rewind.status_code, rewind.json().get("code")) == (409, "run_not_rewindable"), rewind.text
    return run_id


@watches_the_app_in_process  # makes the app's workflow start land after it failed
@pytest.mark.parametrize(
    ("workflow", "body"),
    [("review_pipeline", {"topic": "durable agents"}),  # first step: a child agent run
     ("follow_up", {"ticket": "T-1"})],  # first step: a two-day delay, then a child run in the caller's session
)
def test_a_workflow_given_up_whose_orchestration_starts_late_runs_no_step(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch, workflow: str, body: dict[str, Any],
) -> None:
    """The workflow's start failed and no orchestration was found: its record is closed `start_failed` and the caller
    told so (a retry is a new workflow run). The start lands later all the same: the orchestration reads its record
    before its first step and ends as the record says - no child run, gate, timer or notification; the workflow stays
    `start_failed` (before, it ran its steps: the work twice)."""
    model.set_script(Script.of("never asked"))
    with app_with(AGENTS_PACKAGE="served_agents") as app:
        landings = starts_land_late(app, monkeypatch, workflow=True)
        answer = app.http.post(f"/api/workflows/{workflow}/runs", json={"input": body})
        assert answer.status_code >= 500 and len(landings) == 1, answer.text
        run_id, land = landings[0]
        land()
        app.host.wait_until_idle(skip_timers=True)  # a timer the workflow set fires (its delay step)
        assert [r.messages[-1]["content"] for r in model.log.requests] == []
        history = app.history(run_id)
        assert history["runtimeStatus"] == "Completed", history
        assert completed_activities(history) == ["workflow_closed_before"], history
        assert not [e for e in history["historyEvents"] if e["EventType"] == "TimerCreated"], history
        view = app.http.get(f"/api/workflows/runs/{run_id}").json()
        assert (view["status"], view["error"]["code"], view["steps"]) == ("failed", "start_failed", []), view


@watches_the_app_in_process  # makes the app's workflow start land after it failed
def test_a_retry_of_a_workflow_given_up_starts_anew_only_under_another_idempotency_key(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What docs/workflows.md tells a caller answered 5xx: the same `Idempotency-Key` answers with the workflow
    given up (`start_failed`, no second run); a retry without it (or with another) starts a new workflow run."""
    model.set_script(Script.of("never asked"))
    with app_with(AGENTS_PACKAGE="served_agents") as app:
        landings = starts_land_late(app, monkeypatch, workflow=True)
        route, body, key = "/api/workflows/follow_up/runs", {"input": {"ticket": "T-2"}}, {"Idempotency-Key": "wf-1"}
        assert app.http.post(route, json=body, headers=key).status_code >= 500
        [(run_id, land)] = landings
        land()
        app.host.wait_until_idle(skip_timers=True)
        again = app.http.post(route, json=body, headers=key).json()
        assert (again["run_id"], again["status"], again["error"]["code"]) == (run_id, "failed", "start_failed"), again
        fresh = app.http.post(route, json=body).json()
        assert fresh["run_id"] != run_id and fresh["status"] != "failed", fresh


@contextmanager
def notifying(app_with: Callable[..., AbstractContextManager[InProcessApp]]) -> Iterator[tuple[InProcessApp,
                                                                                                 WebhookReceiver]]:
    """The served agents and workflows, every event sent to a loopback receiver (`WEBHOOK_URLS`)."""
    receiver = WebhookReceiver().start()
    try:
        with app_with(AGENTS_PACKAGE="served_agents", WEBHOOK_URLS=receiver.url, WEBHOOK_SECRET=SECRET) as app:
            yield app, receiver
    finally:
        receiver.stop()


def ends_told(receiver: WebhookReceiver) -> list[tuple[str, str, str]]:
    return [(d.payload["type"], d.payload["data"]["run_id"], d.payload["data"]["error"]["code"])
            for d in receiver.accepted() if d.verified]


@watches_the_app_in_process  # makes the app's starts land after they failed
def test_a_workflow_given_up_whose_orchestration_starts_late_tells_its_subscribers_it_failed(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As an agent run given up so records `run.failed` (`start_failed`) when its orchestration starts late, a
    workflow records `workflow.failed` (before, its subscribers never heard it ended: no event at all)."""
    model.set_script(Script.of("never asked"))
    with notifying(app_with) as (app, receiver):
        told = []
        for route, workflow in (("/api/agents/writer/runs", False), ("/api/workflows/review_pipeline/runs", True)):
            landings = starts_land_late(app, monkeypatch, workflow=workflow)
            body: dict[str, Any] = {"input": {"topic": "x"}} if workflow else {"input": "Say hello"}
            assert app.http.post(route, json=body).status_code >= 500
            [(run_id, land)] = landings
            land()
            app.host.wait_until_idle(skip_timers=True)
            told.append(("workflow.failed" if workflow else "run.failed", run_id, "start_failed"))
        assert model.log.requests == []
        assert ends_told(receiver) == told


@watches_the_app_in_process  # makes the app's workflow start land after it failed
@pytest.mark.parametrize(
    ("workflow", "body", "before"),
    [("review_pipeline", {"topic": "durable agents"}, []),  # first step: a child agent run
     ("follow_up", {"ticket": "T-3"}, ["workflow_record_delay"])],  # a delay, then a child run
)
def test_a_workflow_whose_first_read_came_before_its_start_gave_it_up_starts_no_child_run(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch, workflow: str, body: dict[str, Any], before: list[str],
) -> None:
    """The narrow window: the orchestration read its record open (`workflow_closed_before`) between the start's
    look for it (none yet) and the start's `start_failed` write. Its step reads the record before creating a child
    run (the read it makes anyway): it creates none and the workflow ends as the record says, its end told
    (before, it ran the child run: the work of a workflow its caller was told never started)."""
    model.set_script(Script.of("never asked"))
    with notifying(app_with) as (app, receiver):
        finish = app.app_module("activities.workflow_finish")
        closed_as = finish.closed_as

        def read_before_the_give_up(record: Any) -> Any:
            monkeypatch.setattr(finish, "closed_as", closed_as)
            return None  # as the record was before the start's write landed

        landings = starts_land_late(app, monkeypatch, workflow=True)
        assert app.http.post(f"/api/workflows/{workflow}/runs", json={"input": body}).status_code >= 500
        [(run_id, land)] = landings
        monkeypatch.setattr(finish, "closed_as", read_before_the_give_up)
        land()
        app.host.wait_until_idle(skip_timers=True)
        assert model.log.requests == []
        history = app.history(run_id)
        assert history["runtimeStatus"] == "Completed", history
        activities = [a for a in completed_activities(history) if a != "notify_run"]
        assert activities == ["workflow_closed_before", *before, "workflow_start_agents"], history
        assert not [e for e in history["historyEvents"] if e["EventType"] == "SubOrchestrationInstanceCreated"]
        view = app.http.get(f"/api/workflows/runs/{run_id}").json()
        assert (view["status"], view["error"]["code"]) == ("failed", "start_failed"), view
        assert app.store_call(lambda store: store.get_run(f"{run_id}.write")) is None
        assert ends_told(receiver) == [("workflow.failed", run_id, "start_failed")]
