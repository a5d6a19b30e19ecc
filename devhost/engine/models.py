"""Pydantic models at the engine API boundary: statuses, queries, entity states, options, fault plans."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from devhost.protocol.actions import parse_to_jtoken
from devhost.protocol.timefmt import status_time


class RuntimeStatus(StrEnum):
    """`OrchestrationRuntimeStatus` names as the status payload spells them."""

    Running = "Running"
    Completed = "Completed"
    ContinuedAsNew = "ContinuedAsNew"
    Failed = "Failed"
    Canceled = "Canceled"
    Terminated = "Terminated"
    Pending = "Pending"
    Suspended = "Suspended"

    @property
    def is_terminal(self) -> bool:
        return self in (RuntimeStatus.Completed, RuntimeStatus.Failed, RuntimeStatus.Canceled, RuntimeStatus.Terminated)

    @property
    def dtfx_code(self) -> int:
        """`OrchestrationStatus` enum value used in ExecutionCompleted events."""
        return _DTFX_CODES[self]


_DTFX_CODES = {
    RuntimeStatus.Running: 0,
    RuntimeStatus.Completed: 1,
    RuntimeStatus.ContinuedAsNew: 2,
    RuntimeStatus.Failed: 3,
    RuntimeStatus.Canceled: 4,
    RuntimeStatus.Terminated: 5,
    RuntimeStatus.Pending: 6,
    RuntimeStatus.Suspended: 7,
}


class InstanceStatus(BaseModel):
    """One orchestration instance as `get_status` reports it. `*_json` fields are raw JSON text as stored."""

    name: str
    instance_id: str
    execution_id: str
    runtime_status: RuntimeStatus
    input_json: str | None = None
    output_json: str | None = None
    custom_status_json: str | None = None
    created_time: datetime
    last_updated_time: datetime
    parent_instance_id: str | None = None
    # Shaped `historyEvents` (only when asked with show_history): Orchestrator* removed, TaskScheduled merged.
    history_events: list[dict[str, Any]] | None = None
    show_input: bool = True

    def to_json(self) -> dict[str, Any]:
        """The extension's `StatusResponsePayload` as a dict (ready for `json.dumps`)."""
        payload: dict[str, Any] = {
            "name": self.name,
            "instanceId": self.instance_id,
            "runtimeStatus": self.runtime_status.value,
            "input": parse_to_jtoken(self.input_json) if self.show_input else None,
            "customStatus": parse_to_jtoken(self.custom_status_json),
            "output": parse_to_jtoken(self.output_json),
            "createdTime": status_time(self.created_time),
            "lastUpdatedTime": status_time(self.last_updated_time),
        }
        if self.history_events is not None:
            payload["historyEvents"] = self.history_events
        return payload


class InstanceQuery(BaseModel):
    """Filters of `GET instances/` and `DELETE instances/` (all optional; `top` + continuation page the result)."""

    created_time_from: datetime | None = None
    created_time_to: datetime | None = None
    runtime_status: list[RuntimeStatus] | None = None  # None: any status; []: none (a value no status has)
    instance_id_prefix: str | None = None
    top: int | None = None
    continuation_token: str | None = None
    show_input: bool = True


class EntityState(BaseModel):
    """Committed state of one entity (`state_json` is the JSON text the SDK returned, verbatim)."""

    name: str
    key: str
    exists: bool
    state_json: str | None = None
    last_operation_time: datetime | None = None

    @property
    def entity_id(self) -> str:
        return f"@{self.name}@{self.key}"

    def to_list_item(self, fetch_state: bool) -> dict[str, Any]:
        """One element of `GET entities/` (`DurableEntityStatus`)."""
        return {
            "entityId": {"name": self.name, "key": self.key},
            "lastOperationTime": status_time(self.last_operation_time) if self.last_operation_time else None,
            "state": parse_to_jtoken(self.state_json) if fetch_state and self.exists else None,
        }


class EntityQuery(BaseModel):
    name: str | None = None
    fetch_state: bool = False
    top: int | None = None
    continuation_token: str | None = None
    last_operation_time_from: datetime | None = None
    last_operation_time_to: datetime | None = None


class FaultPlan(BaseModel):
    """Fault injection for tests (all off by default). Random choices use `seed`, so a failing run replays.

    * `duplicate_activity_results`: every activity result is delivered twice (as a redelivered queue message would be).
    * `reorder_completions`: messages delivered to one orchestration episode are shuffled.
    * `batch_completions`: hold completions of an instance until this many are queued (or nothing else can run).
    * `crash_at`: commit steps at which the engine "dies" (`SimulatedCrash`): `episode_before_commit`,
      `episode_after_commit`, `activity_before_commit`, `entity_before_commit`. Each fires once (the Nth time
      the step is reached, N from `crash_after`), then the engine must be reopened on the same state file.
    """

    duplicate_activity_results: bool = False
    reorder_completions: bool = False
    batch_completions: int = 1
    crash_at: set[str] = Field(default_factory=set)
    crash_after: int = 1
    seed: int = 0


class EngineOptions(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    # host.json extensions.durableTask.maxConcurrent{Activity,Orchestrator,Entity}Functions (devhost applies them)
    max_concurrent_activities: int = 32
    max_concurrent_orchestrators: int = 32
    max_concurrent_entities: int = 16
    entity_batch_size: int = 5000
    task_hub: str = "TestHubName"
    # Threads running sync user code; default: enough for both limits, so blocked entities never starve activities.
    worker_threads: int | None = None
    faults: FaultPlan = Field(default_factory=FaultPlan)
    # Back-off for entity batches that failed with an internal error (redelivered until they succeed).
    entity_retry_seconds: float = 1.0
    # host.json `functionTimeout` (wall-clock seconds; None = unlimited). An activity past it fails with the host's
    # timeout text (the orchestrator sees a failed task); every operation of an entity batch fails and the state is
    # left unchanged; an orchestrator episode is aborted and its messages redelivered after `episode_retry_seconds`
    # (the extension's SessionAbortedException: the instance stays Running and retries, as on Azure).
    function_timeout_seconds: float | None = None
    episode_retry_seconds: float = 1.0
    # host.json extensions.durableTask.storageProvider.type: decides the long-timer fields of the trigger payload.
    storage_provider: str = "AzureStorage"

    @property
    def function_timeout(self) -> timedelta | None:
        return None if self.function_timeout_seconds is None else timedelta(seconds=self.function_timeout_seconds)
