"""A workflow step's child run in a session of its own (`agent_runs.child_runs.prepare_child_run`), on both stores:
the session is created already held by the run (one write), its input remembered as the whole conversation (the
conversation cache), and a step run again after its child ended, or a
session of that id made by someone else, gets what it always got (the stored run; the owner check)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agent_runs.child_runs import prepare_child_run
from agent_runs.services import RunServices
from agent_runs.starting import SessionNotOwnedError
from session_store import SessionStore


def child_id() -> str:
    return f"{uuid.uuid4().hex}.draft"  # one database per module on Cosmos: ids of their own per test


def services_on(store: SessionStore) -> RunServices:
    services = RunServices()
    services.__dict__["store"] = store  # the store under test, instead of one opened from settings
    return services


async def start_child(services: RunServices, run_id: str, owner_id: str = "alice") -> str | None:
    started = await prepare_child_run(
        services, run_id=run_id, session_id=run_id, agent_name="assistant", prompt="hello",
        metadata={"workflow_run_id": "w1", "workflow_step": "draft"}, owner_id=owner_id, owner_name=owner_id,
    )
    return None if started is None else started.run.run_id


async def test_a_child_run_gets_its_own_session_held_by_it_and_owned_by_the_workflows_owner(
    store: SessionStore,
) -> None:
    services, run_id = services_on(store), child_id()
    assert await start_child(services, run_id) == run_id
    session = await store.get_session(run_id)
    assert session is not None and session.active_run_id == run_id and session.owner_id == "alice"
    assert session.agent == "assistant"
    assert [m.message_id for m in (await store.list_messages(run_id)).items] == [f"{run_id}:input:0"]
    # Its input is the whole conversation: remembered, so the child's first model call queries no messages.
    run = await store.get_run(run_id)
    assert run is not None
    remembered = services.conversations.records(run_id, run_id, run.etag, after=-1, below=None)
    assert [m.message_id for m in remembered or []] == [f"{run_id}:input:0"]


async def test_a_step_run_again_after_its_child_ended_gets_the_stored_run(store: SessionStore) -> None:
    services, run_id = services_on(store), child_id()
    await start_child(services, run_id)
    await store.finish_run(run_id, "completed", output={"text": "done"})  # the session is released
    assert await start_child(services, run_id) == run_id  # no conflict: the run as stored
    run = await store.get_run(run_id)
    assert run is not None and run.status == "completed"


async def test_a_session_of_that_id_made_by_someone_else_is_not_taken(store: SessionStore) -> None:
    run_id = child_id()
    await store.create_session(run_id, "assistant", owner_id="mallory")
    with pytest.raises(SessionNotOwnedError):
        await start_child(services_on(store), run_id)
    assert await store.get_run(run_id) is None


@pytest.mark.parametrize("together", [False, True], ids=["again", "concurrently"])
async def test_a_step_run_again_while_its_child_runs_gets_that_one_run(store: SessionStore, together: bool) -> None:
    """The activity that starts a step's child runs again (Durable delivers an activity at least once, and two
    deliveries may overlap) while the child it created holds its session: the same run, once, holding its session,
    its input stored once, whichever of the two writes the session first."""
    services, run_id = services_on(store), child_id()
    if together:
        started = await asyncio.gather(start_child(services, run_id), start_child(services, run_id))
    else:
        started = [await start_child(services, run_id), await start_child(services, run_id)]
    assert started == [run_id, run_id]
    runs = await store.list_runs(run_id)
    assert [(r.run_id, r.ordinal, r.status) for r in runs] == [(run_id, 1, "in_progress")]
    session = await store.get_session(run_id)
    assert session is not None and (session.active_run_id, session.run_count) == (run_id, 1)
    assert [m.message_id for m in (await store.list_messages(run_id)).items] == [f"{run_id}:input:0"]
