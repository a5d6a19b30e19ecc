"""Events that arrive while a signal step probes the store (`workflow_find_signal`): between the step's check of the
older waiters and its race, so they land on an older waiter that lost a race (the SDK hands an event to the latest
open waiter of its name). The race that follows must still see them: a cancel ends the workflow, a signal is
consumed. The events are sent from inside the activity, so they arrive exactly then."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

import httpx
import pytest
from workflow_helpers import settle, start, step_ids, view

from workflow_runtime.contracts import SignalFound, SignalProbe

TERMINAL = {"Completed", "Failed", "Terminated", "Canceled"}
Send = Callable[[httpx.AsyncClient, str], Awaitable[None]]


async def _cancel(client: httpx.AsyncClient, run_id: str) -> None:
    assert (await client.post(f"/api/workflows/runs/{run_id}/cancel")).status_code == 202


def _signal(n: int) -> Send:
    async def send(client: httpx.AsyncClient, run_id: str) -> None:
        sent = await client.post(f"/api/workflows/runs/{run_id}/signals/go_ahead", json={"payload": {"n": n}})
        assert sent.status_code == 202, sent.text

    return send


def _while_probing(host, monkeypatch, index: int, *sends: Send, before_read: bool = False) -> list[bool]:
    """Send these (through the API) while signal `index` is looked up in the store: after the lookup read it (the
    step sees the signal only through its ring), or before (the lookup finds it). Returns what the lookups found."""
    find_signal = sys.modules["activities.workflow_steps"].workflow_find_signal  # as the host loaded the app
    look_up = find_signal.function
    found: list[bool] = []

    async def send_all(run_id: str) -> None:
        async with httpx.AsyncClient(base_url=host.base_url, trust_env=False) as client:
            for send in sends:
                await send(client, run_id)

    async def probing(probe: SignalProbe) -> SignalFound:
        hit = probe.index == index and not found
        if hit and before_read:
            await send_all(probe.ref.run_id)
        result = await look_up(probe)
        if hit:
            found.append(result.found)
            if not before_read:
                await send_all(probe.ref.run_id)
        return result

    monkeypatch.setattr(find_signal, "function", probing)
    return found


def _cancelled(host, run_id: str) -> dict:
    settle(host)
    done = view(host, run_id)
    assert done["status"] == "cancelled", done
    assert host.get_status(run_id)["runtimeStatus"] in TERMINAL
    return done


def test_a_cancel_while_the_store_is_probed_ends_the_signal_wait(host, monkeypatch) -> None:
    """The agent step's race left a cancel waiter open: the cancel lands there, not on the signal race's waiter."""
    found = _while_probing(host, monkeypatch, 1, _cancel)
    run_id = start(host, "open_signal_flow", {"topic": "probe"})["run_id"]
    done = _cancelled(host, run_id)  # not left waiting for a signal that may never come
    assert found == [False]
    assert "go" not in step_ids(done)


def test_a_cancel_twice_while_the_store_is_probed(host, monkeypatch) -> None:
    found = _while_probing(host, monkeypatch, 1, _cancel, _cancel)
    run_id = start(host, "open_signal_flow", {"topic": "probe"})["run_id"]
    _cancelled(host, run_id)
    assert found == [False]


@pytest.mark.parametrize("before_read", [True, False], ids=["signal-found", "signal-rung"])
def test_a_signal_and_a_cancel_together_while_the_store_is_probed(host, monkeypatch, before_read: bool) -> None:
    """Either way the workflow ends cancelled; a signal the lookup found is consumed first (the step is recorded)."""
    found = _while_probing(host, monkeypatch, 1, _signal(1), _cancel, before_read=before_read)
    run_id = start(host, "open_signal_flow", {"topic": "probe"})["run_id"]
    done = _cancelled(host, run_id)
    assert found == [before_read]
    if before_read:
        [go] = [entry for entry in done["steps"] if entry["step"] == "go"]
        assert go["output"]["payload"] == {"n": 1}


def test_a_signal_rung_while_the_store_is_probed_is_consumed(host, monkeypatch) -> None:
    """The first signal step's race left a waiter of signal #2 open: #2's ring lands there during the second step's
    lookup, and the second step's race must take it (it has no timeout: it would wait for ever)."""
    found = _while_probing(host, monkeypatch, 2, _signal(2))
    run_id = start(host, "open_signal_flow", {"topic": "probe"})["run_id"]
    settle(host)
    first = host.client.post(f"/api/workflows/runs/{run_id}/signals/go_ahead", json={"payload": {"n": 1}})
    assert first.status_code == 202
    settle(host)
    host.advance(3600)  # the pause, then the second signal step
    settle(host)
    done = view(host, run_id)
    assert found == [False]
    assert done["status"] == "completed", done
    assert done["output"]["second"] == {"n": 2}
