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
from typing import Any

from .agents import AgentDefinition
from .conversation import ConversationLog, InMemoryConversationLog, middleware_answer_message_id
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
    RequestApproval,
    RunTools,
    ToolResults,
)
from .mcp.config import McpConfigurationError
from .messages import (
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    Message,
    Usage,
    pending_approval_requests,
)
from .middleware import AgentRunContext
from .models.errors import ModelError
from .models.types import ModelClient
from .run_middleware import run_around
from .run_result import RunResult, RunStatusLike, build_run_result, failure_reason
from .spend import ModelPrices, RunBudget
from .steps import (
    ChatMiddlewareEnded,
    OnUpdate,
    append_input_step,
    call_model_step,
    close_unresolved_calls_step,
    invoke_tool_step,
    record_approval_requests_step,
    record_approval_response_step,
)
from .tools import EffectLedger

logger = logging.getLogger(__name__)


class ToolDiscoveryError(RuntimeError):
    """A run's MCP tools could not be listed (a required server is down or misconfigured)."""


Approver = Callable[[FunctionApprovalRequestContent], Awaitable[FunctionApprovalResponseContent]]


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
        effects: EffectLedger | None = None,
    ) -> None:
        self.agent, self.client, self.approver = agent, client, approver
        # The agent's budget tightened by this runner's (a BudgetAboveAgentLimitError if it asks for more).
        self.budget = agent.run_budget(budget)
        self.prices = prices
        self.log = log if log is not None else InMemoryConversationLog()
        self.session_id = session_id
        self.on_update = on_update  # set: model calls stream and every update is passed on
        self.effects = effects  # the ledger tools record their side effects in (`ToolContext.record_effect_once`)

    async def run(self, input: str | Message | Sequence[Message], *, run_id: str | None = None) -> RunResult:
        """Run the agent on new input, through the agent's run middleware."""
        run_id = run_id or uuid.uuid4().hex
        context = AgentRunContext(
            agent_name=self.agent.name, messages=_as_messages(input), run_id=run_id, session_id=self.session_id
        )

        before = len(await self.log.messages())

        async def execute(ctx: AgentRunContext) -> RunResult:
            await append_input_step(self.log, run_id, ctx.messages)
            try:
                agent, mcp_tools = await self._discover(run_id)
            except ToolDiscoveryError as error:
                return await self._result(run_id, "failed", f"tool_discovery_failed: {error}", Usage(), before)
            loop = AgentLoop(self.agent.loop_config(self.budget))
            result = await self._drive(agent, loop, loop.start(), run_id, before)
            result.mcp_tools = mcp_tools
            return result

        result, ran = await run_around(
            self.agent.run_middleware, context, execute, detailed_errors=self.agent.include_detailed_errors
        )
        if not ran:
            # The chain ended the run before it started: its input and answer are stored as a durable run does.
            await append_input_step(self.log, run_id, context.messages)
            if result.text:
                answer = Message.assistant(result.text).model_copy(
                    update={"message_id": middleware_answer_message_id(run_id), "author_name": self.agent.name}
                )
                await self.log.append(answer)
        # What the run added to the conversation, whatever result object the chain settled on.
        return result.model_copy(update={"messages": (await self.log.messages())[before:]})

    async def resume(self, paused: RunResult, decisions: Sequence[FunctionApprovalResponseContent]) -> RunResult:
        """Continue a `requires_action` run with approval decisions (all, or some: it pauses again for the rest)."""
        if paused.status != "requires_action" or paused.loop_state is None:
            raise ValueError(f"run {paused.run_id} is {paused.status}, not waiting for approval")
        loop = AgentLoop(state=paused.loop_state.model_copy(deep=True))
        before = len(await self.log.messages()) - len(paused.messages)
        agent = await self._bound(paused.mcp_tools)
        command: LoopCommand | None = None
        for response in decisions:
            decision = await record_approval_response_step(agent, self.log, paused.run_id, response)
            command = loop.send(decision)
        if command is None:
            return paused
        result = await self._drive(agent, loop, command, paused.run_id, before)
        result.mcp_tools = paused.mcp_tools
        return result

    async def cancel(self, paused: RunResult, reason: str | None = None) -> RunResult:
        """End a `requires_action` run: its waiting calls get "not run" results, the status becomes `cancelled`."""
        if paused.status != "requires_action" or paused.loop_state is None:
            raise ValueError(f"run {paused.run_id} is {paused.status}; only a paused run can be cancelled here")
        loop = AgentLoop(state=paused.loop_state.model_copy(deep=True))
        before = len(await self.log.messages()) - len(paused.messages)
        agent = await self._bound(paused.mcp_tools)
        return await self._drive(agent, loop, loop.send(Cancel(reason=reason)), paused.run_id, before)

    async def _discover(self, run_id: str) -> tuple[AgentDefinition, list[dict[str, Any]]]:
        """List the agent's MCP tools once for this run (an unreachable required server fails the run's start)."""
        if not self.agent.mcp_servers:
            return self.agent, []
        from .mcp.discovery import McpDiscoveryError, discover_tools

        try:
            discovered = await discover_tools(self.agent.mcp_servers, [t.name for t in self.agent.tools])
        except (McpDiscoveryError, McpConfigurationError) as error:
            raise ToolDiscoveryError(str(error)) from error
        specs = [spec.model_dump(mode="json") for spec in discovered.tools]
        return await self._bound(specs), specs

    async def _bound(self, mcp_tools: Sequence[dict[str, Any]]) -> AgentDefinition:
        return await self.agent.with_recorded_tools(mcp_tools) if self.agent.mcp_servers else self.agent

    async def _drive(
        self, agent: AgentDefinition, loop: AgentLoop, command: LoopCommand, run_id: str, before: int
    ) -> RunResult:
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
                command = await self._ask_approver(agent, self.approver, loop, run_id)
                continue
            command = loop.send(await self._execute(agent, command, run_id))

    async def _execute(self, agent: AgentDefinition, command: CallModel | RunTools, run_id: str) -> LoopEvent:
        if isinstance(command, CallModel):
            try:
                return await call_model_step(
                    agent, self.client, self.log, run_id, command, on_update=self.on_update, prices=self.prices
                )
            except ModelError as error:
                return Fail(reason=f"model error: {error.message}")
            except ChatMiddlewareEnded as ended:
                return Fail(reason=failure_reason(ended.code, ended.message))
            except Exception as error:  # e.g. a chat middleware refusing the call (UsageBudgetExceeded)
                logger.warning("model step of run %s failed", run_id, exc_info=True)
                return Fail(reason=f"model call failed: {type(error).__name__}: {error}")
        outcomes = await asyncio.gather(
            *(
                invoke_tool_step(agent, self.log, run_id, call, session_id=self.session_id, effects=self.effects)
                for call in command.calls
            )
        )
        return ToolResults(outcomes=list(outcomes))

    async def _ask_approver(
        self, agent: AgentDefinition, approver: Approver, loop: AgentLoop, run_id: str
    ) -> LoopCommand:
        requests = {r.function_call.call_id: r for r in await self._pending(run_id)}
        command: LoopCommand = AwaitApproval(pending=loop.awaiting_approval)
        for call_id in loop.awaiting_approval:
            response = await approver(requests[call_id])
            decision: ApprovalDecision = await record_approval_response_step(agent, self.log, run_id, response)
            command = loop.send(decision)
        return command

    async def _pending(self, run_id: str) -> list[FunctionApprovalRequestContent]:
        return [r for r in pending_approval_requests(await self.log.messages()) if r.id.startswith(f"{run_id}:")]

    async def _result(self, run_id: str, status: RunStatusLike, reason: str, usage: Usage, before: int) -> RunResult:
        added = (await self.log.messages())[before:]
        result = build_run_result(self.agent, run_id, status, reason, usage, added)
        if status == "requires_action":
            result.pending_approvals = await self._pending(run_id)
        return result


__all__ = ["AgentRunner", "Approver", "RunResult"]
