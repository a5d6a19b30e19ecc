"""Activity execution through the host's `FunctionExecutor` (this process or worker processes), bounded concurrency.

A work item stays in the store until its result is committed (result message + work deletion in one transaction),
so after a crash or restart it runs again: at-least-once, as in Azure.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from devhost.engine.http_activity import run_http_activity
from devhost.function_timeout import FunctionTimeoutError, bounded
from devhost.invoke import ActivityOutcome
from devhost.protocol import events as ev
from devhost.protocol.replay import BUILTIN_HTTP_ACTIVITY, unknown_function_message

if TYPE_CHECKING:
    from devhost.engine.runtime import EngineRuntime
    from devhost.engine.store import WorkItem

# Utils.SerializeCause of the WebJobs exception (the part of it Python code can read).
_TIMEOUT_CAUSE = {
    "$type": "Microsoft.Azure.WebJobs.Host.FunctionTimeoutException, Microsoft.Azure.WebJobs.Host",
    "ClassName": "Microsoft.Azure.WebJobs.Host.FunctionTimeoutException",
}


class ActivityRunner:
    def __init__(self, rt: EngineRuntime) -> None:
        self.rt = rt
        self._slots: asyncio.Semaphore | None = None

    def start(self, work: WorkItem) -> None:
        self.rt.spawn(self._run(work), name=f"activity {work.name}#{work.task_id}")

    async def _run(self, work: WorkItem) -> None:
        rt = self.rt
        if self._slots is None:
            self._slots = asyncio.Semaphore(rt.options.max_concurrent_activities)
        async with self._slots:
            if rt.stopping:
                return  # the host stops: a call not started yet stays stored and runs after the restart
            function = rt.index.activity(work.name)
            if work.name == BUILTIN_HTTP_ACTIVITY:
                outcome = await run_http_activity(work.input)
            elif function is None:
                known = [f.name for f in rt.index.activities()]
                text = unknown_function_message("activity", work.name, known)
                outcome = ActivityOutcome(ok=False, reason=text, details=None)
            else:
                try:
                    call = rt.functions.run_activity(function, work.input, await rt.client_binding_for(function))
                    outcome = await bounded(call, rt.options.function_timeout, function.name, rt.functions)
                except FunctionTimeoutError as exc:
                    # TaskActivityShim: a FunctionTimeoutError fails the task like a user error, with the WebJobs
                    # exception's message (no RpcException wrapper, so one space after "failed:").
                    outcome = ActivityOutcome(ok=False, reason=f"Activity function '{function.name}' failed: {exc}",
                                              details=json.dumps(_TIMEOUT_CAUSE | {"Message": str(exc)}))
        if rt.closed:
            return  # the engine stopped meanwhile: the work item stays stored and runs again after a restart
        now = rt.clock.now()
        if outcome.ok:
            event = ev.task_completed(now, work.task_id, outcome.result_json)
        else:
            event = ev.task_failed(now, work.task_id, outcome.reason or "", outcome.details)
        copies = 2 if rt.options.faults.duplicate_activity_results else 1
        with rt.commit("activity") as commit:
            for _ in range(copies):
                commit.send(work.instance_id, work.execution_id, event)
            commit.tx.delete_work(work)
