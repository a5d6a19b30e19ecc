"""The run middleware split of `agent_runtime.run_middleware`: what runs in which phase, and how a chain settles."""

from __future__ import annotations

from agent_runtime.messages import Message
from agent_runtime.middleware import AgentRunContext, CallNext, MiddlewarePipeline, MiddlewareTermination
from agent_runtime.run_middleware import RunMiddleware, run_after, run_around, run_before
from agent_runtime.run_result import RunResult


def ctx() -> AgentRunContext:
    return AgentRunContext(agent_name="a", messages=[Message.user("hi")], run_id="r1")


def finished(text: str = "answer") -> RunResult:
    return RunResult(run_id="r1", status="completed", reason="stop", text=text)


class Hooks(RunMiddleware):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def before_run(self, context: AgentRunContext) -> None:
        self.log.append("before")
        context.metadata["hooks"] = 1

    async def after_run(self, context: AgentRunContext) -> None:
        self.log.append(f"after:{context.result.text}")


async def test_hooks_run_once_across_the_two_phases_and_onion_code_sees_resumed() -> None:
    log: list[str] = []

    async def onion(context: AgentRunContext, call_next: CallNext) -> None:
        log.append(f"onion-pre resumed={context.resumed}")
        await call_next()
        log.append("onion-post")

    context = ctx()
    assert await run_before([Hooks(log), onion], context) is None  # reached the run: it proceeds
    assert log == ["before", "onion-pre resumed=False"] and context.metadata == {"hooks": 1}
    result = await run_after([Hooks(log), onion], context, finished())
    assert log[2:] == ["onion-pre resumed=True", "onion-post", "after:answer"]
    assert result.text == "answer"


async def test_a_layer_catching_exception_does_not_swallow_the_stop_at_the_run() -> None:
    async def careful(context: AgentRunContext, call_next: CallNext) -> None:
        try:
            await call_next()
        except Exception:
            context.result = "fallback"

    assert await run_before([careful], ctx()) is None


async def test_termination_result_and_errors_settle_the_same_in_one_go_and_in_two_phases() -> None:
    async def terminate(context: AgentRunContext, call_next: CallNext) -> None:
        raise MiddlewareTermination("no", result=Message.assistant("blocked"))

    async def explode(context: AgentRunContext, call_next: CallNext) -> None:
        raise KeyError("secret-value")

    async def core(context: AgentRunContext) -> RunResult:
        raise AssertionError("the run must not start")

    one_go, ran = await run_around([terminate], ctx(), core)
    two_phase = await run_before([terminate], ctx())
    assert not ran and two_phase is not None
    assert (one_go.status, one_go.text) == (two_phase.status, two_phase.text) == ("completed", "blocked")

    failed, _ = await run_around([explode], ctx(), core)
    assert (failed.status, failed.code) == ("failed", "run_middleware_error")
    assert "secret-value" not in failed.reason  # only the type, unless the agent asks for detailed errors
    detailed = await run_before([explode], ctx(), detailed_errors=True)
    assert detailed is not None and "secret-value" in detailed.reason


async def test_post_processing_termination_without_result_keeps_the_real_result() -> None:
    async def stop_after(context: AgentRunContext, call_next: CallNext) -> None:
        await call_next()
        raise MiddlewareTermination("enough")

    result = await run_after([stop_after], ctx(), finished("real"))
    assert (result.status, result.text) == ("completed", "real")


async def test_pipeline_puts_the_termination_result_in_the_context() -> None:
    async def layer(context: AgentRunContext, call_next: CallNext) -> None:
        raise MiddlewareTermination("stop", result="early")

    context = await MiddlewarePipeline([layer]).execute(ctx(), lambda c: None)  # type: ignore[arg-type,return-value]
    assert (context.result, context.terminated, context.termination_message) == ("early", True, "stop")
