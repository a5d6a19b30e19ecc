"""The agents of the run-semantics conformance table (`tests/e2e/test_e2e_run_semantics.py`): one agent per case of
seed 000's middleware control flow, so the in-process runner and durable runs execute the very same definitions.

`Trace` is a two-phase layer (`RunMiddleware`): it appends `<run id> <name>.before` / `<name>.after` to
`<E2E_MARKER_DIR>/run_middleware.trace`, so a test can tell which phases ran, and how often, across processes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fixture_agents.tools import lookup, slow_step
from pydantic import BaseModel

from agent_runtime.agents import AgentDefinition
from agent_runtime.messages import ChatResponse, Message
from agent_runtime.middleware import AgentRunContext, CallNext, ChatContext, MiddlewareTermination
from agent_runtime.run_middleware import RunMiddleware
from agent_runtime.run_result import RunResult

TRACE_FILE = "run_middleware.trace"


def trace(run_id: str, event: str) -> None:
    marker_dir = os.environ.get("E2E_MARKER_DIR")
    if marker_dir:
        with (Path(marker_dir) / TRACE_FILE).open("a", encoding="utf-8") as file:
            file.write(f"{run_id} {event}\n")


def traced(marker_dir: Path, run_id: str) -> list[str]:
    path = marker_dir / TRACE_FILE
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [line.split(" ", 1)[1] for line in lines if line.startswith(f"{run_id} ")]


class Trace(RunMiddleware):
    """Records its phases; before the run it also leaves a value in `context.metadata` for inner layers."""

    def __init__(self, name: str = "outer") -> None:
        self.name = name

    async def before_run(self, context: AgentRunContext) -> None:
        trace(context.run_id, f"{self.name}.before")
        context.metadata[self.name] = f"{self.name}-was-here"

    async def after_run(self, context: AgentRunContext) -> None:
        trace(context.run_id, f"{self.name}.after")


def _input_text(context: AgentRunContext) -> str:
    return " ".join(m.text for m in context.messages)


class ShortCircuit:
    """A cache hit: sets `context.result` (a str, a Message or a RunResult) and returns without `call_next`."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    async def process(self, context: AgentRunContext, call_next: CallNext) -> None:
        if self.kind == "str":
            context.result = "cached answer"
        elif self.kind == "message":
            context.result = Message.assistant("cached message")
        else:
            context.result = RunResult(run_id=context.run_id, status="completed", reason="cache", text="cached result")


class Terminate:
    """Raises `MiddlewareTermination` before or after `call_next`, with or without a result."""

    def __init__(self, phase: str, result: Any = None) -> None:
        self.phase, self.result = phase, result

    async def process(self, context: AgentRunContext, call_next: CallNext) -> None:
        if self.phase == "before":
            raise MiddlewareTermination("blocked by policy", result=self.result)
        await call_next()
        raise MiddlewareTermination("stopped after the run", result=self.result)


class Upper:
    """Post-processing that replaces the output text."""

    async def process(self, context: AgentRunContext, call_next: CallNext) -> None:
        await call_next()
        if isinstance(context.result, RunResult):
            context.result = context.result.model_copy(update={"text": context.result.text.upper()})


class ReadMetadata:
    """Post-processing that reads what an outer layer put in `context.metadata` before the run."""

    async def process(self, context: AgentRunContext, call_next: CallNext) -> None:
        await call_next()
        seen = context.metadata.get("outer", "nothing")
        context.result = context.result.model_copy(update={"text": f"{context.result.text} [{seen}]"})


class SeesOutcome:
    """Post-processing that records the status of the result it is given (`<run id> after:<status>`)."""

    async def process(self, context: AgentRunContext, call_next: CallNext) -> None:
        await call_next()
        trace(context.run_id, f"after:{context.result.status}")


class Guard:
    """Rewrites the input before the run (the model must see the rewritten text)."""

    async def process(self, context: AgentRunContext, call_next: CallNext) -> None:
        context.messages = [Message.user(_input_text(context).replace("secret", "[redacted]"))]
        await call_next()


class Explode:
    def __init__(self, after: bool = False) -> None:
        self.after = after

    async def process(self, context: AgentRunContext, call_next: CallNext) -> None:
        if self.after:
            await call_next()
        raise ValueError("the guardrail service is down")


class ChatTerminate:
    """Chat middleware: answers in place of the model (`with_result`), or stops without an answer."""

    def __init__(self, *, with_result: bool, after_model: bool = False) -> None:
        self.with_result, self.after_model = with_result, after_model

    async def process(self, context: ChatContext, call_next: CallNext) -> None:
        if self.after_model:
            await call_next()  # the model proposes a tool call; the layer overrules it
        result = ChatResponse(message=Message.assistant("the chat layer answered")) if self.with_result else None
        raise MiddlewareTermination("chat blocked", result=result)


class ChatSkip:
    """Chat middleware that returns without `call_next` and without a result (a bug the run must report)."""

    async def process(self, context: ChatContext, call_next: CallNext) -> None:
        return None


class Weather(BaseModel):
    city: str
    celsius: int


def _agent(name: str, **fields: Any) -> AgentDefinition:
    return AgentDefinition(name=name, instructions="You are a conformance test agent.", **fields)


mw_short_str = _agent("mw_short_str", run_middleware=[Trace(), ShortCircuit("str")])
mw_short_message = _agent("mw_short_message", run_middleware=[Trace(), ShortCircuit("message")])
mw_short_result = _agent("mw_short_result", run_middleware=[Trace(), ShortCircuit("result")])
mw_terminate_before = _agent("mw_terminate_before", run_middleware=[Trace(), Terminate("before", "blocked answer")])
mw_terminate_before_bare = _agent("mw_terminate_before_bare", run_middleware=[Trace(), Terminate("before")])
mw_terminate_after = _agent("mw_terminate_after", run_middleware=[Trace(), Terminate("after", "stopped answer")])
mw_terminate_after_bare = _agent("mw_terminate_after_bare", run_middleware=[Trace(), Terminate("after")])
mw_upper = _agent("mw_upper", run_middleware=[Trace(), Upper()])
mw_metadata = _agent("mw_metadata", run_middleware=[Trace(), ReadMetadata()])
mw_outcome = _agent("mw_outcome", run_middleware=[SeesOutcome()])
mw_guard = _agent("mw_guard", run_middleware=[Trace(), Guard()])
mw_error = _agent("mw_error", run_middleware=[Trace(), Explode()])
mw_error_after = _agent("mw_error_after", run_middleware=[Trace(), Explode(after=True)])
mw_chat_answer = _agent("mw_chat_answer", chat_middleware=[ChatTerminate(with_result=True)])
mw_chat_overrule = _agent(
    "mw_chat_overrule", tools=[lookup], chat_middleware=[ChatTerminate(with_result=True, after_model=True)]
)
mw_chat_bare = _agent("mw_chat_bare", chat_middleware=[ChatTerminate(with_result=False)])
mw_chat_empty = _agent("mw_chat_empty", chat_middleware=[ChatSkip()])
mw_structured = _agent("mw_structured", output_type=Weather)
mw_slow = _agent("mw_slow", tools=[slow_step], run_middleware=[Trace(), Upper(), ReadMetadata()])
mw_slow_stop = _agent("mw_slow_stop", tools=[slow_step], run_middleware=[Trace(), Terminate("after", "stopped answer")])
