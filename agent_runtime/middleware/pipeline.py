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
from dataclasses import dataclass
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


class ChatMiddleware:
    """A base for chat middleware that declares its optional flags with their defaults. Subclassing it is optional:
    any object with `process`, or an async function, serves too, and a flag it does not declare has its default."""

    holds_back_output: bool = False
    """The layer judges or rewrites the whole answer (an output guardrail): the model's answer then does not stream,
    so no token of it reaches a client before the layer has seen it."""

    async def process(self, context: Any, call_next: CallNext) -> None:
        await call_next()


MiddlewareLike = Middleware[Any] | Callable[[Any, CallNext], Awaitable[None]]


@dataclass(frozen=True)
class _Layer:
    """A middleware as the pipeline runs it: its `process`, and its flags (defaults for one that declares none)."""

    process: Callable[[Any, CallNext], Awaitable[None]]
    holds_back_output: bool = ChatMiddleware.holds_back_output


def _layer_of(middleware: MiddlewareLike) -> _Layer:
    process = getattr(middleware, "process", None)
    if process is not None and inspect.iscoroutinefunction(process):
        # Middleware is duck-typed (`Middleware`; `ChatMiddleware` is optional): its flags are read here, where it
        # becomes a layer, as its `process` is; a flag it does not declare has the default.
        return _Layer(process, bool(getattr(middleware, "holds_back_output", ChatMiddleware.holds_back_output)))
    if inspect.iscoroutinefunction(middleware):
        return _Layer(middleware)  # type: ignore[arg-type]
    raise TypeError(
        f"{middleware!r} is not a middleware: expected `async process(context, call_next)` or an async function"
    )


class MiddlewarePipeline(Generic[ContextT]):
    """Threads the layers together; `execute(context, final)` makes the innermost `call_next` run `final`."""

    def __init__(self, middleware: Sequence[MiddlewareLike] = ()) -> None:
        self._layers = [_layer_of(m) for m in middleware]

    @property
    def holds_back_output(self) -> bool:
        """Whether a layer judges or rewrites the whole answer (`ChatMiddleware.holds_back_output`)."""
        return any(layer.holds_back_output for layer in self._layers)

    def __len__(self) -> int:
        return len(self._layers)

    async def execute(self, context: ContextT, final: Callable[[ContextT], Awaitable[None]]) -> ContextT:
        async def run(index: int) -> None:
            if index == len(self._layers):
                await final(context)
                return

            async def call_next(_context: Any = None) -> None:
                await run(index + 1)

            await self._layers[index].process(context, call_next)

        try:
            await run(0)
        except MiddlewareTermination as termination:
            context.terminated = True  # type: ignore[attr-defined]
            context.termination_message = termination.message  # type: ignore[attr-defined]
            if termination.result is not None:
                context.result = termination.result  # type: ignore[attr-defined]
        return context
