"""Orchestrations probing the conformance items of durable-protocol.md §7 (determinism, timers, retries, ...)."""

from datetime import timedelta

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)
replay_log: list[tuple[str, bool]] = []
child_attempts: dict[str, int] = {}
VARIANT = {"first_activity": "echo"}


@app.orchestration_trigger(context_name="context")
def replaying(context: df.DurableOrchestrationContext):
    replay_log.append(("start", context.is_replaying))
    yield context.call_activity("echo", 1)
    replay_log.append(("after1", context.is_replaying))
    yield context.call_activity("echo", 2)
    replay_log.append(("after2", context.is_replaying))
    return "ok"


@app.orchestration_trigger(context_name="context")
def uuids(context: df.DurableOrchestrationContext):
    first = str(context.new_uuid())
    yield context.call_activity("echo", first)
    second = str(context.new_uuid())
    yield context.call_activity("echo", second)
    return [first, second, context.current_utc_datetime.isoformat()]


@app.orchestration_trigger(context_name="context")
def changing(context: df.DurableOrchestrationContext):
    yield context.call_activity(VARIANT["first_activity"], 1)
    yield context.create_timer(context.current_utc_datetime + timedelta(minutes=1))
    return "done"


@app.orchestration_trigger(context_name="context")
def timers(context: df.DurableOrchestrationContext):
    start = context.current_utc_datetime
    yield context.create_timer(start - timedelta(hours=1))  # in the past: fires at once
    yield context.create_timer(start + timedelta(days=context.get_input()))
    return (context.current_utc_datetime - start).total_seconds()


@app.orchestration_trigger(context_name="context")
def retry_in_task_all(context: df.DurableOrchestrationContext):
    opts = df.RetryOptions(1000, 3)
    results = yield context.task_all([
        context.call_sub_orchestrator_with_retry("flaky_child", opts, context.instance_id),
        context.call_activity("echo", "plain"),
    ])
    return results


@app.orchestration_trigger(context_name="context")
def flaky_child(context: df.DurableOrchestrationContext):
    key = context.get_input()
    if not context.is_replaying:
        child_attempts[key] = child_attempts.get(key, 0) + 1
    yield context.call_activity("echo", key)
    if child_attempts[key] < 2:
        raise ValueError(f"child attempt {child_attempts[key]} failed")
    return f"child ok after {child_attempts[key]}"


@app.orchestration_trigger(context_name="context")
def rounds(context: df.DurableOrchestrationContext):
    state = context.get_input()
    if state["round"] == 0:
        yield context.wait_for_external_event("go")  # 'X' events raised meanwhile stay buffered, then are dropped
        context.continue_as_new({"round": 1})
        return None
    value = yield context.wait_for_external_event("X")
    return {"round": state["round"], "x": value}


@app.orchestration_trigger(context_name="context")
def counting_child(context: df.DurableOrchestrationContext):
    n = context.get_input()
    yield context.call_activity("echo", n)
    if n < 3:
        context.continue_as_new(n + 1)
        return None
    return f"finished at {n}"


@app.orchestration_trigger(context_name="context")
def parent_of_counting(context: df.DurableOrchestrationContext):
    return (yield context.call_sub_orchestrator("counting_child", 0, "counting-child"))


@app.orchestration_trigger(context_name="context")
def parent_of_waiting(context: df.DurableOrchestrationContext):
    try:
        yield context.call_sub_orchestrator("rounds", {"round": 1}, "waiting-child")
    except Exception as exc:
        return f"child failed: {str(exc).split(' ')[0]}"
    return "child completed"


@app.activity_trigger(input_name="value")
def echo(value):
    return value


@app.activity_trigger(input_name="value")
def other(value):
    return value


class Point:
    """A custom class crossing activity boundaries through the df_dumps envelope (to_json / from_json)."""

    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y

    @staticmethod
    def to_json(obj: "Point") -> dict:
        return {"x": obj.x, "y": obj.y}

    @staticmethod
    def from_json(data: dict) -> "Point":
        return Point(data["x"], data["y"])


PAYLOADS = [None, True, False, 0, -7, 3.25, "", "plain", "ünïcødé ✓ 日本", [1, "a", None], {"k": {"nested": [1, 2]}},
            "x" * 100_000]


@app.orchestration_trigger(context_name="context")
def all_types(context: df.DurableOrchestrationContext):
    echoed = []
    for value in PAYLOADS:
        echoed.append((yield context.call_activity("echo", value)))
    by_builder = yield context.call_activity(echo, "by function object")
    point = yield context.call_activity("move_point", Point(1, 2))
    return {"same": echoed == PAYLOADS, "by_builder": by_builder, "point": [point.x, point.y],
            "point_type": type(point).__name__}


@app.activity_trigger(input_name="point")
def move_point(point: Point) -> Point:
    return Point(point.x + 10, point.y + 20)


@app.orchestration_trigger(context_name="context")
def unknown_activity(context: df.DurableOrchestrationContext):
    yield context.call_activity("no_such_activity", 1)
    return "not reached"


@app.orchestration_trigger(context_name="context")
def unknown_sub_orchestrator(context: df.DurableOrchestrationContext):
    yield context.call_sub_orchestrator("no_such_orchestrator", 1)
    return "not reached"


@app.activity_trigger(input_name="code")
def exits(code: int) -> None:
    import sys

    sys.exit(code)


@app.orchestration_trigger(context_name="context")
def exiting(context: df.DurableOrchestrationContext):
    try:
        yield context.call_activity("exits", 3)
    except Exception as exc:
        return str(exc).split(" \n ")[0]
    return "not reached"
