"""The I/O steps of a run, shared by the in-process runner and the durable activities.

Each step reads the conversation from a `ConversationLog`, does its one piece of work, writes what it produced under
a deterministic message id (so running it twice upserts, never duplicates) and returns a *small* summary for the loop
(`ModelTurn`, `ToolOutcome`, `ApprovalDecision`): conversation content never travels through the loop or the
orchestration history.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import ParamSpec, TypeVar

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from .agents import AgentDefinition
from .check_threads import check_off_loop
from .content_sizes import MAX_CONTENT_BYTES, cut_text, fit_result, oversized_answer, streamed_chars
from .conversation import (
    ConversationLog,
    approval_id,
    approval_request_message_id,
    approval_response_message_id,
    idempotency_key,
    input_message_id,
    model_message_id,
    model_message_prefix,
    result_message_id,
)
from .loop import ApprovalAlreadyDecidedError, UnknownApprovalError
from .loop_types import (
    ApprovalDecision,
    CallModel,
    Finish,
    ModelTurn,
    RequestApproval,
    ToolCallRef,
    ToolInvocation,
    ToolOutcome,
)
from .messages import (
    ChatResponseUpdate,
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    Usage,
    copy_json,
    unanswered_function_calls,
)
from .middleware import ChatContext, FunctionInvocationContext, MiddlewarePipeline
from .models.errors import ModelError
from .models.types import ChatRequest, ModelClient
from .overrides import RunOverrides
from .spend import ModelPrices
from .tools import (
    EffectLedger,
    EffectLedgerUnavailableError,
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolReportedError,
    ToolTimeoutError,
)

logger = logging.getLogger(__name__)

OnUpdate = Callable[[ChatResponseUpdate], Awaitable[None]]
_P = ParamSpec("_P")
_T = TypeVar("_T")


class StepError(RuntimeError):
    """The conversation is not in the state the step was told it is in (a driver bug or a lost write)."""


class ChatMiddlewareEnded(RuntimeError):
    """Chat middleware ended a model call without an answer: the run fails with `code` (not retried: running the
    same middleware again decides the same). `middleware_terminated`: it raised `MiddlewareTermination` without a
    result; `chat_middleware_no_result`: a layer returned without calling `call_next` or setting a result."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


MIDDLEWARE_TERMINATED = "middleware_terminated"
MODEL_ANSWER_TOO_LARGE = "model_answer_too_large"
CHAT_MIDDLEWARE_NO_RESULT = "chat_middleware_no_result"


async def append_input_step(log: ConversationLog, run_id: str, messages: Sequence[Message]) -> list[str]:
    """Store the run's input messages (ids derived from the run id unless they carry one); returns their ids."""
    ids = []
    for index, message in enumerate(messages):
        stored = (
            message
            if message.message_id
            else message.model_copy(update={"message_id": input_message_id(run_id, index)})
        )
        await log.append(stored)
        ids.append(stored.message_id or "")
    return ids


# --------------------------------------------------------------------------------------------------- model


async def call_model_step(
    agent: AgentDefinition,
    client: ModelClient,
    log: ConversationLog,
    run_id: str,
    command: CallModel,
    *,
    on_update: OnUpdate | None = None,
    on_stream_end: Callable[[], Awaitable[None]] | None = None,
    overrides: RunOverrides | None = None,
    prices: ModelPrices | None = None,
    on_billed: Callable[[Usage], None] | None = None,
) -> ModelTurn:
    """One model call through the agent's chat middleware; stores the answer and summarises it for the loop.

    With `on_update` the call streams and every update is handed over as it arrives (the stored answer is the same);
    `on_stream_end` is awaited once the stream has ended, however it ended, before anything is stored.
    `overrides`: this run's extra instructions and output format (see `overrides.py`).
    With `prices` the turn's usage carries its cost (when the model has a price); a `ModelError` raised carries the
    priced usage of the failed attempt(s) the provider reported. `on_billed` is told what this call was billed, once.
    A redelivered step's turn also counts the answer of the earlier attempt it replaces (billed too): the stored
    answer's usage is everything this iteration's attempts were billed, bar those that raised.
    """
    middleware = MiddlewarePipeline[ChatContext](agent.chat_middleware)
    if on_update is not None and middleware.holds_back_output:
        on_update = on_stream_end = None  # no draft: the answer is only shown once the middleware has judged it
    # A redelivered step finds its first attempt's answer stored: that answer is replaced, not part of the prompt.
    own_prefix = model_message_prefix(run_id, command.iteration)
    conversation = await (log.messages() if agent.chat_middleware else log.read())  # middleware may change them
    history, replaced = _split_own_answer(conversation, own_prefix)
    overrides = overrides or RunOverrides()
    instructions = overrides.system_prompt(agent)
    system = [Message.system(instructions)] if instructions else []
    context = ChatContext(
        messages=[*system, *history],
        options=overrides.chat_options(agent, command.tool_choice),
        tools=agent.offered_tools(),
        agent_name=agent.name,
        run_id=run_id,
        iteration=command.iteration,
    )

    async def call_model(ctx: ChatContext) -> None:
        request = ChatRequest(messages=ctx.messages, tools=ctx.tools, options=ctx.options)
        if on_update is None:
            ctx.result = await client.get_response(request)
            return
        updates = []
        streamed = 0
        stream = client.get_streaming_response(request)
        try:
            async for update in stream:
                streamed += streamed_chars(update.contents)
                if streamed > MAX_CONTENT_BYTES:  # a runaway stream is given up, not read to its end
                    raise _answer_too_large(f"over {streamed:,} characters so far")
                updates.append(update)
                await on_update(update)
        finally:
            if streamed > MAX_CONTENT_BYTES and (close := getattr(stream, "aclose", None)) is not None:
                await close()
            if on_stream_end is not None:
                await on_stream_end()
        from .models.openai_wire import assemble_response  # the openai SDK's types: loaded by the first call

        ctx.result = assemble_response(updates)

    def priced(usage: Usage, answered_by: str | None = None) -> Usage:
        if not prices:
            return usage
        models = (context.options.model, default_model(client), answered_by)
        return usage.model_copy(update={"cost": prices.cost_of(usage, *models)})

    try:
        await middleware.execute(context, call_model)
    except ModelError as error:
        if error.usage is not None:
            error.usage = priced(error.usage)
        raise
    response = context.result
    if response is None:
        if context.terminated:
            raise ChatMiddlewareEnded(
                MIDDLEWARE_TERMINATED, context.termination_message or "chat middleware terminated the model call"
            )
        raise ChatMiddlewareEnded(CHAT_MIDDLEWARE_NO_RESULT, "chat middleware ended the call without a result")
    usage = None if response.usage is None else priced(response.usage, response.model_id)
    if (size := oversized_answer(response.messages)) is not None:
        # Checked before anything is stored: the store would refuse it, and every retry ask the model again.
        raise _answer_too_large(f"{size:,} bytes", usage=usage)
    if usage is not None and on_billed is not None:
        on_billed(usage)
    if replaced is not None:
        usage = replaced + usage
    calls: list[FunctionCallContent] = []
    seen = {call.call_id for m in history for call in m.function_calls}
    last = len(response.messages) - 1
    for index, message in enumerate(response.messages):
        stored = message.model_copy(
            update={
                "message_id": model_message_id(run_id, command.iteration, index),
                "author_name": agent.name,
                "contents": _unique_call_ids(message.contents, seen, f"{run_id}-{command.iteration}-{index}"),
                "usage": usage if index == last else None,  # the call's usage once, on its answer (a run's timeline)
            }
        )
        await log.append(stored)
        calls.extend(stored.function_calls)
    # A terminating layer's answer ends the run: its calls (if any) are closed as not run, never executed.
    tool_calls = [] if context.terminated else [await _summarise_call(agent, call) for call in calls]
    return ModelTurn(
        tool_calls=tool_calls,
        finish_reason=response.finish_reason,
        usage=usage,
        has_text=bool(response.text),
        terminated=context.terminated,
        model=response.model_id or context.options.model or default_model(client),
    )


def _answer_too_large(size: str, usage: Usage | None = None) -> ModelError:
    """The model's answer cannot be stored (`content_sizes`): the call fails for good (the same request would get
    as large an answer), with what the provider billed for it."""
    return ModelError(
        f"the model's answer is {size}; a stored message holds at most {MAX_CONTENT_BYTES:,} bytes of one",
        code=MODEL_ANSWER_TOO_LARGE,
        usage=usage,
    )


def _split_own_answer(conversation: Sequence[Message], own_prefix: str) -> tuple[list[Message], Usage | None]:
    """The conversation without this step's own earlier answer (one pass), and what the earlier attempts of a
    redelivered step stored as that answer's usage: each stores the sum of its own and those it replaced, so the
    largest is all of them (a stale, longer answer's last message is older)."""
    history: list[Message] = []
    replaced: Usage | None = None
    for message in conversation:
        if not (message.message_id or "").startswith(own_prefix):
            history.append(message)
        elif message.usage is not None and (replaced is None or message.usage.total_tokens > replaced.total_tokens):
            replaced = message.usage
    return history, replaced


def default_model(client: object) -> str | None:
    """The model a client calls when a request names none (clients wrapping another expose it as `inner`)."""
    for _ in range(5):
        model = getattr(client, "model", None)
        if isinstance(model, str):
            return model
        client = getattr(client, "inner", None)
        if client is None:
            return None
    return None


def _unique_call_ids(contents: list, seen: set[str], prefix: str) -> list:
    """Some OpenAI-compatible servers number calls per response ("call_0" every time) or send none. Results and
    approvals are keyed by call id, so a reused or missing id gets a deterministic replacement (the provider only needs
    the ids in a conversation to pair calls with results)."""
    unique = []
    for position, content in enumerate(contents):
        if isinstance(content, FunctionCallContent):
            if not content.call_id or content.call_id in seen:
                content = content.model_copy(update={"call_id": f"call_{prefix}-{position}"})
            seen.add(content.call_id)
        unique.append(content)
    return unique


async def _summarise_call(agent: AgentDefinition, call: FunctionCallContent) -> ToolCallRef:
    tool = agent.tool(call.name)
    if tool is None:
        return ToolCallRef(call_id=call.call_id, name=call.name, known=False)
    try:
        arguments = await _checking_arguments(tool, tool.validate_arguments, call.arguments)
    except ToolArgumentsError:
        # Invalid arguments never run: the tool step answers with the validation error, no approval is needed.
        return ToolCallRef(call_id=call.call_id, name=call.name)
    try:
        needs_approval = tool.needs_approval(arguments, agent.approval)
    except Exception:
        logger.exception("approval predicate of tool %r failed; asking for approval", tool.name)
        needs_approval = True  # a broken policy must not let a call through unreviewed
    return ToolCallRef(call_id=call.call_id, name=call.name, needs_approval=needs_approval)


async def _checking_arguments(tool: Tool | None, check: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """`check(*args, **kwargs)`, which validates arguments of `tool`: on a worker thread when the tool's check may be
    costly (`Tool.costly_argument_check`: an MCP server's schema, bounded but up to seconds, while this loop serves
    every other run and request of the worker), inline otherwise (a pydantic check costs less than the thread hop)."""
    if tool is not None and tool.costly_argument_check:
        return await check_off_loop(check, *args, **kwargs)
    return check(*args, **kwargs)


# --------------------------------------------------------------------------------------------------- tools


async def invoke_tool_step(
    agent: AgentDefinition,
    log: ConversationLog,
    run_id: str,
    invocation: ToolInvocation,
    *,
    session_id: str | None = None,
    effects: EffectLedger | None = None,
) -> ToolOutcome:
    """Produce and store the result of one call: run the tool through the function middleware, or write why not."""
    messages = await log.read()  # the tool gets a copy of its arguments (`_run_tool`), nothing else of these
    existing = next(
        (r for m in messages for r in m.function_results if r.call_id == invocation.call_id and not closed_at_end(r)),
        None,
    )
    if existing is not None:
        # A retried activity whose first attempt already stored the result: do not run the tool twice.
        return ToolOutcome(call_id=invocation.call_id, is_error=existing.is_error and invocation.action != "deny")
    call = _find_call(messages, invocation.call_id)
    terminated = False
    if invocation.action == "deny":
        reason = f": {invocation.reason}" if invocation.reason else ""
        result = FunctionResultContent(call_id=call.call_id, error=f"The user denied the call to '{call.name}'{reason}")
    elif invocation.action == "unknown":
        result = FunctionResultContent(call_id=call.call_id, error=f"Requested function '{call.name}' not found.")
    else:
        result, terminated = await _run_tool(agent, messages, call, run_id, session_id, effects)
    await log.append(Message.tool_result(result, message_id=result_message_id(run_id, call.call_id)))
    is_error = result.is_error and invocation.action != "deny"
    return ToolOutcome(call_id=call.call_id, is_error=is_error, terminated=terminated)


def _find_call(messages: Sequence[Message], call_id: str) -> FunctionCallContent:
    for message in reversed(messages):
        for call in message.function_calls:
            if call.call_id == call_id:
                return call
    raise StepError(f"no function call {call_id!r} in the conversation")


def _approved_arguments(messages: Sequence[Message], call: FunctionCallContent) -> dict | str:
    """The arguments to run with: the approver's edited ones when the call was approved with edits."""
    for message in reversed(messages):
        for content in message.contents:
            if (
                isinstance(content, FunctionApprovalResponseContent)
                and content.function_call.call_id == call.call_id
                and content.approved
            ):
                return content.function_call.arguments
    return call.arguments


async def _run_tool(
    agent: AgentDefinition,
    messages: Sequence[Message],
    call: FunctionCallContent,
    run_id: str,
    session_id: str | None,
    effects: EffectLedger | None = None,
) -> tuple[FunctionResultContent, bool]:
    tool = agent.tool(call.name)
    if tool is None:
        return FunctionResultContent(call_id=call.call_id, error=f"Requested function '{call.name}' not found."), False
    try:
        raw = copy_json(_approved_arguments(messages, call))  # the validated arguments may hold parts of it
        arguments = await _checking_arguments(tool, tool.validate_arguments, raw)
    except ToolArgumentsError as error:
        return FunctionResultContent(call_id=call.call_id, error=cut_text(str(error))), False
    tool_context = ToolContext(
        idempotency_key=idempotency_key(run_id, call.call_id),
        call_id=call.call_id,
        tool_name=tool.name,
        run_id=run_id,
        session_id=session_id,
        agent_name=agent.name,
        effects=effects,
    )
    context = FunctionInvocationContext(tool=tool, arguments=arguments, call_id=call.call_id, tool_context=tool_context)

    async def invoke(ctx: FunctionInvocationContext) -> None:
        ctx.result = await ctx.tool.invoke(ctx.arguments, ctx.tool_context)

    try:
        await MiddlewarePipeline(agent.function_middleware).execute(context, invoke)
    except (ToolTimeoutError, ToolArgumentsError, ToolReportedError) as error:
        return FunctionResultContent(call_id=call.call_id, error=cut_text(str(error))), False
    except EffectLedgerUnavailableError:
        raise  # infrastructure, not the tool: the host retries the step
    except Exception as error:
        logger.warning("tool %r failed: %s", tool.name, type(error).__name__, exc_info=True)
        detail = f": {type(error).__name__}: {error}" if agent.include_detailed_errors else "."
        failed = cut_text(f"Function '{tool.name}' failed{detail}")
        return FunctionResultContent(call_id=call.call_id, error=failed), False
    # Kept to what one stored message holds (`content_sizes`): past it the step failed and ran the tool again.
    return FunctionResultContent(call_id=call.call_id, result=fit_result(_jsonable(context.result))), context.terminated


def _jsonable(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    try:
        return to_jsonable_python(value)
    except Exception:  # pydantic cannot serialise it: the model reads its text form instead
        return str(value)


# --------------------------------------------------------------------------------------------------- approvals


async def record_approval_requests_step(
    log: ConversationLog, run_id: str, command: RequestApproval
) -> list[FunctionApprovalRequestContent]:
    """Store one approval request per call (seed 002, option 5) and return them (what the run exposes)."""
    messages = await log.messages()
    requests = []
    for ref in command.calls:
        request = FunctionApprovalRequestContent(
            id=approval_id(run_id, ref.call_id), function_call=_find_call(messages, ref.call_id)
        )
        await log.append(
            Message(role="assistant", contents=[request], message_id=approval_request_message_id(run_id, ref.call_id))
        )
        requests.append(request)
    return requests


def decide_approval(
    agent: AgentDefinition, request: FunctionApprovalRequestContent, response: FunctionApprovalResponseContent
) -> ApprovalDecision:
    """Check a response against its request; edited arguments are validated against the tool schema
    (`ToolArgumentsError` tells the approver what is wrong). Pure: an HTTP handler can call it before storing. Sync:
    an MCP tool's schema check may take a second or more, so callers on an event loop run it on a worker thread."""
    if response.id != request.id:
        raise UnknownApprovalError(f"response {response.id!r} does not answer request {request.id!r}")
    proposed, decided = request.function_call, response.function_call
    if (decided.call_id, decided.name) != (proposed.call_id, proposed.name):
        raise ValueError("an approval may edit the arguments of a call, not which call it is")
    edited = False
    if response.approved:
        tool = agent.tool(proposed.name)
        if tool is None:
            raise UnknownApprovalError(f"agent {agent.name!r} has no tool {proposed.name!r}")
        new_arguments = tool.validate_arguments(decided.arguments)
        edited = new_arguments != tool.validate_arguments(proposed.arguments)
    return ApprovalDecision(call_id=proposed.call_id, approved=response.approved, reason=response.reason, edited=edited)


async def record_approval_response_step(
    agent: AgentDefinition,
    log: ConversationLog,
    run_id: str,
    response: FunctionApprovalResponseContent,
    *,
    decided_by: str | None = None,
    decided_at: datetime | None = None,
) -> ApprovalDecision:
    """Validate and store a decision; returns what to send to the loop. Raises `UnknownApprovalError` (no such
    request), `ApprovalAlreadyDecidedError` (answered differently before) or `ToolArgumentsError` (edited arguments
    do not fit the schema) so callers can map them to 404/409/422. Who decided and when are kept on the stored
    message (`author_name`, `created_at`) for the audit trail."""
    messages = await log.messages()
    requests = {c.id: c for m in messages for c in m.contents if isinstance(c, FunctionApprovalRequestContent)}
    request = requests.get(response.id)
    if request is None:
        raise UnknownApprovalError(f"no approval request {response.id!r}")
    call_id = request.function_call.call_id
    previous = next(
        (
            c
            for m in messages
            for c in m.contents
            if isinstance(c, FunctionApprovalResponseContent) and c.id == response.id
        ),
        None,
    )
    if previous is not None and previous != response:
        raise ApprovalAlreadyDecidedError(f"approval request {response.id!r} was already decided")
    tool = agent.tool(request.function_call.name)  # decide_approval checks the (edited) arguments against its schema
    decision = await _checking_arguments(tool, decide_approval, agent, request, response)
    if previous is not None:
        return decision  # the same decision delivered again: already stored, keep its audit fields
    await log.append(
        Message(
            role="user",
            contents=[response],
            message_id=approval_response_message_id(run_id, call_id),
            author_name=decided_by,
            created_at=decided_at,
        )
    )
    return decision


# --------------------------------------------------------------------------------------------------- finishing


_RUN_ENDED = "Not run: the run ended "


def closed_at_end(result: FunctionResultContent) -> bool:
    """A result `close_unresolved_calls_step` wrote when the run ended before the call ran. It stands in for a result
    only while the run stays closed: a rewound run executes the call and the real result replaces it (same id)."""
    return result.error is not None and result.error.startswith(_RUN_ENDED)


async def close_unresolved_calls_step(log: ConversationLog, run_id: str, finish: Finish) -> list[str]:
    """Give every call still without a result an error result saying the run ended, so the session's conversation
    stays valid for the next run (a provider rejects calls without results), and empty the streamed draft of a model
    call the run failed waiting for. Returns the call ids closed."""
    messages = await log.read()
    if finish.status == "failed" and finish.unanswered_call is not None:
        await _empty_draft(log, messages, run_id, finish.unanswered_call)
    closed = []
    for call in unanswered_function_calls(messages):
        error = f"{_RUN_ENDED}({finish.status}: {finish.reason}) before this call was executed."
        await log.append(
            Message.tool_result(
                FunctionResultContent(call_id=call.call_id, error=error),
                message_id=result_message_id(run_id, call.call_id),
            )
        )
        closed.append(call.call_id)
    return closed


async def _empty_draft(log: ConversationLog, messages: Sequence[Message], run_id: str, iteration: int) -> None:
    """A draft (`agent_runs.drafts`: the text so far, in place of the answer's first message) is replaced by the
    answer; a call that failed for good leaves it, and the next run's model would read half an answer it never gave
    as its own. Emptied in place (an assistant message without contents is not sent to a model). Only a draft: the
    first message of that call's answer, alone, with no tool calls and no usage (a stored answer carries its usage). A
    cancelled run keeps what it streamed, as a stopped chat does."""
    prefix = model_message_prefix(run_id, iteration)
    own = [m for m in messages if (m.message_id or "").startswith(prefix)]
    if len(own) != 1 or own[0].message_id != model_message_id(run_id, iteration, 0):
        return
    draft = own[0]
    if draft.usage is None and not draft.function_calls and draft.contents:
        await log.append(draft.model_copy(update={"contents": []}))


__all__ = [
    "ChatMiddlewareEnded",
    "OnUpdate",
    "StepError",
    "append_input_step",
    "call_model_step",
    "close_unresolved_calls_step",
    "decide_approval",
    "invoke_tool_step",
    "record_approval_requests_step",
    "record_approval_response_step",
]
