"""Crash recovery: SIGKILL `python -m devhost` mid-run, start it again on the same state file, the runs finish."""

from pathlib import Path

import httpx
import pytest

from devhost.testing import SubprocessHost

pytestmark = pytest.mark.devhost_app("tests/devhost/apps/http_durable")

WEBHOOKS = "/runtime/webhooks/durabletask"


def poll(predicate, what: str, timeout: float = 120.0) -> None:
    """Bounded wait on a condition outside the host (gate files), checked between short yields to the OS. The
    bound only limits a failure: a loaded CI machine may take many seconds to start the child host."""
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.01)


def started_files(gate: Path) -> list[Path]:
    return sorted(gate.glob("started-*"))


def has_timer(host: SubprocessHost, instance_id: str) -> bool:
    status = host.get_status(instance_id, show_history=True) or {}
    return any(e["EventType"] == "TimerCreated" for e in status.get("historyEvents") or [])


def start(client: httpx.Client, name: str, instance_id: str, **kwargs) -> None:
    response = client.post(f"{WEBHOOKS}/orchestrators/{name}/{instance_id}", **kwargs)
    assert response.status_code == 202, response.text


def test_sigkill_mid_run_then_restart_finishes_every_run(devhost_subprocess, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    host: SubprocessHost = devhost_subprocess(env={"DEVHOST_TEST_GATE_DIR": str(gate)}, clock="virtual")
    start(host.client, "gated", "gated-1")
    start(host.client, "wait_event", "event-1")
    start(host.client, "wait_timer", "timer-1", json={"hours": 2})

    poll(lambda: len(started_files(gate)) == 1, "the gated activity to start")
    host.wait_for_status("event-1", "Running")
    poll(lambda: has_timer(host, "timer-1"), "timer-1's durable timer")
    first_pid = host.pid

    host.kill()  # SIGKILL: an activity is in flight, one run waits on an event, one on a timer
    host.start()
    assert host.pid != first_pid

    # The in-flight activity is delivered again (at-least-once), and nothing else was lost.
    poll(lambda: len(started_files(gate)) == 2, "the gated activity to run again")
    (gate / "open").touch()
    assert host.client.post(f"{WEBHOOKS}/instances/gated-1/raiseEvent/Go", json="yes").status_code == 202
    assert host.client.post(f"{WEBHOOKS}/instances/event-1/raiseEvent/Approval", json={"ok": True}).status_code == 202
    host.wait_until_idle()
    host.advance(2 * 3600)

    assert host.wait_for_status("event-1")["output"] == {"payload": {"ok": True}, "type": "dict"}
    assert host.wait_for_status("timer-1")["output"] == "timer fired"
    gated = host.wait_for_status("gated-1")
    assert gated["runtimeStatus"] == "Completed", gated
    assert gated["output"] == ["step-1 done", "yes", "Hello after-timer!"]
    assert len(started_files(gate)) == 2

    assert host.stop() == 0  # SIGTERM is a clean shutdown


def test_state_survives_a_clean_restart(devhost_subprocess) -> None:
    host: SubprocessHost = devhost_subprocess()
    start(host.client, "echo_input", "kept-1", json={"kept": True})
    assert host.wait_for_status("kept-1")["output"] == {"kept": True}
    assert host.stop() == 0
    host.start()
    assert host.get_status("kept-1")["output"] == {"kept": True}


def test_an_activity_taking_the_durable_client_runs_again_with_it_after_a_kill(devhost_subprocess,
                                                                                tmp_path: Path) -> None:
    """Work in flight resumes when the engine opens, before the host listens: an activity that takes the
    `durableClient` binding must still get it (on Azure every invocation carries it), not fail its first attempt."""
    gate = tmp_path / "gate"
    gate.mkdir()
    host: SubprocessHost = devhost_subprocess(env={"DEVHOST_TEST_GATE_DIR": str(gate)})
    start(host.client, "gated_client", "client-1")
    poll(lambda: len(list(gate.glob("client-started-*"))) == 1, "the activity to start")

    host.kill()
    (gate / "open").touch()  # the activity runs through as soon as it is delivered again
    host.start()

    final = host.wait_for_status("client-1")
    assert (final["runtimeStatus"], final["output"]) == ("Completed", "client-1 is Running"), final


def test_a_virtual_clock_goes_on_from_where_it_was_after_a_restart(devhost_subprocess) -> None:
    """Durable time never goes back over a restart on the same state: a virtual clock resumes from the last moment
    the state recorded, not from the machine's time. (It started again from the machine's time: the next events were
    stamped before the ones already in the history, and an `advance` after the restart fell short of timers set
    before it.)"""
    host: SubprocessHost = devhost_subprocess(clock="virtual")
    start(host.client, "wait_timer", "timer-2h", json={"hours": 2})
    start(host.client, "wait_event", "event-1")
    host.wait_for_status("event-1", "Running")
    host.advance(3600)
    assert host.client.post(f"{WEBHOOKS}/instances/event-1/raiseEvent/Approval", json=1).status_code == 202
    before = host.wait_for_status("event-1")["lastUpdatedTime"]

    host.kill()
    host.start()
    start(host.client, "echo_input", "after-restart", json={})
    assert host.wait_for_status("after-restart")["createdTime"] >= before
    host.advance(3600 + 1)  # two hours after the timer was set, restart or not
    assert host.wait_for_status("timer-2h", timeout=10)["output"] == "timer fired"
