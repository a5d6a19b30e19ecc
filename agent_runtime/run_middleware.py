"""Run (agent) middleware: seed 000's onion around a whole run, for both runners.

The in-process runner wraps the run in the chain at once (`run_around`). A durable run cannot: it starts in one
activity and finishes in another, maybe days and several processes later. It runs the chain twice instead:

- `run_before` (the start activity) runs the chain with an innermost `call_next` that stops it: code before
  `call_next` runs; a layer that short-circuits (sets `context.result` and returns, or raises `MiddlewareTermination`)
  ends the run right there, with upstream post-processing run or skipped exactly as in-process;
- `run_after` (the finish activity) runs the chain again with `context.resumed = True` and an innermost `call_next`
  that hands over the finished run's `RunResult`: code after `call_next` post-processes the real result.

`RunMiddleware` layers (`before_run` / `after_run` hooks) are exact: their `before_run` is skipped when resumed, so
each hook runs once per run. A plain onion layer's code before `call_next` runs again in the finish activity (Python
cannot suspend a coroutine across processes): keep it free of side effects, or guard them with
`if not context.resumed`. Its decision must replay the same: a layer that short-circuits in the finish activity (a
cache filled meanwhile) replaces the finished run's result with its own. `context.metadata` and `context.options` set
before `call_next` are persisted (small, JSON) and restored for the finish activity.

How the chain ends decides the run, identically in both runners (`settle`):
- `context.result` is a `str`, a `Message` or a `RunResult`: that is the run's result (`str`/`Message`: completed);
- nothing set and `MiddlewareTermination` raised: failed, code `middleware_terminated`;
- nothing set otherwise: failed, code `run_middleware_no_result`; another type: `run_middleware_invalid_result`;
- any other exception from a layer: failed, code `run_middleware_error`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .messages import Message, Usage
from .middleware import AgentRunContext, CallNext, MiddlewareLike, MiddlewarePipeline
from .run_result import RunResult, failure_reason
from .steps import MIDDLEWARE_TERMINATED

logger = logging.getLogger(__name__)

RUN_MIDDLEWARE_ERROR = "run_middleware_error"
RUN_MIDDLEWARE_NO_RESULT = "run_middleware_no_result"
RUN_MIDDLEWARE_INVALID_RESULT = "run_middleware_invalid_result"
REASON_RUN_MIDDLEWARE = "run_middleware"
"""The reason of a run a run middleware answered (short-circuit or termination with a result)."""


class RunMiddleware:
    """A run middleware written as two hooks (seed 001's before/after turn) instead of one `process`.

    `before_run` may change `context.messages`/`options`/`metadata`, or end the run: set `context.result` (upstream
    layers still post-process it) or raise `MiddlewareTermination`. `after_run` sees the run's `RunResult` in
    `context.result` and may replace it. In a durable run each hook runs once, in the start and finish activities.
    """

    async def before_run(self, context: AgentRunContext) -> None:
        return None

    async def after_run(self, context: AgentRunContext) -> None:
        return None

    async def process(self, context: AgentRunContext, call_next: CallNext) -> None:
        if not context.resumed:
            await self.before_run(context)
            if context.result is not None:
                return  # short-circuit: the layers inside and the run itself are skipped
        await call_next()
        await self.after_run(context)


class _CoreReached(BaseException):
    """Stops the chain where the run would start (a BaseException: a layer's `except Exception` lets it pass)."""


class _CoreFailed(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


async def run_around(
    layers: Sequence[MiddlewareLike],
    context: AgentRunContext,
    core: Callable[[AgentRunContext], Awaitable[RunResult]],
    *,
    detailed_errors: bool = False,
) -> tuple[RunResult, bool]:
    """The whole onion in one go (in-process). Returns (result, whether the run itself ran). An exception raised
    by the run itself (not by a layer) propagates unchanged."""
    ran: RunResult | None = None

    async def final(ctx: AgentRunContext) -> None:
        nonlocal ran
        try:
            ran = ctx.result = await core(ctx)
        except Exception as error:
            raise _CoreFailed(error) from error

    usage = None
    try:
        await MiddlewarePipeline(layers).execute(context, final)
        usage = ran.usage if ran is not None else None
    except _CoreFailed as failed:
        raise failed.error from None
    except Exception as error:
        return _error_result(context, error, detailed_errors, usage=ran.usage if ran else None), ran is not None
    return settle(context, usage=usage), ran is not None


async def run_before(
    layers: Sequence[MiddlewareLike], context: AgentRunContext, *, detailed_errors: bool = False
) -> RunResult | None:
    """Pre-processing (a durable run's start activity): None when the chain reached the run (it proceeds; the
    context holds what the layers prepared), else the run's result."""

    async def final(ctx: AgentRunContext) -> None:
        raise _CoreReached

    try:
        await MiddlewarePipeline(layers).execute(context, final)
    except _CoreReached:
        context.result = None
        return None
    except Exception as error:
        return _error_result(context, error, detailed_errors)
    return settle(context)


async def run_after(
    layers: Sequence[MiddlewareLike], context: AgentRunContext, result: RunResult, *, detailed_errors: bool = False
) -> RunResult:
    """Post-processing (a durable run's finish activity): the chain around the finished run's `result`."""
    context.resumed, context.result, context.terminated = True, None, False

    async def final(ctx: AgentRunContext) -> None:
        ctx.result = result

    try:
        await MiddlewarePipeline(layers).execute(context, final)
    except Exception as error:
        return _error_result(context, error, detailed_errors, usage=result.usage)
    return settle(context, usage=result.usage)


def settle(context: AgentRunContext, *, usage: Usage | None = None) -> RunResult:
    """What the chain left in `context.result`, as the run's result (the rules in the module docstring)."""
    result: Any = context.result
    usage = usage or Usage()
    if isinstance(result, RunResult):
        return result
    if isinstance(result, str | Message):
        message = result if isinstance(result, Message) else Message.assistant(result)
        return RunResult(
            run_id=context.run_id,
            status="completed",
            reason=REASON_RUN_MIDDLEWARE,
            text=message.text,
            usage=usage,
            messages=[message],
        )
    if result is None:
        if context.terminated:
            detail = context.termination_message or "run middleware terminated the run without a result"
            return _failed(context, MIDDLEWARE_TERMINATED, detail, usage)
        return _failed(context, RUN_MIDDLEWARE_NO_RESULT, "run middleware ended the run without a result", usage)
    return _failed(
        context,
        RUN_MIDDLEWARE_INVALID_RESULT,
        f"run middleware set a {type(result).__name__} result; expected a str, a Message or a RunResult",
        usage,
    )


def _error_result(
    context: AgentRunContext, error: Exception, detailed: bool, *, usage: Usage | None = None
) -> RunResult:
    logger.warning("run middleware of run %s failed: %s", context.run_id, type(error).__name__, exc_info=True)
    # The exception text may hold anything (data, secrets): only the type unless the agent asks for details.
    detail = f"{type(error).__name__}: {error}" if detailed else type(error).__name__
    return _failed(context, RUN_MIDDLEWARE_ERROR, f"a run middleware raised {detail}", usage or Usage())


def _failed(context: AgentRunContext, code: str, message: str, usage: Usage) -> RunResult:
    return RunResult(run_id=context.run_id, status="failed", reason=failure_reason(code, message), usage=usage)


__all__ = [
    "MIDDLEWARE_TERMINATED",
    "REASON_RUN_MIDDLEWARE",
    "RUN_MIDDLEWARE_ERROR",
    "RUN_MIDDLEWARE_INVALID_RESULT",
    "RUN_MIDDLEWARE_NO_RESULT",
    "RunMiddleware",
    "run_after",
    "run_around",
    "run_before",
    "settle",
]
