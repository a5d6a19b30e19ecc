"""Checking a model's arguments against an MCP server's JSON Schema is bounded but not small (up to a second and
more: `schema_costs`), so the steps run it on a worker thread and the event loop keeps serving every other run and
request of the worker meanwhile; a Python tool's pydantic check stays on the loop (it costs less than the hop).

One run's steps through the real openai client and the scripted model: the model's turn (`call_model_step`
summarises the calls), the approvals (`record_approval_response_step` checks the approved arguments) and the tool
step (`invoke_tool_step`), while a coroutine ticks on the loop. A spy on each tool's `validate_arguments` records
the thread each check ran in and how often the loop ticked meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from agent_runtime.agents import AgentDefinition
from agent_runtime.check_threads import CHECK_THREAD_PREFIX
from agent_runtime.conversation import InMemoryConversationLog
from agent_runtime.loop_types import CallModel, RequestApproval, ToolCallRef, ToolInvocation
from agent_runtime.mcp import McpTool, McpToolSpec
from agent_runtime.messages import Message
from agent_runtime.steps import (
    append_input_step,
    call_model_step,
    invoke_tool_step,
    record_approval_requests_step,
    record_approval_response_step,
)
from agent_runtime.tools import Tool, tool
from bench.workload.schemas import ROWS_SCHEMA, rows
from scripted_model import Reply, Script
from scripted_model.script import ScriptedToolCall

RUN = "run-1"

ROWS = rows(3_000)  # ~0.15 s a check of ROWS_SCHEMA


@tool(approval="always")
def note(text: str) -> str:
    """Take a note."""
    return text


class LoopWatch:
    """Ticks on the loop every millisecond; records where each watched check ran and the ticks it let through."""

    def __init__(self) -> None:
        self.ticks = 0
        self.checks: list[tuple[str, threading.Thread, int]] = []

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(0.001)
            self.ticks += 1

    def watch(self, monkeypatch: pytest.MonkeyPatch, watched: Tool) -> None:
        check = watched.validate_arguments

        def spy(arguments: dict[str, Any] | str) -> BaseModel:
            before = self.ticks
            try:
                return check(arguments)
            finally:
                self.checks.append((watched.name, threading.current_thread(), self.ticks - before))

        monkeypatch.setattr(watched, "validate_arguments", spy)

    def of(self, name: str) -> list[tuple[threading.Thread, int]]:
        return [(thread, ticks) for checked, thread, ticks in self.checks if checked == name]


async def test_an_mcp_tools_schema_check_leaves_the_loop_serving_and_a_python_tools_stays_on_it(
    scripted_model, model_client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server is no longer configured: every call needs approval and fails without reaching a network.
    spec = McpToolSpec(server="ledger", remote_name="record", name="record", input_schema=ROWS_SCHEMA)
    agent = AgentDefinition(name="helper", tools=[note]).with_discovered_tools([spec])
    record = agent.tool("record")
    assert isinstance(record, McpTool) and record.costly_argument_check and not note.costly_argument_check
    watch = LoopWatch()
    watch.watch(monkeypatch, note)
    watch.watch(monkeypatch, record)
    loop_thread = threading.current_thread()
    log = InMemoryConversationLog()
    await append_input_step(log, RUN, [Message.user("note it and record the rows")])
    scripted_model.set_script(Script.of(Reply(tool_calls=[
        ScriptedToolCall(name="note", arguments={"text": "hi"}, id="c1"),
        ScriptedToolCall(name="record", arguments={"rows": ROWS}, id="c2"),
    ])))
    ticker = asyncio.create_task(watch.tick())
    try:
        turn = await call_model_step(agent, model_client, log, RUN, CallModel(iteration=1, tool_choice="auto"))
        assert turn.tool_calls == [
            ToolCallRef(call_id="c1", name="note", needs_approval=True),
            ToolCallRef(call_id="c2", name="record", needs_approval=True),
        ]
        for request in await record_approval_requests_step(log, RUN, RequestApproval(calls=turn.tool_calls)):
            decision = await record_approval_response_step(agent, log, RUN, request.create_approval())
            assert decision.approved and not decision.edited
        outcomes = [
            await invoke_tool_step(agent, log, RUN, ToolInvocation(call_id=ref.call_id, name=ref.name))
            for ref in turn.tool_calls
        ]
    finally:
        ticker.cancel()
    assert [o.is_error for o in outcomes] == [False, True]  # record: "... no longer configures", after its check
    results = {r.call_id: r for m in await log.messages() for r in m.function_results}
    assert "no longer configures" in (results["c2"].error or ""), results["c2"]
    # Each tool is checked when the turn is summarised, twice for its approval (approved vs proposed), then to run.
    mcp_checks, python_checks = watch.of("record"), watch.of("note")
    assert len(mcp_checks) == 4 and len(python_checks) == 4, watch.checks
    assert all(thread.name.startswith(CHECK_THREAD_PREFIX) for thread, _ in mcp_checks), mcp_checks  # not the loop
    assert all(ticks >= 3 for _, ticks in mcp_checks), mcp_checks  # the loop served during each check
    assert all(thread is loop_thread for thread, _ in python_checks), python_checks
