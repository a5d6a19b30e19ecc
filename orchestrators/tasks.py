"""Small helpers over the Durable SDK's tasks, shared by the orchestrators."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

import azure.durable_functions as df
from azure.durable_functions.models.Task import TaskBase, TaskState


def failed(task: TaskBase) -> bool:
    return task.state is TaskState.FAILED


def drain(task: TaskBase) -> Generator[Any, Any, None]:
    """Let work already started finish (a graceful cancel waits for it, so its writes land before the run or
    workflow closes); its failure no longer matters then."""
    if task.is_completed:
        return
    try:
        yield task
    except Exception:
        return


def failure_of(task: TaskBase) -> BaseException:
    """A failed task's error (a compound task reports its failed child's)."""
    error = task.result
    if isinstance(error, TaskBase):
        error = error.result
    return error if isinstance(error, BaseException) else Exception(str(error))


def error_text(task: TaskBase) -> str:
    """The first line of a failed task's error, at most 500 chars."""
    return str(failure_of(task)).split("\n", 1)[0][:500]


class StepTasks:
    """A step's activity tasks and the work to race: a batch of several is gathered with `task_all`; one task is raced
    as it is (a `task_all` of one completes and fails with it, and would cost the SDK and the host a compound action on
    every replay). `again` schedules those that failed once more, each with its own input, as Durable's own retry does:
    a task that succeeded or still runs is kept (its tool does not run twice). Deterministic: the same tasks fail on
    every replay, so the same ones are scheduled again, in the same order."""

    def __init__(self, context: df.DurableOrchestrationContext, starts: Sequence[Callable[[], TaskBase]]) -> None:
        self._context = context
        self._starts = tuple(starts)
        self.tasks = [start() for start in self._starts]
        self.work = self._gathered()

    def again(self) -> None:
        self.tasks = [start() if failed(task) else task for start, task in zip(self._starts, self.tasks, strict=True)]
        self.work = self._gathered()

    def _gathered(self) -> TaskBase:
        return self.tasks[0] if len(self.tasks) == 1 else self._context.task_all(self.tasks)
