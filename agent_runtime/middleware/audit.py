"""Audit logging: one structured record per run, model call or tool call - what ran, for whom, how it ended, how long
it took. Arguments and message contents are left out by default (they may hold personal data or secrets)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from .contexts import AgentRunContext, ChatContext, FunctionInvocationContext
from .pipeline import CallNext, MiddlewareTermination

AuditSink = Callable[[dict[str, Any]], None]

_logger = logging.getLogger("agent_runtime.audit")


def log_sink(record: dict[str, Any]) -> None:
    _logger.info("audit %s", record["event"], extra={"audit": record})


class AuditLogMiddleware:
    """Usable in all three pipelines; the record describes whichever context it wraps."""

    def __init__(
        self,
        sink: AuditSink = log_sink,
        *,
        include_arguments: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sink, self.include_arguments, self.clock = sink, include_arguments, clock

    def _describe(self, context: Any) -> dict[str, Any]:
        if isinstance(context, FunctionInvocationContext):
            record: dict[str, Any] = {
                "event": "tool_call",
                "tool": context.tool.name,
                "call_id": context.call_id,
                "run_id": context.tool_context.run_id,
                "agent": context.tool_context.agent_name,
            }
            if self.include_arguments:
                record["arguments"] = context.arguments.model_dump(mode="json")
            return record
        if isinstance(context, ChatContext):
            return {
                "event": "model_call",
                "run_id": context.run_id,
                "agent": context.agent_name,
                "iteration": context.iteration,
                "model": context.options.model,
                "messages": len(context.messages),
            }
        if isinstance(context, AgentRunContext):
            return {
                "event": "run",
                "run_id": context.run_id,
                "agent": context.agent_name,
                "session_id": context.session_id,
            }
        return {"event": type(context).__name__}

    async def process(self, context: Any, call_next: CallNext) -> None:
        record = self._describe(context)
        started = self.clock()
        outcome = "ok"
        try:
            await call_next()
        except MiddlewareTermination:
            outcome = "terminated"
            raise
        except Exception as error:
            outcome, record["error"] = "error", type(error).__name__
            raise
        finally:
            record["outcome"] = outcome
            record["duration_ms"] = round((self.clock() - started) * 1000, 3)
            usage = getattr(getattr(context, "result", None), "usage", None)
            if usage is not None:
                record["usage"] = usage.model_dump(exclude_none=True)
            self.sink(record)
