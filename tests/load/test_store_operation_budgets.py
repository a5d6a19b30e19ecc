"""Store operations per hot path stay within their budgets (counts, not time).

The capacity benchmark's counting (`bench.capacity_bench`: every Cosmos operation of the real app on devhost, against
the local Cosmos server, attributed to the HTTP route or activity that made it) runs a 5-step run, an approval run, a
caught-up poll, a decision, a poll of a finished run, a cancel of a run waiting for approval, and a workflow run with
its signal; each function's point reads, queries and writes must stay within `docs/capacity_budgets.json`. A change
that adds a read or a write to a hot path fails here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench import capacity_bench

pytestmark = [
    pytest.mark.cosmos,
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]


@pytest.fixture(scope="module")
def measured() -> Iterator[dict[str, dict[str, Any]]]:
    cosmos_local = pytest.importorskip("cosmos_local")
    try:
        cosmos_local.start_local_cosmos().stop()
    except cosmos_local.LocalCosmosError as error:
        pytest.skip(f"local Cosmos unavailable: {error}")
    yield capacity_bench.measure()


def test_no_hot_path_does_more_store_operations_than_its_budget(measured: dict[str, dict[str, Any]]) -> None:
    problems = capacity_bench.over_budget(measured, capacity_bench.load_budgets())
    assert not problems, "store operations over budget:\n" + "\n".join(problems)


def test_every_budgeted_figure_was_measured(measured: dict[str, dict[str, Any]]) -> None:
    budgets = capacity_bench.load_budgets()
    assert set(budgets["targets_ru"]) <= set(measured)
    assert set(budgets["operations"]) <= set(measured)
    # Each run scenario ran what it says (the counts mean nothing for a run that did less).
    assert measured["5-step run"]["callers"]["activity call_model"]["calls"] == 3
    assert measured["5-step run"]["callers"]["activity invoke_tool"]["calls"] == 2
    assert measured["approval run"]["callers"]["activity record_approvals"]["calls"] == 1
    assert measured["one cancel"]["callers"]["activity finish_run"]["calls"] == 1
    workflow = measured["workflow run"]["callers"]
    assert workflow["activity call_model"]["calls"] == 1  # the agent step's child run
    assert workflow["activity workflow_record_signal"]["calls"] == 1
    # A signal is two writes: its reservation (`signal-key:<name>:<id>`) and the signal.
    assert measured["one signal"]["callers"]["route signal_workflow_run"]["detail"]["create effects"] == 2


def test_the_budget_check_catches_an_added_read(measured: dict[str, dict[str, Any]]) -> None:
    """The check itself: one more point read on a route than its budget allows is reported."""
    budgets = capacity_bench.load_budgets()
    tighter = {**budgets, "operations": {**budgets["operations"]}}
    decision = dict(tighter["operations"]["one decision"]["route decide_approval"])
    decision["reads"] = measured["one decision"]["callers"]["route decide_approval"]["reads"] - 1
    tighter["operations"]["one decision"] = {"route decide_approval": decision}
    assert any("one decision / route decide_approval" in p for p in capacity_bench.over_budget(measured, tighter))
