"""What a run did, as a transcript that can be saved and replayed as a test (`agent_testing.replay`).

Built from the store alone (pure: records in, a `Transcript` out): the conversation the run started from, its input,
every model call (the request as the model client sends it - messages in OpenAI's chat format and the tools offered -
and the answer), every tool call with its arguments and result, and the approvals with their decisions. Each model
request is rebuilt from the stored conversation as `call_model` builds it (the agent's instructions, the run's extra
instructions, the messages before the answer), so a chat middleware that rewrote messages on the way out is not
seen. Strings pass through the same key redaction as model errors and telemetry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_runs.sequence import run_seq_range
from agent_runtime.agents import AgentDefinition
from agent_runtime.conversation import input_message_id, model_message_prefix
from agent_runtime.messages import FunctionResultContent, Message
from agent_runtime.models.errors import redact
from agent_runtime.overrides import RunOverrides
from session_store import ApprovalRecord, MessageRecord, RunRecord

TRANSCRIPT_FORMAT = "durable-agents-transcript/1"


class AgentSummary(BaseModel):
    name: str
    digest: str = Field(description="sha256 of the definition's behaviour: instructions, model, options, tools")
    tools: list[str]


class ModelRequest(BaseModel):
    """What the model was sent (OpenAI chat format): the comparable part of a chat-completions request."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)


class ToolCallRecord(BaseModel):
    id: str
    name: str
    arguments: Any


class ModelAnswer(BaseModel):
    text: str | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)


class ModelCall(BaseModel):
    iteration: int
    request: ModelRequest
    answer: ModelAnswer


class ToolCallResult(BaseModel):
    call_id: str
    name: str
    arguments: Any
    result: Any = None
    error: str | None = None


class ApprovalDecision(BaseModel):
    approval_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    status: str
    decided_by: str | None = None
    decided_at: str | None = None
    reason: str | None = None
    edited_arguments: dict[str, Any] | None = None


class Transcript(BaseModel):
    format: Literal["durable-agents-transcript/1"] = TRANSCRIPT_FORMAT
    run_id: str
    session_id: str
    status: str
    agent: AgentSummary
    history: list[dict[str, Any]] = Field(description="the conversation before the run (stored messages)")
    input: list[dict[str, Any]]
    model_calls: list[ModelCall]
    tool_calls: list[ToolCallResult]
    approvals: list[ApprovalDecision]
    output: dict[str, Any] | None = None


def definition_digest(agent: AgentDefinition) -> str:
    """A digest of what shapes the agent's requests and decisions: a changed instruction, tool or option changes
    it. Middleware counts by its type's name (its code cannot be digested meaningfully)."""
    described = {
        "name": agent.name,
        "instructions": agent.instructions,
        "model": agent.model,
        "options": agent.chat_options(None).model_dump(mode="json"),
        "tools": [spec.model_dump(mode="json") for spec in agent.tool_specs()],
        "approval": [
            [tool.name, tool.approval if isinstance(tool.approval, str) or tool.approval is None else "predicate"]
            for tool in agent.tools
        ],
        "middleware": [
            type(layer).__name__
            for layer in (*agent.run_middleware, *agent.chat_middleware, *agent.function_middleware)
        ],
        "max_iterations": agent.max_iterations,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()


def build_transcript(
    agent: AgentDefinition,
    run: RunRecord,
    records: Sequence[MessageRecord],
    approvals: Sequence[ApprovalRecord],
) -> Transcript:
    """`records`: the session's messages up to the end of the run, in seq order; `agent`: bound to the run's tools."""
    # The openai SDK's types: loaded when a transcript is first asked for, not at start-up (tests/deploy).
    from agent_runtime.models.openai_wire import to_openai_messages, to_openai_tools

    first, last = run_seq_range(run.ordinal)
    messages = [(r.seq, Message.model_validate(r.payload)) for r in records if r.seq <= last]
    history = [m for seq, m in messages if seq < first]
    own = [m for seq, m in messages if seq >= first]
    inputs = [m for index, m in enumerate(own) if m.message_id == input_message_id(run.run_id, index)]
    overrides = RunOverrides.model_validate(run.overrides or {})
    instructions = overrides.system_prompt(agent)
    system = [Message.system(instructions)] if instructions else []
    tools = to_openai_tools(agent.tool_specs())

    calls: list[ModelCall] = []
    before: list[Message] = list(history)
    iteration = None
    for message in own:
        answered = _iteration_of(run.run_id, message)
        if answered is not None and answered != iteration:
            request = ModelRequest(messages=to_openai_messages([*system, *before]), tools=tools)
            calls.append(ModelCall(iteration=answered, request=request, answer=ModelAnswer()))
            iteration = answered
        if answered is not None:
            _add_answer(calls[-1].answer, message)
        before.append(message)

    results = {r.call_id: r for m in own for r in m.function_results}
    edited = {a.call_id: a.edited_arguments for a in approvals if a.status == "approved" and a.edited_arguments}
    tool_calls = [
        _tool_call(call, results.get(call.id), edited.get(call.id))
        for model_call in calls
        for call in model_call.answer.tool_calls
    ]
    transcript = Transcript(
        run_id=run.run_id,
        session_id=run.session_id,
        status=run.status,
        agent=AgentSummary(
            name=agent.name, digest=definition_digest(agent), tools=[t["function"]["name"] for t in tools]
        ),
        history=[_dump(m) for m in history],
        input=[_dump(m) for m in inputs],
        model_calls=calls,
        tool_calls=tool_calls,
        approvals=[_approval(a) for a in approvals],
        output=run.output,
    )
    return Transcript.model_validate(redacted(transcript.model_dump(mode="json")))


def _iteration_of(run_id: str, message: Message) -> int | None:
    """The model call that stored `message` (`model_message_id`: "<run>:model:<iteration>:<index>"), if one did."""
    parts = (message.message_id or "").split(":")
    if len(parts) != 4 or parts[0] != run_id or parts[1] != "model" or not parts[2].isdigit():
        return None
    iteration = int(parts[2])
    return iteration if (message.message_id or "").startswith(model_message_prefix(run_id, iteration)) else None


def _add_answer(answer: ModelAnswer, message: Message) -> None:
    if message.text:
        answer.text = f"{answer.text}{message.text}" if answer.text else message.text
    answer.tool_calls.extend(
        ToolCallRecord(id=c.call_id, name=c.name, arguments=c.arguments) for c in message.function_calls
    )


def _tool_call(
    call: ToolCallRecord, result: FunctionResultContent | None, edited: dict[str, Any] | None
) -> ToolCallResult:
    """`arguments`: what the tool ran with (an approver's edits, else the model's)."""
    return ToolCallResult(
        call_id=call.id, name=call.name, arguments=edited if edited is not None else call.arguments,
        result=None if result is None else result.result, error=None if result is None else result.error,
    )


def _approval(record: ApprovalRecord) -> ApprovalDecision:
    return ApprovalDecision(
        approval_id=record.approval_id, call_id=record.call_id, tool=record.tool, arguments=record.arguments,
        status=record.status, decided_by=record.decided_by,
        decided_at=record.decided_at.isoformat() if record.decided_at else None,
        reason=record.reason, edited_arguments=record.edited_arguments,
    )


def _dump(message: Message) -> dict[str, Any]:
    return message.model_dump(mode="json", exclude_none=True)


# Ids are ours (hex run ids look like keys to the redaction); everything else may hold what a caller or tool wrote.
_ID_KEYS = frozenset({
    "id", "run_id", "session_id", "call_id", "tool_call_id", "approval_id", "message_id", "digest", "decided_by",
})


def redacted(value: Any, key: str | None = None) -> Any:
    """Every string but ids through the key redaction that model errors and telemetry use (a replay compares
    requests after the same redaction)."""
    if isinstance(value, str):
        return value if key in _ID_KEYS else redact(value)
    if isinstance(value, list):
        return [redacted(v, key) for v in value]
    if isinstance(value, dict):
        return {k: redacted(v, k) for k, v in value.items()}
    return value
