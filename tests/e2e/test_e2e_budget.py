"""History stays small: a 30-step run whose tool results are 50 KB each completes, no orchestration input, activity
input or output, or custom status in its Durable history exceeds 16 KB, and the run continued as new.

The history of each execution is read over the Durable HTTP API (`showHistory`, `showHistoryOutput`) while that
execution is current: the model reads it before every answer (a continued-as-new execution's history is gone once
the next one starts), and once more after the run finished.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest
from e2e_harness import InProcessApp

from agent_runs.contracts import RunInput
from scripted_model import Conversation, Reply, Script, ScriptedModelServer, ScriptedToolCall, ScriptPlayer

STEPS = 30
BUDGET_BYTES = 16 * 1024
RESULT_BYTES = 50 * 1024
PAYLOAD_FIELDS = ("Input", "Result", "Output")


class HistoryReadingModel:
    """Answers from a script; before each answer it records the run's current history (every execution is read
    while it is the current one)."""

    def __init__(self, script: Script, base_url: str) -> None:
        self._player = ScriptPlayer(script)
        self._http = httpx.Client(base_url=base_url, timeout=30, trust_env=False)
        self._lock = threading.Lock()
        self.run_id: str | None = None
        self.statuses: list[dict[str, Any]] = []

    def respond(self, conversation: Conversation) -> Reply | None:
        if self.run_id is not None:
            self.statuses.append(read_history(self._http, self.run_id))
        return self._player.respond(conversation)

    def close(self) -> None:
        self._http.close()


def read_history(http: httpx.Client, run_id: str) -> dict[str, Any]:
    response = http.get(
        f"/runtime/webhooks/durabletask/instances/{run_id}",
        params={"showHistory": "true", "showHistoryOutput": "true", "showInput": "true"},
    )
    assert response.status_code in (200, 202), response.text
    return response.json()


def size_of(value: Any) -> int:
    """Bytes of a payload as Durable stores it (JSON text)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return len(text.encode())


def oversized_payloads(status: dict[str, Any]) -> list[tuple[str, int]]:
    found = [("input", size_of(status.get("input"))), ("customStatus", size_of(status.get("customStatus")))]
    for event in status.get("historyEvents") or []:
        for field in PAYLOAD_FIELDS:
            if event.get(field) is not None:
                found.append((f"{event['EventType']}.{field}", size_of(event[field])))
    return [(where, size) for where, size in found if size > BUDGET_BYTES]


def generation_of(status: dict[str, Any]) -> int:
    run_input = status["input"]  # read as the orchestrator reads it: a field at its default is left out
    return RunInput.model_validate(json.loads(run_input) if isinstance(run_input, str) else run_input).generation


@pytest.mark.slow
def test_long_run_with_big_results_keeps_history_small(app: InProcessApp, model: ScriptedModelServer) -> None:
    script = Script.of(*(Reply.call("big_result", {"index": i}) for i in range(STEPS)), f"All {STEPS} read.")
    watcher = HistoryReadingModel(script, app.host.base_url)
    model.set_script(watcher)
    try:
        started = app.start(input=f"Read {STEPS} big documents")
        watcher.run_id = started["run_id"]
        app.settle(timeout=120)
        final = app.view(started["run_id"])
    finally:
        watcher.close()

    assert (final["status"], final["output"]["text"]) == ("completed", f"All {STEPS} read.")
    # The big results really went through the run: each stored, each shown to the model.
    results = [m for m in app.session_messages(started["session_id"]) if m["contents"][0]["type"] == "function_result"]
    assert len(results) == STEPS and all(size_of(m["contents"]) >= RESULT_BYTES for m in results)
    assert model.log.total == STEPS + 1

    statuses = [*watcher.statuses, app.history(started["run_id"])]
    assert len(statuses) >= STEPS  # the history was read at (nearly) every model call and at the end
    for status in statuses:
        assert oversized_payloads(status) == [], f"generation {generation_of(status)}"
    # It continued as new (every 8 model calls), and no execution's history grew with the length of the run.
    generations = {generation_of(status) for status in statuses}
    assert generations == set(range(STEPS // 8 + 1)), generations
    longest = max(len(status["historyEvents"]) for status in statuses)
    assert longest < 80, f"an execution's history has {longest} events"


def test_an_answer_too_large_to_hand_back_fails_the_run_without_calling_the_model_again(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """A model turn whose summary would break the payload budget (hundreds of tool calls) ends the run `failed` with
    `payload_too_large`; the answer is stored once and the model is not asked again by a Durable retry."""
    calls = [ScriptedToolCall(name="lookup", arguments={"key": f"key-{i}"}) for i in range(400)]
    model.set_script(Script.of(Reply(tool_calls=calls)))
    started = app.start(input="look everything up")
    app.settle()
    response = app.poll(started["run_id"])
    view = response.json()
    assert response.status_code == 500, view
    assert (view["status"], view["error"]["code"]) == ("failed", "payload_too_large"), view
    assert model.log.total == 1
    assert app.history(started["run_id"])["runtimeStatus"] == "Completed"  # the orchestrator did not crash
    # The stored calls got "not run" results: the session's conversation stays valid for its next run.
    messages = app.session_messages(view["session_id"])
    results = [c for m in messages for c in m["contents"] if c["type"] == "function_result"]
    assert len(results) == len(calls)
