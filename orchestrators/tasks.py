"""Small helpers over the Durable SDK's tasks, shared by the orchestrators."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

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


def error_text(task: TaskBase) -> str:
    """The first line of a failed task's error (a compound task reports its failed child's), at most 500 chars."""
    error = task.result
    if isinstance(error, TaskBase):
        error = error.result
    return str(error).split("\n", 1)[0][:500]
