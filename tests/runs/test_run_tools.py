"""A run's agent as its steps see it: the definition plus the MCP tools recorded for that run (SQLite store)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator

import pytest

from agent_runs.run_tools import agent_for_run
from agent_runtime.agents import AgentDefinition
from agent_runtime.check_threads import CHECK_THREAD_PREFIX
from agent_runtime.mcp import McpServer, McpTool
from agent_runtime.tools import tool
from session_store import RunRecord, SqliteSessionStore

SPEC = {"server": "files", "remote_name": "read", "name": "read", "input_schema": {"type": "object"}}


@tool
def local() -> str:
    """A Python tool."""
    return "x"


@pytest.fixture
async def store() -> AsyncIterator[SqliteSessionStore]:
    opened = SqliteSessionStore(":memory:")
    yield opened
    await opened.close()


async def start_run(store: SqliteSessionStore, run_id: str) -> None:
    await store.create_session(f"s-{run_id}", "a")
    await store.begin_run(RunRecord(run_id=run_id, session_id=f"s-{run_id}", agent="a"))


async def test_an_agent_without_servers_is_used_as_it_is(store: SqliteSessionStore) -> None:
    agent = AgentDefinition(name="a", tools=[local])
    assert await agent_for_run(store, agent, "no-such-run") is agent


async def test_the_recorded_tools_are_bound_and_reused(store: SqliteSessionStore) -> None:
    agent = AgentDefinition(name="a", tools=[local, McpServer(name="files", url="https://files/mcp")])
    await start_run(store, "r1")
    # Started before its agent had MCP servers (or before discovery): the run keeps the tools it started with.
    assert await agent_for_run(store, agent, "r1") is agent

    await store.record_run_tools("r1", [SPEC])
    bound = await agent_for_run(store, agent, "r1")
    assert [t.name for t in bound.tools] == ["local", "read"] and isinstance(bound.tool("read"), McpTool)
    assert await agent_for_run(store, agent, "r1") is bound  # a recorded list never changes: built once

    await start_run(store, "r2")
    await store.record_run_tools("r2", [])
    assert [t.name for t in (await agent_for_run(store, agent, "r2")).tools] == ["local"]


async def test_a_missing_run_is_an_error(store: SqliteSessionStore) -> None:
    agent = AgentDefinition(name="a", tools=[McpServer(name="files", url="https://files/mcp")])
    with pytest.raises(LookupError):
        await agent_for_run(store, agent, "missing")


async def test_the_tools_are_bound_off_the_event_loop(
    store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each tool's validator checks the server's schema first (about 0.1 s for a large one, up to 128 tools a run):
    the binding runs on a worker thread, while the loop serves every other run and request of the worker."""
    from agent_runtime.mcp import tools as mcp_tools

    threads: list[str] = []
    real = mcp_tools._validator_for

    def spy(schema: dict, name: str) -> object:
        threads.append(threading.current_thread().name)
        return real(schema, name)

    monkeypatch.setattr(mcp_tools, "_validator_for", spy)
    agent = AgentDefinition(name="a", tools=[McpServer(name="files", url="https://files/mcp")])
    await start_run(store, "r3")
    await store.record_run_tools("r3", [SPEC, {**SPEC, "remote_name": "write", "name": "write"}])
    bound = await agent_for_run(store, agent, "r3")
    assert [t.name for t in bound.tools] == ["read", "write"]
    assert len(threads) == 2 and all(name.startswith(CHECK_THREAD_PREFIX) for name in threads), threads
