"""Contract: the tools discovered for a run (MCP) are recorded with the run once; the first list wins, every backend."""

from __future__ import annotations

import asyncio

import pytest
from store_helpers import new_id, new_session, run

from session_store import NotFoundError, SessionStore

TOOLS = [
    {"server": "files", "remote_name": "read", "name": "read", "input_schema": {"type": "object"}},
    {"server": "files", "remote_name": "write", "name": "files__write", "input_schema": {"type": "object"}},
]


async def test_a_new_run_has_no_recorded_tools(store: SessionStore) -> None:
    started = await store.begin_run(run(await new_session(store)))
    assert started.discovered_tools is None


async def test_recorded_tools_are_read_back_with_the_run(store: SessionStore) -> None:
    session_id = await new_session(store)
    started = await store.begin_run(run(session_id))
    recorded = await store.record_run_tools(started.run_id, TOOLS)
    assert recorded.discovered_tools == TOOLS and recorded.etag != started.etag
    assert (await store.get_run(started.run_id)).discovered_tools == TOOLS
    assert [r.discovered_tools for r in await store.list_runs(session_id)] == [TOOLS]


async def test_the_servers_and_tools_left_out_are_recorded_in_the_same_write(store: SessionStore) -> None:
    """One write records the list and what discovery left out; the first one wins for all three."""
    started = await store.begin_run(run(await new_session(store)))
    assert started.skipped_servers == [] and started.skipped_tools == []  # a run recorded before reads as none
    servers = [{"server": "search", "code": "timeout", "message": "MCP server 'search' is unavailable: ..."}]
    tools = [{"server": "files", "tool": "move", "reason": "is refused: ..."}]
    recorded = await store.record_run_tools(started.run_id, TOOLS, tools, servers)
    again = await store.record_run_tools(started.run_id, TOOLS, [], [])
    for read in (recorded, again, await store.get_run(started.run_id)):
        assert (read.skipped_servers, read.skipped_tools) == (servers, tools)


async def test_the_first_list_wins_and_later_calls_get_it(store: SessionStore) -> None:
    started = await store.begin_run(run(await new_session(store)))
    first = await store.record_run_tools(started.run_id, TOOLS)
    again = await store.record_run_tools(started.run_id, TOOLS[:1])  # a retried discovery that saw a changed list
    assert again.discovered_tools == TOOLS and again.etag == first.etag
    assert (await store.get_run(started.run_id)).discovered_tools == TOOLS


async def test_an_empty_list_is_a_recorded_list(store: SessionStore) -> None:
    started = await store.begin_run(run(await new_session(store)))
    assert (await store.record_run_tools(started.run_id, [])).discovered_tools == []
    assert (await store.record_run_tools(started.run_id, TOOLS)).discovered_tools == []


async def test_concurrent_recordings_agree_on_one_list(store: SessionStore) -> None:
    started = await store.begin_run(run(await new_session(store)))
    lists = [[{**TOOLS[0], "name": f"read{i}"}] for i in range(5)]
    results = await asyncio.gather(*(store.record_run_tools(started.run_id, tools) for tools in lists))
    stored = (await store.get_run(started.run_id)).discovered_tools
    assert stored in lists
    assert all(result.discovered_tools == stored for result in results)


async def test_recording_survives_updates_and_finish(store: SessionStore) -> None:
    started = await store.begin_run(run(await new_session(store)))
    await store.record_run_tools(started.run_id, TOOLS)
    await store.update_run(started.run_id, status="in_progress")
    finished = await store.finish_run(started.run_id, "completed", output={"text": "done"})
    assert finished.discovered_tools == TOOLS


async def test_update_run_cannot_change_the_recorded_tools(store: SessionStore) -> None:
    started = await store.begin_run(run(await new_session(store)))
    with pytest.raises(ValueError):
        await store.update_run(started.run_id, discovered_tools=TOOLS)


async def test_recording_for_a_missing_run_is_not_found(store: SessionStore) -> None:
    with pytest.raises(NotFoundError):
        await store.record_run_tools(new_id("missing"), TOOLS)
