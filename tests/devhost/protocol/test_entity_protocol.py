"""Entity trigger JSON and the real SDK's batch results (durable-protocol.md E.2), through devhost's invoke layer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devhost.app_loader import load_app
from devhost.invoke import invoke_entity_batch
from devhost.protocol.entity_messages import (
    EntityInternalError,
    EntityRequest,
    batch_request_json,
    key_problem,
    parse_batch_result,
    parse_scheduler_id,
    request_message,
    response_message,
    scheduler_id,
)

APP = Path(__file__).resolve().parent.parent / "apps" / "entity_counter"


def _req(op: str, value: object = None, signal: bool = False) -> EntityRequest:
    raw = None if value is None else json.dumps(json.dumps(value))
    return EntityRequest(op, raw, "id", signal, None, None)


@pytest.fixture(scope="module")
def counter():
    function = load_app(APP).entity("counter")
    assert function is not None
    return function


def test_trigger_json_is_indented_in_extension_order() -> None:
    text = batch_request_json("Counter", "k1", True, "8", [_req("add", 3), _req("get", signal=True)])
    assert text.startswith('{\n  "self": {\n    "name": "counter",\n    "key": "k1"\n  },\n  "exists": true,')
    assert json.loads(text)["batch"][1] == {"name": "get", "input": None, "isSignal": True}


def test_documented_batches_round_trip(counter) -> None:
    """E.2.5: state carried verbatim between batches; stale result; no rollback; set_result resurrects."""
    state, exists = None, False
    table = [
        ([_req("add", 5, True), _req("add", 3), _req("get")], (True, "8"), [("null", False), ("null", False),
                                                                             ("8", False)]),
        ([_req("add_then_fail", 100), _req("get"), _req("fail"), _req("noresult")], (True, "108"),
         [('"boom after set_state"', True), ("108", False), ('"plain failure"', True), ("108", False)]),
        ([_req("reset"), _req("get"), _req("whoami")], (True, "0"),
         [("null", False), ("0", False), ('{"name": "counter", "key": "k1"}', False)]),
        ([_req("delete"), _req("get")], (True, "null"), [("null", False), ("0", False)]),
        ([_req("delete")], (False, "null"), [("null", False)]),
    ]
    for batch, expected_state, expected_results in table:
        result = invoke_entity_batch(counter, batch_request_json("counter", "k1", exists, state, batch), len(batch))
        assert (result.exists, result.state) == expected_state
        assert [(r.result, r.is_error) for r in result.results] == expected_results
        exists, state = result.exists, result.state


def test_short_or_invalid_results_are_internal_errors() -> None:
    with pytest.raises(EntityInternalError):
        parse_batch_result('{"entityExists": true, "entityState": "1", "results": [], "signals": []}', 1)
    with pytest.raises(EntityInternalError):
        parse_batch_result("not json", 1)


def test_ids_messages_and_keys() -> None:
    assert scheduler_id("Counter", "K@1") == "@counter@K@1"
    assert parse_scheduler_id("@counter@K@1") == ("counter", "K@1")
    assert json.loads(request_message(operation="add", signal=True, input_text='"5"', request_id="g",
                                      parent="o", parent_execution="x")) == {
        "op": "add", "signal": True, "input": '"5"', "id": "g", "parent": "o", "parentExecution": "x",
        "Timestamp": "0001-01-01T00:00:00", "Predecessor": "0001-01-01T00:00:00"}
    assert response_message('"boom"', True) == '{"result":"\\"boom\\"","exceptionType":"Error"}'
    assert response_message("5", False) == '{"result":"5"}'
    assert key_problem("a/b") and key_problem("a\x07") and key_problem("ok") is None


def _inline_entities():
    import azure.durable_functions as df
    import azure.functions as func

    from devhost.app_loader import FunctionIndex

    app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)

    @app.entity_trigger(context_name="context")
    async def async_entity(context: df.DurableEntityContext) -> None:
        context.set_state(1)

    @app.entity_trigger(context_name="context")
    def reader(context: df.DurableEntityContext) -> None:
        context.set_result(context.get_input())

    return FunctionIndex.from_app(app, "inline")


def test_untouched_state_is_passed_through_verbatim() -> None:
    reader = _inline_entities().entity("reader")  # never calls get_state / set_state
    assert reader is not None
    result = invoke_entity_batch(reader, batch_request_json("reader", "k", True, "[ 8 ,  9 ]", [_req("r", 1)]), 1)
    assert (result.state, result.results[0].result) == ("[ 8 ,  9 ]", "1")


def test_async_entity_function_is_a_no_op_and_null_input_fails_get_input() -> None:
    index = _inline_entities()
    async_entity, reader = index.entity("async_entity"), index.entity("reader")
    assert async_entity is not None and reader is not None
    nothing = invoke_entity_batch(async_entity, batch_request_json("async_entity", "k", False, None, [_req("x")]), 1)
    assert (nothing.exists, nothing.results[0].result) == (False, "null")
    no_input = invoke_entity_batch(reader, batch_request_json("reader", "k", False, None, [_req("read")]), 1)
    assert no_input.results[0].is_error
