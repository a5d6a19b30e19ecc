"""Onion middleware pipelines (seeds 000 and 003).

A middleware is an object with `async process(context, call_next)` or a plain `async def (context, call_next)`.
The first registered middleware is the outermost layer. Inside `process`:
- `await call_next()` runs the inner layers and the real operation; code after it is post-processing;
- returning (with or without calling `call_next`) hands control back: upstream post-processing still runs;
- raising `MiddlewareTermination` ends the whole chain at once: no upstream post-processing runs, `execute` returns
  normally with `context.terminated = True` and `context.result` set to the exception's `result` when it carries one
  (seed 004: `MiddlewareTermination(message, *, result=None)`), else whatever `context.result` holds;
- raising anything else aborts the chain and propagates to the caller of `execute`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

ContextT = TypeVar("ContextT")

CallNext = Callable[..., Awaitable[None]]
"""`await call_next()` (seed 003) or `await call_next(context)` (seed 000): both run the rest of the chain."""


class MiddlewareTermination(Exception):
    """Raised by a middleware to end processing: skips every remaining layer and all upstream post-processing.

    In function middleware it also ends the agent loop after the current batch, without another model call.
    `result` (seed 004) is an early-return value: the pipeline puts it in `context.result`.
    """

    def __init__(self, message: str = "Middleware terminated execution.", *, result: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = result


class Middleware(Protocol[ContextT]):
    async def process(self, context: ContextT, call_next: CallNext) -> None: ...


MiddlewareLike = Middleware[Any] | Callable[[Any, CallNext], Awaitable[None]]


def _process_of(middleware: MiddlewareLike) -> Callable[[Any, CallNext], Awaitable[None]]:
    process = getattr(middleware, "process", None)
    if process is not None and inspect.iscoroutinefunction(process):
        return process
    if inspect.iscoroutinefunction(middleware):
        return middleware  # type: ignore[return-value]
    raise TypeError(
        f"{middleware!r} is not a middleware: expected `async process(context, call_next)` or an async function"
    )


class MiddlewarePipeline(Generic[ContextT]):
    """Threads the layers together; `execute(context, final)` makes the innermost `call_next` run `final`."""

    def __init__(self, middleware: Sequence[MiddlewareLike] = ()) -> None:
        self._layers = [_process_of(m) for m in middleware]

    def __len__(self) -> int:
        return len(self._layers)

    async def execute(self, context: ContextT, final: Callable[[ContextT], Awaitable[None]]) -> ContextT:
        async def run(index: int) -> None:
            if index == len(self._layers):
                await final(context)
                return

            async def call_next(_context: Any = None) -> None:
                await run(index + 1)

            await self._layers[index](context, call_next)

        try:
            await run(0)
        except MiddlewareTermination as termination:
            context.terminated = True  # type: ignore[attr-defined]
            context.termination_message = termination.message  # type: ignore[attr-defined]
            if termination.result is not None:
                context.result = termination.result  # type: ignore[attr-defined]
        return context
