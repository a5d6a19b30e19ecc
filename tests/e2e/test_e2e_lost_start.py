"""A run whose orchestration start failed on the client's side after the host took it (a timeout, a lost answer):
before, the run was closed `start_failed` and its start answered with an error while its orchestration ran all the
same - and the caller's retry ran the turn a second time. Now the start reads whether the orchestration exists before
giving the run up, and answers with the run when it does. An orchestration that starts after its run was given up
ends at its first model call without asking the model (runs with run middleware asked it before). Both stores, over
real HTTP."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import InProcessApp
from e2e_settings import watches_the_app_in_process

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


def starts_land_late(app: InProcessApp, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Callable[[], None]]]:
    """The app's next orchestration start fails on the client's side before the host took it, and lands on the host
    later all the same (a request slower than its timeout): its run's id and its landing, for the test to make
    happen."""
    gateway = app.app_module("http_api.durable_gateway").DurableGateway
    start_run, landings = gateway.start_run, []

    async def start_late(self: Any, run_input: Any) -> None:
        monkeypatch.setattr(gateway, "start_run", start_run)
        landings.append((run_input.run.run_id, lambda: app.host.run(start_run(self, run_input))))
        raise TimeoutError("the start timed out")

    monkeypatch.setattr(gateway, "start_run", start_late)
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


def closed_run_starts_late(app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch,
                           route: str) -> None:
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
