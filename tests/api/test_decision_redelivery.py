"""A poll rings again only for decisions the run still waits for and the store has held longer than
`DECISION_REDELIVERY_SECONDS` (`http_api.decision_delivery.redeliver_stalled`): never for a decision delivered a
moment ago (a normal delivery is in flight), never for one the run no longer waits for, never for a pending one.
The end-to-end path (a refused event, then a poll that delivers it) is `tests/e2e/test_e2e_approval_events.py`."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from agent_runs.settings import RunSettings
from http_api.decision_delivery import redeliver_stalled
from session_store import ApprovalRecord

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


class DoorbellRecorder:
    """Stands in for the Durable client: what was rung, and whether ringing fails (as an unreachable task hub does)."""

    def __init__(self, fail: bool = False) -> None:
        self.rung: list[tuple[str, str]] = []
        self.fail = fail

    async def send_approval(self, run_id: str, approval_id: str) -> None:
        self.rung.append((run_id, approval_id))
        if self.fail:
            raise RuntimeError("the task hub is unreachable")


def approval(approval_id: str, status: str, decided_seconds_ago: float | None) -> ApprovalRecord:
    decided_at = None if decided_seconds_ago is None else NOW - timedelta(seconds=decided_seconds_ago)
    return ApprovalRecord(approval_id=approval_id, run_id="r1", session_id="s1", call_id=f"c-{approval_id}",
                          tool="send_email", status=status, decided_at=decided_at)  # type: ignore[arg-type]


def redeliver(gateway: DoorbellRecorder, waiting_for: list[str], records: list[ApprovalRecord],
              stalled_after: timedelta) -> list[str]:
    return asyncio.run(redeliver_stalled(None, gateway, "r1", waiting_for, stalled_after=stalled_after,  # type: ignore[arg-type]
                                         now=NOW, records=records))


@pytest.mark.parametrize(
    ("record", "rung"),
    [
        (approval("a1", "approved", 6), True),  # decided 6 s ago and still awaited: stalled
        (approval("a1", "rejected", 60), True),
        (approval("a1", "approved", 4), False),  # a normal delivery may still be in flight
        (approval("a1", "approved", 5), False),  # exactly the threshold: not yet
        (approval("a1", "pending", None), False),  # nothing to deliver
        (approval("a1", "expired", 60), False),  # the run expires approvals itself
    ],
)
def test_a_poll_rings_again_only_for_decisions_held_past_the_threshold(record: ApprovalRecord, rung: bool) -> None:
    gateway = DoorbellRecorder()
    assert redeliver(gateway, ["a1"], [record], RunSettings().decision_redelivery_after) == (["a1"] if rung else [])
    assert gateway.rung == ([("r1", "a1")] if rung else [])


def test_a_decision_the_run_no_longer_waits_for_is_never_rung_again() -> None:
    gateway = DoorbellRecorder()
    assert redeliver(gateway, ["a2"], [approval("a1", "approved", 60)], timedelta(0)) == []
    assert gateway.rung == []


def test_the_threshold_is_the_setting_and_a_failed_ring_is_only_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECISION_REDELIVERY_SECONDS", "0")
    settings = RunSettings()
    assert settings.decision_redelivery_after == timedelta(0)
    gateway = DoorbellRecorder(fail=True)
    assert redeliver(gateway, ["a1"], [approval("a1", "approved", 0.001)], settings.decision_redelivery_after) == ["a1"]
    assert gateway.rung == [("r1", "a1")]  # tried; the poll itself does not fail


def test_a_negative_threshold_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECISION_REDELIVERY_SECONDS", "-1")
    with pytest.raises(ValueError, match="DECISION_REDELIVERY_SECONDS"):
        RunSettings()
