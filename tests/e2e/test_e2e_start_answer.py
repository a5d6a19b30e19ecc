"""The answer to a start: without `wait_seconds` it is the view a read of the run made at once would show (queued,
its input as the updates, a token), built without reading the run back from the Durable API; a start that waits, or
repeats an earlier start (`Idempotency-Key`), reads the run. Either way the start's updates and the polls after it
deliver every stored message once, in order."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from e2e_harness import InProcessApp

from scripted_model import Reply, Script, ScriptedModelServer


@contextmanager
def durable_api_calls(app: InProcessApp) -> Iterator[list[tuple[str, str]]]:
    """(method, path) of every request the Durable API (RPC and webhooks) of the host serves meanwhile."""
    api = app.host.host.http.durable
    seen: list[tuple[str, str]] = []
    handle = api.handle

    async def recording(request: Any, path: str) -> Any:
        seen.append((request.method, path))
        return await handle(request, path)

    api.handle = recording
    try:
        yield seen
    finally:
        api.handle = handle


def status_reads(calls: list[tuple[str, str]], run_id: str) -> list[tuple[str, str]]:
    return [(method, path) for method, path in calls if method == "GET" and run_id in path]


def test_a_start_without_wait_answers_from_what_it_stored(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("lookup", {"key": "k1"}), "The value is value-of-k1."))
    inputs = [{"role": "user", "content": "Look up k1"}, {"role": "user", "content": "and say it"}]
    with durable_api_calls(app) as calls:
        started = app.start(input=inputs)
    run_id = started["run_id"]

    assert [method for method, _ in calls] == ["POST"]  # the start itself; the run is not read back
    assert started["status"] == "queued" and started["continuation_token"]
    assert started["pending_approvals"] == [] and started["partial_output"] is None
    assert started["usage"]["total_tokens"] == 0
    assert started["links"]["self"].endswith(f"/api/runs/{run_id}")
    texts = [update["message"]["contents"][0]["text"] for update in started["updates"]]
    assert texts == ["Look up k1", "and say it"]

    app.settle()
    rest = app.poll(run_id, started["continuation_token"]).json()
    assert rest["status"] == "completed"
    delivered = [(u["seq"], u["message"]["message_id"]) for u in started["updates"] + rest["updates"]]
    stored = [(m["seq"], m["message_id"]) for m in app.session_messages(started["session_id"], run_id=run_id)]
    assert delivered == stored  # the token continues right after the input: nothing missing, nothing twice


def test_a_start_that_waits_reads_the_run(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("Quick answer."))
    with durable_api_calls(app) as calls:
        response = app.http.post("/api/agents/helper/runs", json={"input": "Be quick", "wait_seconds": 20})
    assert response.status_code == 200 and response.json()["status"] == "completed"
    assert status_reads(calls, response.json()["run_id"])


def test_a_repeated_start_reads_the_run_it_started(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("Hello there."))
    headers = {"Idempotency-Key": "start-once"}
    first = app.http.post("/api/agents/helper/runs", json={"input": "Say hello"}, headers=headers).json()
    app.settle()
    with durable_api_calls(app) as calls:
        again = app.http.post("/api/agents/helper/runs", json={"input": "Say hello"}, headers=headers)
    assert again.json()["run_id"] == first["run_id"]
    assert again.status_code == 200 and again.json()["status"] == "completed"  # as a poll sees it now
    assert status_reads(calls, first["run_id"])
