"""Payloads between the run orchestrators, the delivery orchestration and their activities (small: ids only)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field

ORCHESTRATOR_NAME = "notification_delivery"
WAKE_EVENT = "notify"
# Deliveries per execution before continue-as-new (keeps the replayed history flat).
STEPS_PER_EXECUTION = 50


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NotificationFlags(BaseModel):
    """What a run (`RunInput`) or workflow (`WorkflowRef`) does about notifications, decided at its start
    (`starting.prepare_notifications`), a base of both. Each flag is written only when set, so the inputs of histories
    in flight and golden ones keep their shape (the flags, when set, now come first: JSON objects are unordered)."""

    notify: bool = Field(default=False, exclude_if=lambda notify: not notify)
    """Notifications were configured when the run started: it records its events after each transition (`hooks`)."""
    notify_gives_up: bool = Field(default=False, exclude_if=lambda gives_up: not gives_up)
    """Set with `notify` by runs started since a recording could be given up (`hooks`): a failing one is given up
    after days, or when the run is cancelled while it waits; histories from before retry for good."""
    notify_notes_cancels: bool = Field(default=False, exclude_if=lambda notes: not notes)
    """Set with `notify_gives_up` by runs started since a recording given up for a cancel is noted in the run's
    delivery log too (`hooks`): histories from before went on from the cancel without that note's activity."""

    def notifying(self, flags: NotificationFlags) -> Self:
        """This input with the flags a run's start decided."""
        return self.model_copy(update=dict(flags))


class NotifyInput(_Payload):
    """After a transition of a run: record what its stored state implies, then start or wake its deliveries."""

    run_id: str
    session_id: str
    agent: str
    what: Literal["approvals", "finished"]
    seq: int | None = None
    """Where the run stood when it notified (its own deterministic position, from its orchestration): orders the
    events this call records after those of every earlier call, whatever the clocks of the hosts that record them."""


class RecordingGivenUp(_Payload):
    """A run's `notify_run` call that kept failing for `backoff.STEP_GIVE_UP_AFTER` and was given up (`hooks`)."""

    step: NotifyInput
    failing_since: datetime
    why: Literal["failing", "cancelled"] = "failing"
    """`cancelled`: the run was cancelled while the recording waited to be tried again (before: only `failing`)."""


class NotifyResult(_Payload):
    recorded: int = 0
    subscriptions: int = 0
    error: str | None = None


class DeliveryInput(_Payload):
    run_id: str
    session_id: str
    subscription: str
    attempt: int = Field(default=0, ge=0)
    """Attempts of the head event so far (each one reached the receiver, or tried to)."""
    failures: int = Field(default=0, ge=0)
    """Consecutive failures of the delivery step itself (the activity raised: the store is down, a bug)."""
    failing_since: datetime | None = None
    """When the step started failing (the orchestration's time): after `backoff.STEP_GIVE_UP_AFTER` the event is
    given up."""
    entry: str | None = None
    """A redelivery's own orchestration: only this outbox entry (the run's orchestration skips redeliveries)."""


class DeliveryStep(_Payload):
    outcome: Literal["delivered", "abandoned", "retry", "idle", "stop"]
    final: bool = False
    """Nothing more will come: the run's final event was delivered, or nothing is pending after the run ended."""
    retry_in_seconds: float | None = None
    recheck_in_seconds: float | None = None
    """Idle, not final: look again after this long unless woken (none, from older code: woken only, so histories
    from before replay as recorded)."""
    end_missing: bool = False
    """Idle: the run has ended, and its end's event (wanted here) is neither recorded nor noted as given up."""


class SlackResponseInput(_Payload):
    """An update of a Slack message through its interaction's `response_url`, stored in the run's session."""

    session_id: str
    key: str
    attempt: int = Field(default=0, ge=0)


def delivery_instance_id(subscription: str, run_id: str, redelivery: str | None = None) -> str:
    """The run's delivery orchestration for a subscription, or (`redelivery`: its nonce) that of one redelivery."""
    return f"notify-{subscription}-{run_id}" + (f"-{redelivery}" if redelivery else "")
