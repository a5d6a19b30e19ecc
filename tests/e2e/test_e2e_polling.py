"""Polling with continuation tokens: each update is delivered exactly once and in order, whatever the timing of
the polls and across a continue-as-new, and the concatenation of all polls is exactly what the run stored."""

from __future__ import annotations

import json
import time

from e2e_harness import PROGRESS_TIMEOUT_S, InProcessApp

from scripted_model import Reply, Script, ScriptedModelServer

STEPS = 9  # one more model call than an execution makes: the run continues as new while being polled


def test_polls_return_each_update_once_and_in_order(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.latency_ms = 100  # each model call takes a moment, so polls land in the middle of the run
    model.set_script(Script.of(*(Reply.call("lookup", {"key": f"k{i}"}) for i in range(STEPS)), "All looked up."))
    started = app.start(input="Look up nine keys")
    run_id = started["run_id"]

    delivered = [(u["seq"], u["message"]["message_id"]) for u in started["updates"]]
    token = started["continuation_token"]
    non_empty_polls = 0
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    while token is not None:
        assert time.monotonic() < deadline, "the run did not finish in time"
        response = app.poll(run_id, token, wait_seconds=2)  # long poll: returns on news or when the run ends
        assert response.status_code in (200, 202)
        body = response.json()
        batch = [(u["seq"], u["message"]["message_id"]) for u in body["updates"]]
        non_empty_polls += bool(batch)
        delivered += batch
        if response.status_code == 202:
            assert body["continuation_token"] and response.headers["Retry-After"]
        token = body["continuation_token"]

    assert body["status"] == "completed"
    stored = [(m["seq"], m["message_id"]) for m in app.session_messages(started["session_id"], run_id=run_id)]
    assert delivered == stored  # nothing missing, nothing twice, same order
    assert [seq for seq, _ in delivered] == sorted({seq for seq, _ in delivered})
    assert len(stored) == 1 + 2 * STEPS + 1  # input, (call + result) per step, answer
    assert non_empty_polls >= 3, "the updates should have arrived over several polls"
    assert json.loads(app.history(run_id)["input"])["generation"] == 1


def test_an_old_token_replays_the_same_suffix(app: InProcessApp, model: ScriptedModelServer) -> None:
    """A token is a cursor, not a consumed ticket: a client that lost a response can repeat the poll."""
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), "Done."))
    started = app.start(input="Look up a")
    app.settle()

    first = app.poll(started["run_id"], started["continuation_token"]).json()
    again = app.poll(started["run_id"], started["continuation_token"]).json()
    assert first["updates"] and first["updates"] == again["updates"]
    stored = app.session_messages(started["session_id"])
    assert [u["seq"] for u in started["updates"] + first["updates"]] == [m["seq"] for m in stored]
