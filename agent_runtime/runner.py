"""The in-process runner: drives the sans-IO loop with the step functions, in one process, without Durable.

It is the reference driver (the durable orchestrator translates the same commands into activities), the non-durable
mode, and the baseline the durable runner is measured against. Approvals are answered by an `approver` callback when
one is given; otherwise the run stops with status `requires_action`, and `resume()` continues it with the decisions.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .agents import AgentDefinition
from .conversation import ConversationLog, InMemoryConversationLog
from .loop import AgentLoop
from .loop_types import (
    ApprovalDecision,
    AwaitApproval,
    CallModel,
    Cancel,
    Fail,
    Finish,
    LoopCommand,
    LoopEvent,
    LoopState,
    RequestApproval,
    RunTools,
    ToolResults,
)
from .messages import (
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    Message,
    Usage,
    last_assistant_text,
    pending_approval_requests,
)
from .middleware import AgentRunContext, MiddlewarePipeline
from .models.errors import ModelError
from .models.types import ModelClient
from .spend import ModelPrices, RunBudget
from .steps import (
    OnUpdate,
    append_input_step,
    call_model_step,
    close_unresolved_calls_step,
    invoke_tool_step,
    record_approval_requests_step,
    record_approval_response_step,
)

logger = logging.getLogger(__name__)

RunStatusLike = Literal["completed", "failed", "cancelled", "requires_action"]
Approver = Callable[[FunctionApprovalRequestContent], Awaitable[FunctionApprovalResponseContent]]


class RunResult(BaseModel):
    """How a run ended (or paused). `messages`: what the run added to the conversation, in order."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_id: str
    status: RunStatusLike
    reason: str
    text: str = ""
    value: Any = None
    """The structured output (an instance of the agent's `output_type`) when the agent has one."""
    usage: Usage = Field(default_factory=Usage)
    messages: list[Message] = Field(default_factory=list)
    pending_approvals: list[FunctionApprovalRequestContent] = Field(default_factory=list)
    loop_state: LoopState | None = None
    """Set while `requires_action`: what `resume()` continues from."""


def _as_messages(input: str | Message | Sequence[Message]) -> list[Message]:
    if isinstance(input, str):
        return [Message.user(input)]
    if isinstance(input, Message):
        return [input]
    return list(input)


class AgentRunner:
    def __init__(
        self,
        agent: AgentDefinition,
        client: ModelClient,
        log: ConversationLog | None = None,
        *,
        approver: Approver | None = None,
        session_id: str | None = None,
        on_update: OnUpdate | None = None,
        budget: RunBudget | None = None,
        prices: ModelPrices | None = None,
    ) -> None:
        self.agent, self.client, self.approver = agent, client, approver
        # The agent's budget tightened by this runner's (a BudgetAboveAgentLimitError if it asks for more).
        self.budget = agent.run_budget(budget)
        self.prices = prices
        self.log = log if log is not None else InMemoryConversationLog()
        self.session_id = session_id
        self.on_update = on_update  # set: model calls stream and every update is passed on

    async def run(self, input: str | Message | Sequence[Message], *, run_id: str | None = None) -> RunResult:
        """Run the agent on new input, through the agent's run middleware."""
        run_id = run_id or uuid.uuid4().hex
        context = AgentRunContext(
            agent_name=self.agent.name, messages=_as_messages(input), run_id=run_id, session_id=self.session_id
        )

        async def execute(ctx: AgentRunContext) -> None:
            before = len(await self.log.messages())
            await append_input_step(self.log, run_id, ctx.messages)
            loop = AgentLoop(self.agent.loop_config(self.budget))
            ctx.result = await self._drive(loop, loop.start(), run_id, before)

        await MiddlewarePipeline(self.agent.run_middleware).execute(context, execute)
        if context.result is None:
            raise RuntimeError("run middleware ended the run without a result")
        return context.result

    async def resume(self, paused: RunResult, decisions: Sequence[FunctionApprovalResponseContent]) -> RunResult:
        """Continue a `requires_action` run with approval decisions (all, or some: it pauses again for the rest)."""
        if paused.status != "requires_action" or paused.loop_state is None:
            raise ValueError(f"run {paused.run_id} is {paused.status}, not waiting for approval")
        loop = AgentLoop(state=paused.loop_state.model_copy(deep=True))
        before = len(await self.log.messages()) - len(paused.messages)
        command: LoopCommand | None = None
        for response in decisions:
            decision = await record_approval_response_step(self.agent, self.log, paused.run_id, response)
            command = loop.send(decision)
        if command is None:
            return paused
        return await self._drive(loop, command, paused.run_id, before)

    async def cancel(self, paused: RunResult, reason: str | None = None) -> RunResult:
        """End a `requires_action` run: its waiting calls get "not run" results, the status becomes `cancelled`."""
        if paused.status != "requires_action" or paused.loop_state is None:
            raise ValueError(f"run {paused.run_id} is {paused.status}; only a paused run can be cancelled here")
        loop = AgentLoop(state=paused.loop_state.model_copy(deep=True))
        before = len(await self.log.messages()) - len(paused.messages)
        return await self._drive(loop, loop.send(Cancel(reason=reason)), paused.run_id, before)

    async def _drive(self, loop: AgentLoop, command: LoopCommand, run_id: str, before: int) -> RunResult:
        while True:
            if isinstance(command, Finish):
                await close_unresolved_calls_step(self.log, run_id, command)
                return await self._result(run_id, command.status, command.reason, command.usage, before)
            if isinstance(command, RequestApproval | AwaitApproval):
                if isinstance(command, RequestApproval):
                    await record_approval_requests_step(self.log, run_id, command)
                if self.approver is None:
                    result = await self._result(
                        run_id, "requires_action", "awaiting_approval", loop.state.usage, before
                    )
                    result.loop_state = loop.state.model_copy(deep=True)
                    return result
                command = await self._ask_approver(self.approver, loop, run_id)
                continue
            command = loop.send(await self._execute(command, run_id))

    async def _execute(self, command: CallModel | RunTools, run_id: str) -> LoopEvent:
        if isinstance(command, CallModel):
            try:
                return await call_model_step(
                    self.agent, self.client, self.log, run_id, command, on_update=self.on_update, prices=self.prices
                )
            except ModelError as error:
                return Fail(reason=f"model error: {error.message}")
            except Exception as error:  # e.g. a chat middleware refusing the call (UsageBudgetExceeded)
                logger.warning("model step of run %s failed", run_id, exc_info=True)
                return Fail(reason=f"model call failed: {type(error).__name__}: {error}")
        outcomes = await asyncio.gather(
            *(
                invoke_tool_step(self.agent, self.log, run_id, call, session_id=self.session_id)
                for call in command.calls
            )
        )
        return ToolResults(outcomes=list(outcomes))

    async def _ask_approver(self, approver: Approver, loop: AgentLoop, run_id: str) -> LoopCommand:
        requests = {r.function_call.call_id: r for r in await self._pending(run_id)}
        command: LoopCommand = AwaitApproval(pending=loop.awaiting_approval)
        for call_id in loop.awaiting_approval:
            response = await approver(requests[call_id])
            decision: ApprovalDecision = await record_approval_response_step(self.agent, self.log, run_id, response)
            command = loop.send(decision)
        return command

    async def _pending(self, run_id: str) -> list[FunctionApprovalRequestContent]:
        return [r for r in pending_approval_requests(await self.log.messages()) if r.id.startswith(f"{run_id}:")]

    async def _result(self, run_id: str, status: RunStatusLike, reason: str, usage: Usage, before: int) -> RunResult:
        added = (await self.log.messages())[before:]
        text = last_assistant_text(added)
        value = None
        if status == "completed" and self.agent.output_type is not None:
            try:
                value = self.agent.parse_output(text)
            except ValueError as error:  # pydantic's ValidationError and json's JSONDecodeError are ValueErrors
                status, reason = "failed", f"invalid structured output: {error}"
        return RunResult(
            run_id=run_id,
            status=status,
            reason=reason,
            text=text,
            value=value,
            usage=usage,
            messages=added,
            pending_approvals=await self._pending(run_id) if status == "requires_action" else [],
        )


__all__ = ["AgentRunner", "Approver", "RunResult"]
