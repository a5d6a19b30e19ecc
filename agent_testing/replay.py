"""Replay a saved run as a regression test: the agent runs again against the scripted model serving the recorded
answers, and the test fails with a readable diff wherever the agent's requests now differ from the recorded ones.

    from agent_testing import replay
    from served_agents.assistant import assistant

    def test_the_email_run_still_asks_the_same() -> None:
        replay("tests/replay/cases/demo_email.json", assistant)             # tools answer from the recording
        replay("tests/replay/cases/demo_email.json", assistant, tools="real")  # or run for real

Save a transcript with `agentctl export RUN_ID -o case.json` (or `GET /api/runs/{run_id}/transcript`). The run
goes through the in-process runner (the same loop, steps and middleware as a durable run, without Durable), with the
conversation the recorded run started from, its input, and its approval decisions answered as recorded (an expired
approval as a rejection). What is compared: each model request's messages (OpenAI chat format) and tools, after the
redaction the transcript had, and how many model calls there were.
"""

from __future__ import annotations

import asyncio
import copy
import difflib
import json
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent_runs.transcript import ApprovalDecision, ModelCall, ModelRequest, Transcript, redacted
from agent_runtime.agents import AgentDefinition
from agent_runtime.conversation import InMemoryConversationLog
from agent_runtime.messages import FunctionApprovalRequestContent, FunctionApprovalResponseContent, Message
from agent_runtime.models.openai_client import OpenAIChatClient
from agent_runtime.run_result import RunResult
from agent_runtime.runner import AgentRunner, Approver
from agent_runtime.tools import Tool, ToolReportedError
from scripted_model import Reply, Script, ScriptedModelServer, ScriptedToolCall

ToolMode = Literal["recorded", "real"]


class TranscriptMismatch(AssertionError):
    """The agent no longer does what the recorded run did; the message is a unified diff, recorded vs now."""


@dataclass(frozen=True)
class ReplayResult:
    result: RunResult
    requests: list[ModelRequest]


def load_transcript(source: Transcript | str | Path | dict[str, Any]) -> Transcript:
    if isinstance(source, Transcript):
        return source
    if isinstance(source, dict):
        return Transcript.model_validate(source)
    return Transcript.model_validate_json(Path(source).read_text(encoding="utf-8"))


def replay(
    source: Transcript | str | Path | dict[str, Any], agent: AgentDefinition, *, tools: ToolMode = "recorded"
) -> ReplayResult:
    """Run `agent` on the recorded run's input and compare its model requests with the recorded ones (raises
    `TranscriptMismatch` with a diff). `tools="recorded"` answers tool calls from the recording (a call the recording
    does not have is a mismatch); `"real"` runs the agent's tools."""
    transcript = load_transcript(source)
    script = Script(turns=[_reply(call) for call in transcript.model_calls])
    with ScriptedModelServer(script) as model:
        result = asyncio.run(_run(transcript, agent, model.base_url, tools))
        requests = [_request(entry.body or {}) for entry in model.log.requests]
    _compare(transcript.model_calls, requests)
    return ReplayResult(result=result, requests=requests)


async def _run(transcript: Transcript, agent: AgentDefinition, base_url: str, tools: ToolMode) -> RunResult:
    client = OpenAIChatClient.compatible(base_url=base_url, model=agent.model or "replay")
    try:
        runner = AgentRunner(
            _with_recorded_tools(agent, transcript) if tools == "recorded" else agent,
            client,
            InMemoryConversationLog([Message.model_validate(m) for m in transcript.history]),
            approver=_recorded_approver(transcript.approvals),
            effects=InMemoryEffectLedger(),
        )
        inputs = [Message.model_validate(m).model_copy(update={"message_id": None}) for m in transcript.input]
        return await runner.run(inputs, run_id=transcript.run_id)
    finally:
        await client.aclose()


class InMemoryEffectLedger:
    """The effect ledger of one replay (`ToolContext.record_effect_once` in tools that run for real)."""

    def __init__(self) -> None:
        self._effects: dict[str, dict[str, Any]] = {}

    async def record_once(self, key: str, kind: str, payload: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        if key in self._effects:
            return self._effects[key], False
        self._effects[key] = payload
        return payload, True


def _reply(call: ModelCall) -> Reply:
    return Reply(
        text=call.answer.text,
        tool_calls=[
            ScriptedToolCall(name=c.name, arguments=c.arguments if isinstance(c.arguments, dict | str) else {}, id=c.id)
            for c in call.answer.tool_calls
        ],
    )


def _request(body: dict[str, Any]) -> ModelRequest:
    return ModelRequest(messages=body.get("messages") or [], tools=body.get("tools") or [])


def _with_recorded_tools(agent: AgentDefinition, transcript: Transcript) -> AgentDefinition:
    """The agent with each tool answering from the recording, in order per tool and arguments (same name, schema
    and approval policy, so requests and approvals are unchanged)."""
    recorded: dict[tuple[str, str], deque[Any]] = defaultdict(deque)
    for call in transcript.tool_calls:
        recorded[(call.name, _canonical(call.arguments))].append(call)

    def stand_in(original: Tool) -> Tool:
        async def answer(**kwargs: Any) -> Any:
            arguments = {k: v for k, v in kwargs.items() if k != original.context_parameter}
            queue = recorded.get((original.name, _canonical(arguments)))
            if not queue:
                raise TranscriptMismatch(
                    f"the agent called {original.name}({json.dumps(arguments, sort_keys=True, default=str)}), "
                    "which the recorded run did not"
                )
            call = queue.popleft()
            if call.error is not None:
                raise ToolReportedError(call.error)
            return call.result

        twin = copy.copy(original)
        twin.func, twin.is_async = answer, True
        return twin

    return agent.model_copy(update={"tools": [stand_in(t) for t in agent.tools]})


def _recorded_approver(approvals: Sequence[ApprovalDecision]) -> Approver:
    decisions = {a.call_id: a for a in approvals}

    async def decide(request: FunctionApprovalRequestContent) -> FunctionApprovalResponseContent:
        decision = decisions.get(request.function_call.call_id)
        if decision is None:
            raise TranscriptMismatch(
                f"the agent asked for approval of {request.function_call.name} "
                f"(call {request.function_call.call_id}), which the recorded run did not"
            )
        if decision.status == "approved":
            return request.create_approval(arguments=decision.edited_arguments, reason=decision.reason)
        return FunctionApprovalResponseContent(
            id=request.id, approved=False, function_call=request.function_call, reason=decision.reason
        )

    return decide


def _compare(recorded: Sequence[ModelCall], requests: Sequence[ModelRequest]) -> None:
    before = [_shown(call.request) for call in recorded]
    now = [_shown(request) for request in requests]
    if before == now:
        return
    diff = difflib.unified_diff(
        _lines(before), _lines(now), fromfile="recorded run", tofile="this replay", lineterm="", n=3
    )
    counted = f"{len(recorded)} model call(s) recorded, {len(requests)} now"
    raise TranscriptMismatch(f"the agent's model requests changed ({counted}):\n" + "\n".join(diff))


def _shown(request: ModelRequest) -> dict[str, Any]:
    return redacted(request.model_dump(mode="json"))


def _lines(requests: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for index, request in enumerate(requests, start=1):
        lines.append(f"=== model call {index} ===")
        lines.extend(json.dumps(request, indent=2, sort_keys=True, ensure_ascii=False).splitlines())
    return lines


def _canonical(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, default=str)
