"""Cosmos 429 / 503 from a fault-injecting proxy: runs still complete, nothing is duplicated or lost.

The store runs on the local Cosmos server (`cosmos_local`, needs Node and `npm ci`; skipped otherwise) behind
`CosmosFaultProxy`. 429s are retried by the Cosmos SDK honouring `x-ms-retry-after-ms`; a 503 the SDK does not retry
surfaces in the activity, which Durable retries (every write is an idempotent upsert with a deterministic id). The 503
case makes the first effect-ledger write fail past the SDK's retry, every time: the tool step must fail and be
retried, not report the tool as failed (which would lose the effect).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from cosmos_fault_proxy import CosmosFaultPlan, CosmosFaultProxy
from load_helpers import app_store
from load_invariants import assert_conversation_sound

from bench.workload.brain import email_prompt, steps_prompt
from bench.workload.client import async_client, decide_all, poll, session_messages, start_run
from bench.workload.host import workload_host
from scripted_model.server import ScriptedModelServer

pytestmark = [
    pytest.mark.cosmos,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]
DEADLINE_S = 180  # only bounds a failure: with faults and their retry waits, a loaded 2-core machine is slow here
PLANS = [
    CosmosFaultPlan(status=429, every=3),
    CosmosFaultPlan(status=503, every=4, surface_once=("/colls/effects/docs",)),
]


@pytest.fixture(scope="module")
def local_cosmos() -> Iterator[str]:
    cosmos_local = pytest.importorskip("cosmos_local")
    try:
        server = cosmos_local.start_local_cosmos()
    except cosmos_local.LocalCosmosError as error:
        pytest.skip(f"local Cosmos unavailable: {error}")
    try:
        yield server.endpoint
    finally:
        server.stop()


@pytest.mark.parametrize("plan", PLANS, ids=["429", "503"])
async def test_runs_survive_cosmos_throttling_and_outages(
    model_server: ScriptedModelServer, local_cosmos: str, plan: CosmosFaultPlan
) -> None:
    from cosmos_local import EMULATOR_KEY

    proxy = CosmosFaultProxy(local_cosmos, plan).start()
    database = f"faults{uuid.uuid4().hex[:8]}"
    env = {"COSMOS_ENDPOINT": proxy.endpoint, "COSMOS_KEY": EMULATOR_KEY, "COSMOS_DATABASE": database}
    try:
        with workload_host(model_server.base_url, env=env) as host:
            async with async_client(host.base_url) as client:
                steps = await start_run(client, steps_prompt(3))
                email = await start_run(client, email_prompt("ops@example.com"))
                email, _ = await poll(client, email, until=frozenset({"requires_action"}), deadline_s=DEADLINE_S)
                await decide_all(client, email)
                finals = [(await poll(client, view, deadline_s=DEADLINE_S))[0] for view in (steps, email)]
                conversations = [await session_messages(client, f["session_id"]) for f in finals]
            assert [f["status"] for f in finals] == ["completed", "completed"], finals
            for messages in conversations:
                assert_conversation_sound(messages)
            store = app_store(host)
            assert len(host.run(store.list_effects(finals[0]["session_id"], kind="step"))) == 3
            assert len(host.run(store.list_effects(finals[1]["session_id"], kind="email"))) == 1
    finally:
        proxy.stop()
    assert proxy.injected > 0 and proxy.forwarded > 0
    assert proxy.surfaced == list(plan.surface_once)


async def test_a_start_that_fails_after_claiming_the_session_releases_it(
    model_server: ScriptedModelServer, local_cosmos: str
) -> None:
    """The input write fails past the SDK (503): the client gets a 503 problem, the half-started run ends `failed`
    instead of holding the session, and the next start in that session runs."""
    from cosmos_local import EMULATOR_KEY

    plan = CosmosFaultPlan(status=503, every=1_000_000, surface_once=("/colls/messages/docs",))
    proxy = CosmosFaultProxy(local_cosmos, plan).start()
    env = {"COSMOS_ENDPOINT": proxy.endpoint, "COSMOS_KEY": EMULATOR_KEY, "COSMOS_DATABASE": f"f{uuid.uuid4().hex[:8]}"}
    session_id = uuid.uuid4().hex
    try:
        with workload_host(model_server.base_url, env=env) as host:
            async with async_client(host.base_url) as client:
                failed = await client.post("/api/agents/worker/runs",
                                           json={"input": steps_prompt(1), "session_id": session_id})
                assert failed.status_code == 503 and failed.json()["code"] == "store_unavailable", failed.text
                store = app_store(host)
                [abandoned] = host.run(store.list_runs(session_id))
                assert abandoned.status == "failed" and abandoned.error["code"] == "start_failed"
                assert host.run(store.get_session(session_id)).active_run_id is None
                view = await start_run(client, steps_prompt(1), session_id=session_id)
                final, _ = await poll(client, view, deadline_s=DEADLINE_S)
            assert final["status"] == "completed", final
    finally:
        proxy.stop()
    assert proxy.surfaced == ["/colls/messages/docs"]
