"""Budgets and cost on durable runs (the same loop rule as the in-process runner): per agent (`frugal`: 3 model
calls, 1000 tokens, cost 0.5) and per request (`budget` in the start body, only tighter than the agent's: a request
that tries to raise a limit gets 422 with the field). A run that spent its budget ends `completed` with
`finish_reason: "budget_exceeded"` and its partial answer; usage and cost (priced by `MODEL_PRICES`) show in the
run and session views. (Not `test_e2e_budget.py`: that one is the 16 KB payload budget.)"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from e2e_harness import InProcessApp
from e2e_settings import app_settings, reads_the_in_process_sink, running_app

from durable_steps.activity import DEFAULT_RETRY
from scripted_model import Fault, Reply, Script, ScriptedModelServer
from scripted_model.script import ScriptedToolCall
from telemetry.testing import telemetry_sink

DURABLE_RETRY_S = DEFAULT_RETRY.first_retry_interval_in_milliseconds / 1000
PRICES = json.dumps({"scripted-model": {"input": 1000, "output": 2000}})  # per 1M: 100 in + 10 out = 0.12


def step(key: str, text: str) -> Reply:
    return Reply(
        text=text,
        tool_calls=[ScriptedToolCall(name="lookup", arguments={"key": key})],
        usage={"prompt_tokens": 100, "completion_tokens": 10},
    )


FIVE_CALLS = Script.of(
    step("a", "Looking up a."), step("b", "Now b."), step("c", "And c."), step("d", "Then d."), "All done."
)


@pytest.fixture
def app(model_server: ScriptedModelServer) -> Iterator[InProcessApp]:
    settings = app_settings(model_server.base_url, SESSION_STORE_PATH=":memory:", MODEL_PRICES=PRICES)
    with running_app(settings, "sqlite") as started:
        yield started


def run(app: InProcessApp, agent: str, **body) -> dict:
    started = app.start(agent=agent, input="Look up a, b, c and d", **body)
    app.settle()
    return app.view(started["run_id"])


@pytest.mark.parametrize(
    ("agent", "budget", "model_calls"),
    [
        ("frugal", None, 3),  # the agent's max_model_calls
        ("helper", {"max_model_calls": 2}, 2),
        ("frugal", {"max_model_calls": 1}, 1),
        ("helper", {"max_total_tokens": 330}, 3),
        ("frugal", {"max_total_tokens": 200}, 2),
        ("helper", {"max_cost": 0.2}, 2),
        ("frugal", {"max_cost": 0.1}, 1),
    ],
)
def test_a_durable_run_stops_when_its_budget_is_spent(
    app: InProcessApp, model: ScriptedModelServer, agent: str, budget: dict | None, model_calls: int
) -> None:
    model.set_script(FIVE_CALLS)
    view = run(app, agent, **({"budget": budget} if budget else {}))

    assert (view["status"], view["finish_reason"]) == ("completed", "budget_exceeded")
    assert len(model.log.requests) == model_calls
    assert view["output"]["text"] == ["Looking up a.", "Now b.", "And c."][model_calls - 1]
    assert view["usage"]["total_tokens"] == 110 * model_calls
    assert view["usage"]["cost"] == pytest.approx(0.12 * model_calls)
    session = app.http.get(f"/api/sessions/{view['session_id']}").json()
    assert session["runs"][0]["usage"] == view["usage"]


def test_the_agents_token_and_cost_limits_apply(app: InProcessApp, model: ScriptedModelServer) -> None:
    expensive = Reply(
        text="Big.", tool_calls=[ScriptedToolCall(name="lookup", arguments={"key": "a"})],
        usage={"prompt_tokens": 900, "completion_tokens": 200},  # 1100 tokens > 1000, cost 1.3 > 0.5
    )
    model.set_script(Script.of(expensive, "Never asked."))
    view = run(app, "frugal")
    assert (view["status"], view["finish_reason"], view["output"]["text"]) == ("completed", "budget_exceeded", "Big.")
    assert len(model.log.requests) == 1


def test_a_run_within_its_budget_completes(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(step("a", "Looking up a."), "Done."))
    view = run(app, "frugal", budget={"max_model_calls": 2})
    assert (view["status"], view["finish_reason"], view["output"]["text"]) == ("completed", "stop", "Done.")
    assert view["usage"]["cost"] > 0


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        ({"max_model_calls": 4}, "body.budget.max_model_calls"),
        ({"max_total_tokens": 1001}, "body.budget.max_total_tokens"),
        ({"max_cost": 0.75, "max_model_calls": 1}, "body.budget.max_cost"),
    ],
)
def test_a_request_cannot_raise_the_agents_limit(
    app: InProcessApp, model: ScriptedModelServer, budget: dict, field: str
) -> None:
    response = app.http.post("/api/agents/frugal/runs", json={"input": "hi", "budget": budget})
    assert response.status_code == 422, response.text
    problem = response.json()
    assert (problem["code"], problem["field"]) == ("budget_above_agent_limit", field)
    assert model.log.requests == []  # no run was started
    assert app.snapshot().sessions == {}


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        ({"max_model_calls": 0}, "body.budget.max_model_calls"),
        ({"max_cost": -1}, "body.budget.max_cost"),
        ({"max_tokens": 10}, "body.budget.max_tokens"),
        ({"max_model_calls": True}, "body.budget.max_model_calls"),  # not 1
        ({"max_total_tokens": "500"}, "body.budget.max_total_tokens"),  # a number, not text
        ({"max_cost": "0.5"}, "body.budget.max_cost"),
        ({"max_cost": False}, "body.budget.max_cost"),
        ("lots", "body.budget"),
    ],
)
def test_a_malformed_budget_is_refused(app: InProcessApp, budget: object, field: str) -> None:
    response = app.http.post("/api/agents/helper/runs", json={"input": "hi", "budget": budget})
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field


def test_unpriced_models_show_tokens_without_cost(model_server: ScriptedModelServer, model) -> None:
    with running_app(app_settings(model_server.base_url, SESSION_STORE_PATH=":memory:"), "sqlite") as app:
        model.set_script(Script.of("Hi."))
        view = run(app, "helper", budget={"max_cost": 0.01})  # nothing priced: the cost limit never triggers
    assert (view["finish_reason"], view["usage"]["cost"]) == ("stop", None)
    assert view["usage"]["total_tokens"] > 0


@pytest.mark.parametrize(("broken", "answered"), [(1, ["Looking up a.", "Now b."]), (2, ["Looking up a."])])
def test_a_stream_that_broke_after_its_usage_counts_against_the_budget(
    app: InProcessApp, model: ScriptedModelServer, broken: int, answered: list[str]
) -> None:
    """Streamed answers report their usage (110 tokens each, billed) and then break: the activity's durable retry asks
    again, and the run counts every attempt, once each. With 330 tokens allowed, one broken attempt leaves room for
    two answers (220, then 330) and two broken ones for one (330), where ignoring them would have let three through."""
    model.set_script(FIVE_CALLS)
    model.fail_next(Fault.billed(usage={"prompt_tokens": 100, "completion_tokens": 10}), times=broken)
    started = app.start(agent="helper", input="Look up a, b, c and d", budget={"max_total_tokens": 330})
    app.settle()
    for _ in range(broken):
        app.advance(DURABLE_RETRY_S)  # the activity's durable retry fires
    app.settle()
    view = app.view(started["run_id"])

    assert (view["status"], view["finish_reason"]) == ("completed", "budget_exceeded")
    assert view["output"]["text"] == answered[-1]
    assert len(model.log.requests) == broken + len(answered)
    assert all(r.stream for r in model.log.requests)
    assert view["usage"]["total_tokens"] == 330
    assert view["usage"]["cost"] == pytest.approx(0.36)
    session = app.http.get(f"/api/sessions/{view['session_id']}").json()
    assert session["runs"][0]["usage"] == view["usage"]


def test_a_durable_run_estimates_answers_without_usage(app: InProcessApp, model: ScriptedModelServer) -> None:
    """A server that reports no usage leaves a token budget in force: the answers are estimated, and the run's
    usage says so."""
    model.set_script(FIVE_CALLS)
    model.report_usage = False
    view = run(app, "helper", budget={"max_total_tokens": 100})

    assert (view["status"], view["finish_reason"]) == ("completed", "budget_exceeded")
    assert len(model.log.requests) < 5
    assert view["usage"]["estimated"] is True and view["usage"]["total_tokens"] >= 100


@reads_the_in_process_sink
def test_the_cost_is_a_metric_by_agent_and_model(app: InProcessApp, model: ScriptedModelServer) -> None:
    sink = telemetry_sink()

    def spent() -> float:
        points = sink.metric_points("agent_run.cost")
        wanted = {"gen_ai.agent.name": "frugal", "gen_ai.request.model": "scripted-model"}
        return sum(p.value for p in points if wanted.items() <= dict(p.attributes).items())

    before = spent()
    model.set_script(FIVE_CALLS)
    view = run(app, "frugal", budget={"max_model_calls": 2})
    assert spent() - before == pytest.approx(view["usage"]["cost"]) == pytest.approx(0.24)
