"""Signals that race the workflow's orchestration: one sent when the workflow's record exists but its orchestration
does not yet (the host answers its event with a 404). Timing is made exact from inside the app: the signal is sent,
through the API, from inside the start request's launch, before the orchestration is started."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from typing import Any

import httpx
from workflow_helpers import settle, start, start_posting_first, view


def test_a_signal_before_the_orchestration_started_is_accepted_and_taken(host, monkeypatch) -> None:
    """The signal is stored (the workflow's store probe finds it when it reaches its signal step), so the caller is
    told 202, not 500: a 500 would make it send the signal again, and the copy would feed the next step of that name."""
    at = (host.engine.now() + timedelta(hours=1)).isoformat()
    signal = lambda run_id: (f"/api/workflows/runs/{run_id}/signals/data_ready", {"payload": {"fact": "first"}})  # noqa: E731
    run_id, answers = start_posting_first(host, monkeypatch, "signal_flow", {"at": at}, signal)

    [answer] = answers
    assert answer.status_code == 202, answer.text
    assert answer.json()["index"] == 1 and answer.json()["status"] == "accepted"
    settle(host)
    host.advance(3600)
    done = view(host, run_id)
    assert done["status"] == "completed" and done["output"]["fact"] == "first"


def test_a_signal_sent_again_with_its_idempotency_key_is_queued_once(host) -> None:
    """A client that sends a signal again after a lost response (same `Idempotency-Key`, same body, also at once)
    gets the first one's answer; the copy must not feed the next step of that name. Another body under the key is a
    422; another key is another signal."""
    run_id = start(host, "open_signal_flow", {"topic": "retries"})["run_id"]
    settle(host)
    url = f"/api/workflows/runs/{run_id}/signals/go_ahead"
    once = {"Idempotency-Key": "go-1"}

    async def together() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=host.base_url, trust_env=False) as client:
            sends = [client.post(url, json={"payload": {"n": 1}}, headers=once) for _ in range(3)]
            return list(await asyncio.gather(*sends))

    answers = [*host.run(together()), host.client.post(url, json={"payload": {"n": 1}}, headers=once)]
    assert all(a.status_code == 202 for a in answers), [a.text for a in answers]
    assert {(a.json()["index"], a.json()["signal_id"]) for a in answers} == {(1, answers[0].json()["signal_id"])}
    reused = host.client.post(url, json={"payload": {"n": 9}}, headers=once)
    assert reused.status_code == 422 and reused.json()["code"] == "idempotency_key_reused"

    settle(host)
    host.advance(3600)  # past the pause: the second step waits, for a signal not yet sent
    waiting = view(host, run_id)
    assert waiting["status"] == "waiting" and waiting["active_step"]["id"] == "go_again", waiting
    second = host.client.post(url, json={"payload": {"n": 2}}, headers={"Idempotency-Key": "go-2"})
    assert second.status_code == 202 and second.json()["index"] == 2
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed" and done["output"]["second"] == {"n": 2}, done

    # The workflow finished: a retry of a signal it took is told what its first request was; a new signal is a 409.
    late_retry = host.client.post(url, json={"payload": {"n": 2}}, headers={"Idempotency-Key": "go-2"})
    assert late_retry.status_code == 202 and late_retry.json() == second.json(), late_retry.text
    fresh = host.client.post(url, json={"payload": {"n": 3}}, headers={"Idempotency-Key": "go-3"})
    assert fresh.status_code == 409 and fresh.json()["code"] == "workflow_finished"


def test_a_retry_after_the_first_request_died_past_its_append_finds_the_queued_signal(host, monkeypatch) -> None:
    """The first request queued its signal, then failed before noting where (its `.done` entry): the retry with the
    same key answers with that signal instead of waiting for a note that never comes, or queuing a copy."""
    store = sys.modules["agent_runs.services"].RunServices.current().store  # the host's modules: the app's store
    run_id = start(host, "open_signal_flow", {"topic": "a death"})["run_id"]
    settle(host)
    record_effect = store.record_effect

    async def dying_after_the_append(session_id: str, key: str, *args: Any, **kwargs: Any) -> Any:
        if key.endswith(".done"):
            raise ConnectionError("the API process died here")
        return await record_effect(session_id, key, *args, **kwargs)

    monkeypatch.setattr(store, "record_effect", dying_after_the_append)
    url = f"/api/workflows/runs/{run_id}/signals/go_ahead"
    once = {"Idempotency-Key": "go-1"}
    assert host.client.post(url, json={"payload": {"n": 1}}, headers=once).status_code == 500
    monkeypatch.undo()

    retry = host.client.post(url, json={"payload": {"n": 1}}, headers=once)
    assert retry.status_code == 202 and retry.json()["index"] == 1, retry.text
    settle(host)
    queued = host.run(store.list_signals(f"wf-{run_id}", "go_ahead"))
    assert [signal.index for signal in queued] == [1]
    assert view(host, run_id)["active_step"]["id"] == "pause"  # the signal step took it


def test_a_signal_while_a_rewind_starts_its_continuation_is_accepted_and_taken(host, monkeypatch) -> None:
    """A rewind has reopened the workflow's record but not yet started its continuation (the old orchestration, which
    failed, refuses events): the signal is queued for the continuation's signal step, so the answer is 202."""
    run_id = start(host, "signal_flow", {"at": host.engine.now().isoformat()})["run_id"]
    settle(host)
    host.advance(1)
    host.advance(3601)
    assert view(host, run_id)["error"]["step"] == "data"  # the signal never came

    gateway = sys.modules["http_api.workflow_gateway"].WorkflowGateway  # as the host loaded the app
    start_orchestration = gateway.start
    answers: list[httpx.Response] = []

    async def signal_first(self: Any, workflow_input: Any) -> None:
        async with httpx.AsyncClient(base_url=host.base_url, trust_env=False) as client:
            url = f"/api/workflows/runs/{run_id}/signals/data_ready"
            answers.append(await client.post(url, json={"payload": {"fact": "in the gap"}}))
        await start_orchestration(self, workflow_input)

    monkeypatch.setattr(gateway, "start", signal_first)
    assert host.client.post(f"/api/workflows/runs/{run_id}/rewind").status_code == 202
    monkeypatch.undo()

    [answer] = answers
    assert answer.status_code == 202, answer.text
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "completed" and done["output"]["fact"] == "in the gap", done


def test_two_signals_before_the_orchestration_started_are_both_queued_in_order(host, monkeypatch) -> None:
    """Two signals of one name before the orchestration started are two signals (indexes 1 and 2, not one stored
    over the other); the workflow's signal step takes the first."""
    at = (host.engine.now() + timedelta(hours=1)).isoformat()

    def signal(fact: str):
        return lambda run_id: (f"/api/workflows/runs/{run_id}/signals/data_ready", {"payload": {"fact": fact}})

    first, second = signal("first"), signal("second")
    run_id, answers = start_posting_first(host, monkeypatch, "signal_flow", {"at": at}, first, second)
    assert [(a.status_code, a.json()["index"], a.json()["status"]) for a in answers] == [
        (202, 1, "accepted"),
        (202, 2, "accepted"),
    ], [a.text for a in answers]
    assert answers[0].json()["signal_id"] != answers[1].json()["signal_id"]
    settle(host)
    host.advance(3600)
    done = view(host, run_id)
    assert done["status"] == "completed" and done["output"]["fact"] == "first"
    [taken] = [step for step in done["steps"] if step["step"] == "data"]
    assert (taken["output"]["index"], taken["output"]["signal_id"]) == (1, answers[0].json()["signal_id"])
