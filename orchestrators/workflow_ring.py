"""A child run of a fail-fast parallel step rings its workflow when it fails (`activities.workflow_rings`), so the
step cancels the other branches instead of waiting for them: when its run ends `failed`, or when its orchestration
crashes (an unhandled error: the run's own code never got to report a failure). At most one ring per run, and none
for a run whose input names no workflow to ring (a run of its own, a branch of a step that waits for every branch,
a branch started before fail-fast)."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Any

import azure.durable_functions as df

from activities.workflow_rings import ChildFailed, ring_workflow

CRASH_TEXT_CHARS = 500  # the crash's first line, for the log (the orchestration's failure keeps all of it)


class WorkflowRing:
    def __init__(self, context: df.DurableOrchestrationContext) -> None:
        self._context = context
        self._attempted = False

    def failed(self, workflow_run_id: str | None, run_id: str) -> Generator[Any, Any, None]:
        """The run ended `failed`: ring, before its end is recorded for notifications (whose retries, with a
        failing store, can take days on durable timers)."""
        if workflow_run_id:
            yield from self._ring(ChildFailed(workflow_run_id=workflow_run_id, run_id=run_id))

    def crashed(self, crash: Exception) -> Generator[Any, Any, None]:
        """The orchestration is about to end `Failed` with `crash`: ring unless the run rang already. The ring's
        activity first closes the run `failed` (`run_crashed`), as its view would once the orchestration failed, so
        the step finds it failed. Read from the raw input: the crash may be that the input did not parse."""
        raw = self._context.get_input()
        workflow_run_id = raw.get("ring_workflow") if isinstance(raw, dict) else None
        if isinstance(workflow_run_id, str) and workflow_run_id:
            text = f"{type(crash).__name__}: {str(crash).split(chr(10), 1)[0]}"[:CRASH_TEXT_CHARS]
            yield from self._ring(
                ChildFailed(workflow_run_id=workflow_run_id, run_id=self._context.instance_id, crash=text)
            )

    def _ring(self, child: ChildFailed) -> Generator[Any, Any, None]:
        if self._attempted:  # rang at the run's failed end, then crashed (recording it for notifications)
            return
        self._attempted = True
        with contextlib.suppress(Exception):  # not rung: the step waits for its other branches, as it used to
            yield ring_workflow.call(self._context, child)
