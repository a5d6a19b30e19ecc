"""The onion contract: seed 000's "return vs raise MiddlewareTermination" table and its summary table, row by row."""

from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_runtime.middleware import MiddlewarePipeline, MiddlewareTermination


@dataclass
class Ctx:
    metadata: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    terminated: bool = False


class Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []

    async def operation(self, context: Ctx) -> None:
        self.lines.append("op")
        context.result = "real result"


class MiddlewareA:
    def __init__(self, out: list[str]) -> None:
        self.out = out

    async def process(self, context: Ctx, call_next) -> None:
        self.out.append("A: before")
        await call_next(context)
        self.out.append("A: after")


def middleware_b(out: list[str], exit_method: str, calls_next: bool):
    async def process(context: Ctx, call_next) -> None:
        out.append("B: before")
        if calls_next:
            await call_next()
        else:
            context.result = "early result"
        if exit_method == "terminate":
            raise MiddlewareTermination()
        if exit_method == "error":
            raise ValueError("Invalid arguments")

    return process


async def run(exit_method: str, calls_next: bool) -> tuple[list[str], Ctx]:
    recorder = Recorder()
    pipeline = MiddlewarePipeline([MiddlewareA(recorder.lines), middleware_b(recorder.lines, exit_method, calls_next)])
    context = await pipeline.execute(Ctx(), recorder.operation)
    return recorder.lines, context


async def test_return_runs_upstream_post_processing() -> None:
    # seed 000: `return` -> A: before -> B: before -> A: after
    lines, context = await run("return", calls_next=False)
    assert lines == ["A: before", "B: before", "A: after"]
    assert (context.result, context.terminated) == ("early result", False)


async def test_termination_skips_upstream_post_processing() -> None:
    # seed 000: `raise MiddlewareTermination` -> A: before -> B: before (no A: after)
    lines, context = await run("terminate", calls_next=False)
    assert lines == ["A: before", "B: before"]
    assert (context.result, context.terminated) == ("early result", True)


@pytest.mark.parametrize(
    ("exit_method", "calls_next", "operation_ran", "upstream_post"),
    [
        ("return", True, True, True),
        ("return", False, False, True),
        ("terminate", False, False, False),
        ("terminate", True, True, False),
    ],
)
async def test_summary_table(exit_method: str, calls_next: bool, operation_ran: bool, upstream_post: bool) -> None:
    lines, context = await run(exit_method, calls_next)
    assert ("op" in lines) is operation_ran
    assert ("A: after" in lines) is upstream_post
    assert context.result == ("real result" if operation_ran else "early result")
    assert context.terminated is (exit_method == "terminate")


@pytest.mark.parametrize("calls_next", [True, False])
async def test_other_exceptions_propagate_without_upstream_post_processing(calls_next: bool) -> None:
    recorder = Recorder()
    pipeline = MiddlewarePipeline([MiddlewareA(recorder.lines), middleware_b(recorder.lines, "error", calls_next)])
    with pytest.raises(ValueError, match="Invalid arguments"):
        await pipeline.execute(Ctx(), recorder.operation)
    assert "A: after" not in recorder.lines
    assert ("op" in recorder.lines) is calls_next


async def test_first_registered_is_outermost_and_context_changes_flow_inward() -> None:
    seen: list[str] = []

    async def outer(context: Ctx, call_next) -> None:
        context.metadata["by"] = ["outer"]
        await call_next()
        seen.append(f"outer sees {context.result}")

    async def inner(context: Ctx, call_next) -> None:
        context.metadata["by"].append("inner")
        await call_next()
        context.result = context.result.upper()

    async def operation(context: Ctx) -> None:
        seen.append("op after " + ",".join(context.metadata["by"]))
        context.result = "done"

    await MiddlewarePipeline([outer, inner]).execute(Ctx(), operation)
    assert seen == ["op after outer,inner", "outer sees DONE"]


async def test_empty_pipeline_runs_the_operation_and_bad_middleware_is_refused() -> None:
    recorder = Recorder()
    context = await MiddlewarePipeline([]).execute(Ctx(), recorder.operation)
    assert context.result == "real result"
    with pytest.raises(TypeError, match="not a middleware"):
        MiddlewarePipeline([lambda context, call_next: None])
