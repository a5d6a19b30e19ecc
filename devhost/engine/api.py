"""The engine API the HTTP host codes against (the only engine module the HOST imports).

Contract (see also API_NOTES.md):
* Every method is a coroutine that must be awaited on the loop the engine was opened on (`DurableEngine.open`).
  The engine runs its scheduler as tasks on that loop; user code (activities, entity batches, orchestrator episodes)
  runs off it, on the worker's thread pool or in worker processes, bounded by host.json `functionTimeout`.
* Payloads cross the boundary as raw JSON *text* exactly as the extension would store it: `input_json` of
  `start_new` is the HTTP body text (the Python client sends `json.dumps(df_dumps(x))`, i.e. a JSON string literal),
  `raise_event`'s `input_json` likewise. `None` means "no body".
* Errors are the classes in `devhost.engine.errors` (re-exported here); map them to status codes as §2.2 says:
  UnknownFunctionError / InvalidInstanceIdError / InvalidEntityKeyError -> 400, InstanceNotFoundError -> 404,
  InstanceGoneError -> 410, InstanceExistsError -> 409, InvalidOperationError -> 400.
* `clock` is the engine's clock: `RealClock` or `VirtualClock` (`.advance(seconds)`, `.auto_skip`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

from devhost.app_loader import FunctionIndex
from devhost.engine.clock import Clock, RealClock, VirtualClock
from devhost.engine.errors import (
    EngineClosedError,
    EngineError,
    InstanceExistsError,
    InstanceGoneError,
    InstanceNotFoundError,
    InvalidEntityKeyError,
    InvalidInstanceIdError,
    InvalidOperationError,
    SimulatedCrash,
    UnknownFunctionError,
)
from devhost.engine.models import (
    EngineOptions,
    EntityQuery,
    EntityState,
    FaultPlan,
    InstanceQuery,
    InstanceStatus,
    RuntimeStatus,
)
from devhost.engine.runtime import EngineRuntime
from devhost.execution import FunctionExecutor

__all__ = [
    "Clock",
    "DurableEngine",
    "EngineClosedError",
    "EngineError",
    "EngineOptions",
    "EntityQuery",
    "EntityState",
    "FaultPlan",
    "InstanceExistsError",
    "InstanceGoneError",
    "InstanceNotFoundError",
    "InstanceQuery",
    "InstanceStatus",
    "InvalidEntityKeyError",
    "InvalidInstanceIdError",
    "InvalidOperationError",
    "RealClock",
    "RuntimeStatus",
    "SimulatedCrash",
    "UnknownFunctionError",
    "VirtualClock",
]


class DurableEngine:
    """A Durable Functions backend + the extension's C# orchestration rules, for one indexed app."""

    def __init__(self, runtime: EngineRuntime) -> None:
        self._rt = runtime

    @classmethod
    async def open(
        cls,
        index: FunctionIndex,
        *,
        state_path: str = ":memory:",
        clock: Clock | None = None,
        options: EngineOptions | None = None,
        functions: FunctionExecutor | None = None,
        client_binding_follows: bool = False,
    ) -> DurableEngine:
        """Open (or create) the SQLite state and start the scheduler on the running loop.

        Persisted work resumes: due timers fire, activities that were in flight run again (at-least-once),
        queued messages are delivered. `state_path=":memory:"` keeps everything in memory (tests). Activities run
        on `functions` (the caller keeps and closes it), by default in this process. `client_binding_follows`: the
        caller sets the `durableClient` binding once it listens (`set_client_binding`); activities that take it
        wait for it until then (work resumed here runs before the caller can listen).
        """
        runtime = EngineRuntime(index, state_path, clock or RealClock(), options or EngineOptions(), functions)
        if client_binding_follows:
            runtime.client_binding_set = asyncio.Event()
        await runtime.start()
        return cls(runtime)

    def set_client_binding(self, binding: Callable[[], str] | None) -> None:
        """Where activities that take a `durableClient` binding get its JSON from (the host's HTTP API)."""
        self._rt.client_binding = binding
        if binding is not None and self._rt.client_binding_set is not None:
            self._rt.client_binding_set.set()

    async def close(self) -> None:
        """Stop scheduling, wait for running user code to return (its results are committed), close the store."""
        await self._rt.stop()

    @property
    def clock(self) -> Clock:
        return self._rt.clock

    @property
    def index(self) -> FunctionIndex:
        return self._rt.index

    @property
    def options(self) -> EngineOptions:
        return self._rt.options

    @property
    def crashed(self) -> bool:
        """True after fault injection killed the engine (reopen a new engine on the same `state_path`)."""
        return self._rt.crashed

    # ----- orchestration instances -----

    async def start_new(
        self, name: str, instance_id: str | None = None, input_json: str | None = None, version: str | None = None
    ) -> str:
        """Schedule a new instance; returns its id (a new uuid4 hex when `instance_id` is None).

        Raises UnknownFunctionError (no such orchestrator; message is the extension's), InvalidInstanceIdError,
        InstanceExistsError (an instance with that id is Pending/Running/Suspended; a terminal one is replaced).
        """
        return await self._rt.start_new(name, instance_id, input_json, version)

    async def get_status(
        self, instance_id: str, *, show_history: bool = False, show_history_output: bool = False,
        show_input: bool = True,
    ) -> InstanceStatus | None:
        """Current status, or None if unknown. `.to_json()` gives the StatusResponsePayload dict."""
        return await self._rt.get_status(instance_id, show_history, show_history_output, show_input)

    async def query_instances(self, q: InstanceQuery) -> tuple[list[InstanceStatus], str | None]:
        """Instances matching the filters, ordered by creation; returns (page, continuation token or None)."""
        return await self._rt.query_instances(q)

    async def raise_event(self, instance_id: str, name: str, input_json: str | None) -> None:
        """Deliver `EventRaised{Name=name, Input=input_json}`. InstanceNotFoundError / InstanceGoneError."""
        await self._rt.raise_event(instance_id, name, input_json)

    async def terminate(self, instance_id: str, reason: str | None) -> None:
        """Terminate (output becomes the reason). InstanceNotFoundError; InstanceGoneError if already terminal."""
        await self._rt.terminate(instance_id, reason)

    async def suspend(self, instance_id: str, reason: str | None) -> None:
        """Suspend: new messages are held until `resume`. NotFound / Gone (terminal)."""
        await self._rt.suspend(instance_id, reason)

    async def resume(self, instance_id: str, reason: str | None) -> None:
        """Resume a suspended instance; held messages are delivered after `ExecutionResumed`. NotFound / Gone."""
        await self._rt.resume(instance_id, reason)

    async def rewind(self, instance_id: str, reason: str | None) -> None:
        """Rewind a Failed instance: failed activity / sub-orchestration results are removed and retried.

        InstanceNotFoundError; InvalidOperationError if the instance is not Failed.
        """
        await self._rt.rewind(instance_id, reason)

    async def restart(self, instance_id: str, *, new_instance_id: bool = True) -> str:
        """Start the same orchestrator with the original input; returns the (new or same) instance id.

        InstanceNotFoundError. With `new_instance_id=False` the instance must not be running (InstanceExistsError).
        """
        return await self._rt.restart(instance_id, new_instance_id)

    async def purge(self, instance_id: str) -> int:
        """Delete an instance and its history; returns the number deleted (0 if unknown)."""
        return await self._rt.purge(instance_id)

    async def purge_by(self, q: InstanceQuery) -> int:
        """Delete every instance matching the filters; returns the count."""
        return await self._rt.purge_by(q)

    # ----- entities -----

    async def signal_entity(self, name: str, key: str, operation: str, input_json: str | None) -> None:
        """Enqueue a client signal (`RequestMessage{signal:true, parent:null}`); `input_json` is the raw string the
        extension stores as `input` (see durable-protocol E.2.4; None = no input). UnknownFunctionError (400) if no
        entity function of that name exists; InvalidEntityKeyError for bad keys.
        """
        await self._rt.signal_entity(name, key, operation, input_json)

    async def read_entity(self, name: str, key: str) -> EntityState | None:
        """Committed state after the last completed batch; None if the entity does not exist (404)."""
        return await self._rt.read_entity(name, key)

    async def query_entities(self, q: EntityQuery) -> tuple[list[EntityState], str | None]:
        """Entities (optionally of one name), ordered by id; returns (page, continuation token or None)."""
        return await self._rt.query_entities(q)

    # ----- test control -----

    async def run_until_idle(self, timeout: float = 30.0, *, skip_timers: bool = False) -> None:
        """Wait until no episode, activity or entity batch is runnable or running.

        With `skip_timers=True` (virtual clock only) the clock jumps to each next pending timer until none is left
        (bounded by `timeout`, so eternal orchestrations end with TimeoutError). Raises TimeoutError.
        """
        await self._rt.run_until_idle(timeout, skip_timers)

    async def advance(self, seconds: float) -> None:
        """Virtual clock only: advance time by `seconds`, then run until idle (without skipping further timers)."""
        clock = self._rt.clock
        if not isinstance(clock, VirtualClock):
            raise InvalidOperationError("advance() needs a VirtualClock")
        clock.advance(seconds)
        await self._rt.run_until_idle(30.0, False)

    async def wait_for_status(
        self, instance_id: str, statuses: set[RuntimeStatus] | None = None, timeout: float = 30.0
    ) -> InstanceStatus:
        """Wait (event-driven, no polling) until the instance reaches one of `statuses` (default: terminal)."""
        return await self._rt.wait_for_status(instance_id, statuses, timeout)

    def now(self) -> datetime:
        return self._rt.clock.now()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._rt.loop
