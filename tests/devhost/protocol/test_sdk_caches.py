"""devhost's SDK-side caches: the same values the SDK computes, built once."""

from __future__ import annotations

import importlib
from collections import namedtuple
from datetime import timedelta

import pytest
from azure.durable_functions.models.TaskOrchestrationExecutor import TaskOrchestrationExecutor
from azure.durable_functions.models.utils.json_utils import parse_timespan_attrib

from devhost.invoke import install_sdk_caches

# (the package exports the class under the module's name)
context_module = importlib.import_module("azure.durable_functions.models.DurableOrchestrationContext")


def test_each_episode_executor_shares_one_payload_class_with_the_sdk_s_table() -> None:
    install_sdk_caches()
    install_sdk_caches()  # (installing twice keeps the one cache)
    first, second = TaskOrchestrationExecutor(), TaskOrchestrationExecutor()
    a, b = first.event_to_SetTaskValuePayload, second.event_to_SetTaskValuePayload
    assert {type(p) for p in a.values()} == {type(p) for p in b.values()}  # one class, not one per episode
    payload = namedtuple("SetTaskValuePayload", ("is_success", "task_id_key"))  # what the SDK defines itself
    assert {k: payload(*v) for k, v in a.items()} == {k: payload(*v) for k, v in b.items()}
    shared = type(next(iter(a.values())))
    assert shared._fields == payload._fields and shared.__module__ == TaskOrchestrationExecutor.__module__
    assert a[next(iter(first.task_completion_events))] == b[next(iter(first.task_completion_events))]


def test_other_namedtuple_calls_of_the_sdk_module_are_not_cached() -> None:
    install_sdk_caches()
    import azure.durable_functions.models.TaskOrchestrationExecutor as module

    make = module.namedtuple  # type: ignore[attr-defined]
    assert make("X", ["a"]) is not make("X", ["a"])  # (a list: not a cache key)
    assert make("Y", ("a",), defaults=(1,)) is not make("Y", ("a",), defaults=(1,))
    assert make("Z", ("a", "b")) is make("Z", ("a", "b"))
    assert make("Z", ("a", "b"))(1, 2).b == 2


@pytest.mark.parametrize("text", ["00:00:00", "3.00:00:00", "6.00:00:00", "-1.02:03:04.5000000"])
def test_the_sdk_s_timespan_parse_is_memoised_with_the_sdk_s_values(text: str) -> None:
    install_sdk_caches()
    parse = context_module.parse_timespan_attrib  # type: ignore[attr-defined]
    assert parse(text) == parse_timespan_attrib(text) and isinstance(parse(text), timedelta)
    assert parse(text) is parse(text)  # parsed once per text


def test_a_timespan_the_sdk_refuses_is_still_refused() -> None:
    install_sdk_caches()
    with pytest.raises(Exception, match="Format of TimeSpan failed"):
        context_module.parse_timespan_attrib("3 days")  # type: ignore[attr-defined]
