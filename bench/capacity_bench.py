"""Capacity counts: what one agent turn costs the Durable backend and Cosmos DB, counted on devhost.

Not a timing benchmark: it counts. For each scenario the app runs on devhost with the Cosmos store (the local
server) and the `worker` agent against the scripted model, and the benchmark records
- the orchestration's raw history events (devhost's engine state file, as the Durable extension stores them:
  OrchestratorStarted/Completed per episode, TaskScheduled and TaskCompleted per activity, ...), turned into Durable
  Task Scheduler *actions* by the published definition (an orchestration start = 1; an activity = 2, scheduling +
  processing its result; a timer = 1; an external event = 1);
- every Cosmos DB operation the app makes (the store's `CosmosContainers` layer is wrapped: operation, container,
  item bytes), attributed to the function that made it (the HTTP route or the activity, from the call stack);
- request units estimated from documented per-operation costs by item size (the local server returns no charges).

Scenarios: `blobs 2 size 200` (5 steps: 3 model calls, 2 tool calls), `email` (a tool call that needs approval:
the run waits on an external event raced with a timer, then the approval), another `email` run cancelled while it
waits for its decision (the cancel route and the run's cancel path), and a workflow run (`signalled` of
`bench.workload.workflows`: one agent step, then a signal step, and the signal). docs/capacity.md builds on these
counts.

    python -m bench.capacity_bench [--no-record] [--measured-budgets]

Every figure is printed with its target, and the counts are checked against the budget table
`docs/capacity_budgets.json` (also by `tests/load/test_store_operation_budgets.py`, which fails when a change adds a
store access to a hot path).
"""

from __future__ import annotations

import argparse
import contextvars
import functools
import json
import sqlite3
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.checks import expect
from bench.report import command_line, publish, section, table
from bench.workload.brain import WorkloadBrain, blobs_prompt, email_prompt
from bench.workload.host import START_PATH, workload_host
from cosmos_local import start_local_cosmos
from devhost.protocol.events import EventType
from devhost.testing import InProcessHost
from scripted_model.server import ScriptedModelServer

# Imported before the host starts, so the app uses these modules (and their patches).
from session_store import cosmos_io, cosmos_store

# Documented RU by item size for session consistency (learn.microsoft.com/azure/cosmos-db/understand-request-unit-
# consumption): (KB, point read RU, write RU). Items under 1 KB cost the 1 KB figure.
RU_TABLE = [(1, 1.00, 4.95), (2, 1.04, 6.29), (4, 1.14, 6.67), (8, 1.33, 7.04), (16, 1.67, 9.52), (32, 2.19, 11.23),
            (64, 4.76, 22.67)]
# Assumption (no published figure): a small single-partition query costs about 2.5 RU plus a point read per item
# returned; a delete costs about a write.
QUERY_BASE_RU = 2.5


Operation = tuple[str, str, int, int, str]  # (operation, container, item bytes, items returned, caller)


@dataclass
class CosmosCounter:
    operations: list[Operation] = field(default_factory=list)
    active: bool = False

    def record(self, op: str, container: str, payload: Any, items: int = 1) -> None:
        if self.active:
            size = len(json.dumps(payload, default=str)) if payload else 0
            self.operations.append((op, container, size, items, CALLER.get()))

    def take(self) -> list[Operation]:
        taken, self.operations = self.operations, []
        return taken


# The store runs its Cosmos calls on a loop thread of its own: each store call carries its caller there in this.
CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="other")


def caller() -> str:
    """The app function that called the store: the outermost frame of an activity module (`activity <function>`)
    or the HTTP route being served (`route <name>`, from the route table's one serving frame)."""
    found = "other"
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("activities."):
            found = f"activity {frame.f_code.co_name}"
        elif module == "http_api.route_functions" and frame.f_code.co_name == "_serve":
            route = frame.f_locals.get("route")
            found = f"route {getattr(route, 'name', '?')}"
        elif module.startswith("http_api.") and not found.startswith("route "):
            found = f"http {module.removeprefix('http_api.')}.{frame.f_code.co_name}"
        frame = frame.f_back
    return found


COUNTER = CosmosCounter()
POLL = "route get_run"
_INSTALLED: list[bool] = []


def install_counter() -> None:
    """Wrap each CosmosContainers operation: count it, with the size of the item written or read, and tag each store
    call (made on the caller's thread, run on the store's loop) with the app function that made it. Once per process
    (a test and the benchmark may both ask)."""
    if _INSTALLED:
        return
    _INSTALLED.append(True)
    translate_errors = cosmos_store.translate_errors

    def tagged(coro: Any) -> Any:
        name = caller()

        async def run() -> Any:
            CALLER.set(name)
            return await translate_errors(coro)

        return run()

    cosmos_store.translate_errors = tagged
    cls = cosmos_io.CosmosContainers

    def wrap(name: str, describe: Any) -> None:
        original = getattr(cls, name)

        @functools.wraps(original)
        async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = await original(self, *args, **kwargs)
            describe(args, result)
            return result

        setattr(cls, name, counted)

    wrap("read", lambda a, r: COUNTER.record("point read", a[0], r))
    wrap("query", lambda a, r: COUNTER.record("query", a[0], r, items=len(r)))
    wrap("query_page", lambda a, r: COUNTER.record("query", a[0], r[0], items=len(r[0])))
    wrap("create", lambda a, r: COUNTER.record("create", a[0], a[1]))
    wrap("replace", lambda a, r: COUNTER.record("replace", a[0], a[1]))
    wrap("upsert", lambda a, r: COUNTER.record("upsert", a[0], a[1]))
    wrap("delete", lambda a, r: COUNTER.record("delete", a[0], None))


def estimated_ru(op: str, size: int, items: int) -> float:
    kb = max(size / 1024, 1.0)
    read_ru, write_ru = RU_TABLE[-1][1], RU_TABLE[-1][2]
    for limit, read, write in RU_TABLE:
        if kb <= limit:
            read_ru, write_ru = read, write
            break
    if op == "point read":
        return read_ru
    if op == "query":
        return QUERY_BASE_RU + items * 1.0
    if op == "delete":
        return RU_TABLE[0][2]
    return write_ru


def summarise(operations: list[Operation]) -> dict[str, Any]:
    by_op = Counter(op for op, *_ in operations)
    return {
        "operations": len(operations),
        "reads": by_op["point read"],
        "queries": by_op["query"],
        "writes": by_op["create"] + by_op["replace"] + by_op["upsert"] + by_op["delete"],
        "ru": sum(estimated_ru(op, size, items) for op, _, size, items, _ in operations),
        "largest_write_bytes": max((s for op, _, s, *_ in operations if op in ("create", "replace", "upsert")),
                                   default=0),
        "detail": Counter(f"{op} {container}" for op, container, *_ in operations),
    }


def by_caller(operations: list[Operation]) -> dict[str, dict[str, Any]]:
    callers: dict[str, list[Operation]] = {}
    for operation in operations:
        callers.setdefault(operation[4], []).append(operation)
    return {name: {**summarise(ops), "calls": 0} for name, ops in sorted(callers.items())}


def _events(state_path: Path, instance_id: str) -> list[dict[str, Any]]:
    """The instance's history as the engine stored it (not the shaped `historyEvents` of the status API), with the
    histories of the sub-orchestrations it started (a workflow's child runs) after it."""
    with sqlite3.connect(f"file:{state_path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT event FROM history WHERE instance_id=? ORDER BY seq", (instance_id,)).fetchall()
    events = [json.loads(text) for (text,) in rows]
    children = [e["InstanceId"] for e in events if e["EventType"] == EventType.SubOrchestrationInstanceCreated]
    return events + [event for child in children for event in _events(state_path, child)]


def raw_history(state_path: Path, instance_id: str) -> list[EventType]:
    return [EventType(e["EventType"]) for e in _events(state_path, instance_id)]


def activity_calls(state_path: Path, instance_id: str) -> Counter[str]:
    return Counter(e["Name"] for e in _events(state_path, instance_id) if e["EventType"] == EventType.TaskScheduled)


def durable_actions(history: list[EventType]) -> dict[str, int]:
    kinds = Counter(history)
    actions = (
        kinds[EventType.ExecutionStarted]  # an orchestration start (a child's too: its history is in `history`)
        + kinds[EventType.TaskScheduled]  # an activity: scheduling it ...
        + kinds[EventType.TaskCompleted] + kinds[EventType.TaskFailed]  # ... and processing its result
        + kinds[EventType.TimerFired]  # a timer completing
        + kinds[EventType.EventRaised]  # an external event
        + kinds[EventType.SubOrchestrationInstanceCompleted] + kinds[EventType.SubOrchestrationInstanceFailed]
    )
    return {"history events": len(history), "episodes": kinds[EventType.OrchestratorStarted],
            "activities": kinds[EventType.TaskScheduled], "timers": kinds[EventType.TimerCreated],
            "events": kinds[EventType.EventRaised], "actions": actions}


def _split(operations: list[Operation], caller_name: str) -> tuple[list[Operation], list[Operation]]:
    """(the operations of `caller_name`, the others)."""
    return [o for o in operations if o[4] == caller_name], [o for o in operations if o[4] != caller_name]


def run_scenario(host: InProcessHost, state_path: Path, prompt: str, approve: bool) -> dict[str, Any]:
    """One run from its HTTP start to completion (approving its tool call if asked), then one poll of it (no token:
    every update of the finished run). An approval run also measures, while it waits for its decision, one poll
    caught up with its continuation token (what a client's repeated long polls cost) and the decision route."""
    COUNTER.take()
    started = host.client.post(START_PATH, json={"input": prompt})
    expect(started.status_code in (200, 202), started.text)
    run_id = started.json()["run_id"]
    run_ops: list[Operation] = []
    figures: dict[str, Any] = {}
    if approve:
        view = _until_requires_action(host, run_id)
        run_ops += _split(COUNTER.take(), POLL)[1]  # the polls that waited for requires_action are not its cost
        polled = host.client.get(f"/api/runs/{run_id}", params={"continuation_token": view["continuation_token"]})
        expect(polled.status_code == 202 and not polled.json()["updates"], polled.text)
        poll_ops, rest = _split(COUNTER.take(), POLL)
        run_ops += rest
        figures["one poll"] = _request(poll_ops)
        approval_id = view["pending_approvals"][0]["approval_id"]
        decided = host.client.post(f"/api/runs/{run_id}/approvals/{approval_id}", json={"decision": "approve"})
        expect(decided.status_code == 202, decided.text)
        decision_ops = [o for o in COUNTER.operations if o[4] == DECISION]
        figures["one decision"] = _request(decision_ops)
    status = host.wait_for_status(run_id, timeout=60)
    expect(status["runtimeStatus"] == "Completed", status)
    run_ops += _split(COUNTER.take(), POLL)[1]
    polled = host.client.get(f"/api/runs/{run_id}")
    expect(polled.status_code == 200, polled.text)
    finished_poll = COUNTER.take()
    figures["finished-run poll"] = {**summarise(finished_poll), "callers": by_caller(finished_poll)}
    # The same run read as an OpenAI Responses response (the first of its conversation, as most are).
    response = host.client.get(f"/api/v1/responses/resp_{run_id}")
    expect(response.status_code == 200 and response.json()["status"] == "completed", response.text)
    figures["finished response get"] = _request(COUNTER.take())
    return {**_whole_run(state_path, run_id, run_ops), "figures": figures}


def _whole_run(state_path: Path, run_id: str, run_ops: list[Operation]) -> dict[str, Any]:
    """A run's figures: its operations, per caller with each activity's calls, and its Durable counts (its child
    runs' included)."""
    callers = by_caller(run_ops)
    for name, count in activity_calls(state_path, run_id).items():
        callers.setdefault(f"activity {name}", {**summarise([]), "calls": 0})["calls"] = count
    return {"run": summarise(run_ops), "callers": callers, "durable": durable_actions(raw_history(state_path, run_id))}


def _request(operations: list[Operation]) -> dict[str, Any]:
    """One request's (or one path's) figure: a summary with its `callers`."""
    return {**summarise(operations), "callers": by_caller(operations)}


def cancel_scenario(host: InProcessHost, state_path: Path) -> dict[str, Any]:
    """An approval run cancelled while it waits for its decision: the cancel route and everything the run does from
    then until it ends `cancelled` (its activities on the cancel path, with their calls)."""
    started = host.client.post(START_PATH, json={"input": email_prompt("carol@example.com")})
    expect(started.status_code in (200, 202), started.text)
    run_id = started.json()["run_id"]
    _until_requires_action(host, run_id)
    before = activity_calls(state_path, run_id)
    COUNTER.take()
    cancelled = host.client.post(f"/api/runs/{run_id}/cancel")
    expect(cancelled.status_code == 202, cancelled.text)
    host.wait_for_status(run_id, timeout=60)
    operations = _split(COUNTER.take(), POLL)[1]
    view = host.client.get(f"/api/runs/{run_id}").json()
    expect(view["status"] == "cancelled", view)
    COUNTER.take()
    figure = _request(operations)
    for name, count in (activity_calls(state_path, run_id) - before).items():
        figure["callers"].setdefault(f"activity {name}", {**summarise([]), "calls": 0})["calls"] = count
    return figure


WORKFLOWS_PACKAGE = "bench.workload.workflows"
WORKFLOW = "signalled"  # one worker step (one model call), then one `go` signal
WORKFLOW_POLL = "route get_workflow_run"
SIGNAL = "route signal_workflow_run"


def workflow_scenario(host: InProcessHost, state_path: Path) -> dict[str, Any]:
    """A workflow run from its HTTP start to completion: its agent step's child run, then its signal step, sent the
    `go` signal once it waits for it. Its polls (waiting for the signal step) are left out; the signal is in."""
    COUNTER.take()
    started = host.client.post(f"/api/workflows/{WORKFLOW}/runs", json={"input": {}})
    expect(started.status_code == 202, started.text)
    run_id = started.json()["run_id"]
    for _ in range(200):
        view = host.client.get(f"/api/workflows/runs/{run_id}", params={"wait_seconds": 1}).json()
        if view["pending_signals"] == ["go"]:
            break
    else:
        raise AssertionError("the workflow never waited for its signal")
    run_ops = _split(COUNTER.take(), WORKFLOW_POLL)[1]
    signalled = host.client.post(f"/api/workflows/runs/{run_id}/signals/go", json={"payload": {"ok": True}})
    expect(signalled.status_code == 202, signalled.text)
    signal_ops = [o for o in COUNTER.operations if o[4] == SIGNAL]
    status = host.wait_for_status(run_id, timeout=60)
    expect(status["runtimeStatus"] == "Completed", status)
    run_ops += _split(COUNTER.take(), WORKFLOW_POLL)[1]
    view = host.client.get(f"/api/workflows/runs/{run_id}").json()
    expect(view["status"] == "completed" and view["output"]["go"] == {"ok": True}, view)
    COUNTER.take()
    return {**_whole_run(state_path, run_id, run_ops), "figures": {"one signal": _request(signal_ops)}}


DECISION = "route decide_approval"


def _until_requires_action(host: InProcessHost, run_id: str) -> dict[str, Any]:
    for _ in range(200):
        view = host.client.get(f"/api/runs/{run_id}", params={"wait_seconds": 1}).json()
        if view["status"] == "requires_action":
            return view
    raise AssertionError("the run never asked for approval")


def measure() -> dict[str, dict[str, Any]]:
    """Each scenario's figures: a whole run ("5-step run", "approval run", "workflow run": `run`, `callers`,
    `durable`) or one request or path ("one poll", "one decision", "finished-run poll", "finished response get",
    "one cancel", "one signal": a summary with its `callers`)."""
    install_counter()
    COUNTER.active = True
    cosmos = start_local_cosmos()
    try:
        with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer(WorkloadBrain()) as model:
            state_path = Path(tmp) / "engine.sqlite3"
            settings = {"COSMOS_ENDPOINT": cosmos.endpoint, "COSMOS_KEY": cosmos.key, "COSMOS_DATABASE": "capacity",
                        "WORKFLOWS_PACKAGE": WORKFLOWS_PACKAGE}
            with workload_host(model.base_url, state_path=str(state_path), env=settings) as host:
                run_scenario(host, state_path, blobs_prompt(2, 200), approve=False)  # warm-up: containers, clients
                steps = run_scenario(host, state_path, blobs_prompt(2, 200), approve=False)
                approval = run_scenario(host, state_path, email_prompt("bob@example.com"), approve=True)
                cancel = cancel_scenario(host, state_path)
                workflow = workflow_scenario(host, state_path)
    finally:
        COUNTER.active = False
        COUNTER.take()
        cosmos.stop()
    return {
        "5-step run": steps,
        "approval run": approval,
        "one poll": approval["figures"]["one poll"],
        "one decision": approval["figures"]["one decision"],
        "finished-run poll": steps["figures"]["finished-run poll"],
        "finished response get": steps["figures"]["finished response get"],
        "one cancel": cancel,
        "workflow run": workflow,
        "one signal": workflow["figures"]["one signal"],
    }


# ------------------------------------------------------------------------------------------------------- budgets

BUDGETS_PATH = Path(__file__).resolve().parents[1] / "docs" / "capacity_budgets.json"
KINDS = ("reads", "queries", "writes")


def load_budgets(path: Path = BUDGETS_PATH) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8")))


def callers_of(figure: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(figure["callers"])


def over_budget(results: dict[str, dict[str, Any]], budgets: dict[str, Any]) -> list[str]:
    """Every way the measured operations exceed the budgets: a function (route or activity) of a scenario doing more
    point reads, queries or writes than its budget, or one with no budget at all (a new store access on the path)."""
    problems = []
    for scenario, functions in budgets["operations"].items():
        measured = callers_of(results[scenario])
        for name, counts in sorted(measured.items()):
            allowed = functions.get(name)
            if allowed is None:
                if any(counts[k] for k in KINDS):
                    problems.append(f"{scenario} / {name}: {_counts(counts)} with no budget")
                continue
            for kind in KINDS:
                if counts[kind] > allowed.get(kind, 0):
                    problems.append(f"{scenario} / {name}: {counts[kind]} {kind}, budget {allowed.get(kind, 0)} "
                                    f"({', '.join(f'{k} x{v}' for k, v in sorted(counts['detail'].items()))})")
    return problems


def under_budget(results: dict[str, dict[str, Any]], budgets: dict[str, Any]) -> list[str]:
    """Budgets looser than what was measured (tighten them in the table, so a new access cannot hide in the slack)."""
    slack = []
    for scenario, functions in budgets["operations"].items():
        measured = callers_of(results[scenario])
        for name, allowed in functions.items():
            counts = measured.get(name, {k: 0 for k in KINDS})
            if any(counts[k] < allowed.get(k, 0) for k in KINDS):
                slack.append(f"{scenario} / {name}: measured {_counts(counts)}, budget {_counts(allowed)}")
    return slack


def measured_operations(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    return {
        scenario: {name: {k: c[k] for k in KINDS} for name, c in callers_of(figure).items() if c["operations"]}
        for scenario, figure in results.items()
    }


def _counts(counts: dict[str, Any]) -> str:
    return ", ".join(f"{counts.get(k, 0)} {k}" for k in KINDS)


def ru_of(results: dict[str, dict[str, Any]], scenario: str) -> float:
    figure = results[scenario]
    return float(figure["run"]["ru"] if "run" in figure else figure["ru"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--measured-budgets", action="store_true",
                        help="print the measured counts in the shape of the budget table's `operations` and exit")
    args = parser.parse_args()
    results = measure()
    if args.measured_budgets:
        print(json.dumps(measured_operations(results), indent=2))
        return
    budgets = load_budgets()
    durable_rows, cosmos_rows = [], []
    for name in ("5-step run", "approval run", "workflow run"):
        d = results[name]["durable"]
        durable_rows.append([name, d["history events"], d["episodes"], d["activities"], d["timers"], d["events"],
                             d["actions"]])
    for name, result in results.items():
        rows = [*result["callers"].items(), ("whole run" if "run" in result else "whole request",
                                             result.get("run", result))]
        for caller_name, c in rows:
            cosmos_rows.append([name, caller_name, c.get("calls") or "", c["operations"], c["reads"], c["queries"],
                                c["writes"], c["largest_write_bytes"], round(c["ru"], 1)])
    target_rows = []
    for name, target in budgets["targets_ru"].items():
        ru = ru_of(results, name)
        target_rows.append([name, round(ru, 1), target, "met" if ru <= target else "NOT met"])
    body = (
        table(["scenario", "history events", "episodes", "activities", "timers", "external events",
               "DTS actions"], durable_rows)
        + "\n\n"
        + table(["figure", "estimated RU", "target RU", ""], target_rows)
        + "\n\n"
        + table(["scenario", "function", "calls", "Cosmos operations", "point reads", "queries", "writes",
                 "largest item written (bytes)", "estimated RU"], cosmos_rows)
    )
    details = "; ".join(
        f"{name} / {caller_name}: " + ", ".join(f"{k} x{v}" for k, v in sorted(c["detail"].items()))
        for name, result in results.items() for caller_name, c in result["callers"].items() if c["operations"]
    )
    problems = over_budget(results, budgets)
    notes = (
        "5-step run = `blobs 2 size 200` (3 model calls, 2 tool calls); approval run = `email` (1 model call, a tool "
        "call needing approval, its decision, the tool, a final model call); one poll = a poll of the approval run "
        "waiting for its decision, caught up, with its continuation token; one decision = the decision route; "
        "finished-run poll = a poll of the finished 5-step run without a token (all its updates); finished response "
        "get = the same run read as a Responses response (`GET /api/v1/responses/resp_<run>`); one cancel = the "
        "cancel route on an approval run waiting for its decision, and what the run does until it ends cancelled; "
        "workflow run = `signalled` (a `worker` step with one model call, then a wait for one `go` signal), start to "
        "end, its child run and its signal included, its polls left out; one signal = the signal route (2 writes: "
        "the reservation `signal-key:<name>:<id>` and the signal). DTS actions per the "
        "Durable Task Scheduler billing definition (start 1, activity 2, timer 1, external event 1). RU estimated from "
        "the documented cost by item size (point read 1 RU and write 4.95 RU at 1 KB, session consistency); queries "
        f"assumed {QUERY_BASE_RU} RU + 1 RU per item returned. The approval run's own polls (waiting for "
        "requires_action) are left out of its totals; its decision is in them. Budgets: "
        f"`docs/capacity_budgets.json` ({'all within' if not problems else 'OVER: ' + '; '.join(problems)}). "
        f"Operations: {details}."
    )
    publish(section("Capacity counts per agent turn", command_line("bench.capacity_bench"), body, notes),
            record=not args.no_record)


if __name__ == "__main__":
    main()
