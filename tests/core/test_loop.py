"""The sans-IO loop walked through seed 000's rules one by one (and the approval flow of seed 002)."""

import pytest

from agent_runtime.loop import (
    REASON_MAX_CONSECUTIVE_ERRORS,
    REASON_MAX_ITERATIONS,
    AgentLoop,
    ApprovalAlreadyDecidedError,
    LoopError,
    UnknownApprovalError,
)
from agent_runtime.loop_types import (
    ApprovalDecision,
    ApprovalTimeout,
    AwaitApproval,
    CallModel,
    Cancel,
    Fail,
    Finish,
    LoopConfig,
    LoopState,
    ModelTurn,
    RequestApproval,
    RequiredFunction,
    RunTools,
    ToolCallRef,
    ToolOutcome,
    ToolResults,
)
from agent_runtime.messages import Usage


def calls(*names: str, approval: tuple[str, ...] = (), unknown: tuple[str, ...] = ()) -> ModelTurn:
    refs = [
        ToolCallRef(call_id=f"c-{name}", name=name, known=name not in unknown, needs_approval=name in approval)
        for name in names
    ]
    return ModelTurn(
        tool_calls=refs, finish_reason="tool_calls", usage=Usage(input_tokens=10, output_tokens=2, total_tokens=12)
    )


def answer(reason: str = "stop") -> ModelTurn:
    return ModelTurn(finish_reason=reason, has_text=True, usage=Usage(input_tokens=5, output_tokens=5, total_tokens=10))


def results(command: RunTools, *, errors: tuple[str, ...] = (), terminated: tuple[str, ...] = ()) -> ToolResults:
    return ToolResults(
        outcomes=[
            ToolOutcome(call_id=c.call_id, is_error=c.name in errors, terminated=c.name in terminated)
            for c in command.calls
        ]
    )


def test_answer_without_tools_finishes_with_the_models_reason_and_usage() -> None:
    loop = AgentLoop()
    assert loop.start() == CallModel(iteration=1, tool_choice="auto")
    done = loop.send(answer())
    assert isinstance(done, Finish)
    assert (done.status, done.reason, done.unresolved) == ("completed", "stop", [])
    assert done.usage == Usage(input_tokens=5, output_tokens=5, total_tokens=10)
    assert loop.finished
    with pytest.raises(LoopError, match="finished"):
        loop.send(answer())


def test_tool_calls_run_then_the_model_is_called_again_auto() -> None:
    loop = AgentLoop()
    loop.start()
    run = loop.send(calls("get_weather", "get_time"))
    assert isinstance(run, RunTools)
    assert [(c.call_id, c.action) for c in run.calls] == [("c-get_weather", "invoke"), ("c-get_time", "invoke")]
    assert loop.send(results(run)) == CallModel(iteration=2, tool_choice="auto")
    done = loop.send(answer())
    assert done.reason == "stop"
    assert done.usage.total_tokens == 22  # both model calls summed


def test_max_iterations_default_40_then_one_final_call_without_tools() -> None:
    loop = AgentLoop()
    assert loop.config.max_iterations == 40
    command = loop.start()
    for iteration in range(1, 41):
        assert command == CallModel(iteration=iteration, tool_choice="auto")
        command = loop.send(results(loop.send(calls("again"))))
    assert command == CallModel(iteration=41, tool_choice="none", tools_disabled_reason=REASON_MAX_ITERATIONS)
    done = loop.send(answer())
    assert (done.status, done.reason) == ("completed", REASON_MAX_ITERATIONS)


def test_tool_calls_after_tools_were_turned_off_end_the_run_and_are_reported_unresolved() -> None:
    loop = AgentLoop(LoopConfig(max_iterations=1))
    loop.start()
    command = loop.send(results(loop.send(calls("a"))))
    assert command.tool_choice == "none"
    done = loop.send(calls("b"))  # the model ignored tool_choice="none"
    assert (done.status, done.reason) == ("completed", "tool_calls_not_allowed")
    assert [c.call_id for c in done.unresolved] == ["c-b"]


def test_three_consecutive_error_batches_turn_tools_off() -> None:
    loop = AgentLoop()
    assert loop.config.max_consecutive_errors == 3
    loop.start()
    for _ in range(2):
        command = loop.send(results(loop.send(calls("flaky", "ok")), errors=("flaky",)))
        assert command.tool_choice == "auto"
    command = loop.send(results(loop.send(calls("flaky")), errors=("flaky",)))
    assert command == CallModel(iteration=4, tool_choice="none", tools_disabled_reason=REASON_MAX_CONSECUTIVE_ERRORS)
    done = loop.send(answer())
    assert (done.status, done.reason) == ("completed", REASON_MAX_CONSECUTIVE_ERRORS)


def test_a_successful_batch_resets_the_error_count() -> None:
    loop = AgentLoop()
    loop.start()
    for errors in [("x",), ("x",), (), ("x",), ("x",)]:
        command = loop.send(results(loop.send(calls("x")), errors=errors))
        assert command.tool_choice == "auto"
    assert loop.state.consecutive_error_batches == 2


def test_unknown_tool_gets_an_error_result_and_the_loop_continues() -> None:
    loop = AgentLoop()
    loop.start()
    run = loop.send(calls("known", "made_up", unknown=("made_up",)))
    assert [(c.name, c.action) for c in run.calls] == [("known", "invoke"), ("made_up", "unknown")]
    assert isinstance(loop.send(results(run, errors=("made_up",))), CallModel)
    assert loop.state.consecutive_error_batches == 1  # an unknown call counts as an error


def test_unknown_tool_terminates_when_configured() -> None:
    loop = AgentLoop(LoopConfig(terminate_on_unknown_calls=True))
    loop.start()
    done = loop.send(calls("known", "made_up", unknown=("made_up",)))
    assert (done.status, done.reason) == ("failed", "unknown_tool: made_up")
    assert [c.call_id for c in done.unresolved] == ["c-known", "c-made_up"]


@pytest.mark.parametrize("choice", ["required", RequiredFunction(required_function_name="get_weather")])
def test_required_tool_choice_returns_right_after_the_tools(choice) -> None:
    loop = AgentLoop(LoopConfig(tool_choice=choice))
    assert loop.start() == CallModel(iteration=1, tool_choice=choice)
    done = loop.send(results(loop.send(calls("get_weather"))))
    assert (done.status, done.reason) == ("completed", "tool_choice_required")
    assert loop.state.iteration == 1  # no second model call


def test_tool_choice_none_sends_none_and_refuses_calls() -> None:
    loop = AgentLoop(LoopConfig(tool_choice="none"))
    assert loop.start().tool_choice == "none"
    done = loop.send(calls("sneaky"))
    assert done.reason == "tool_calls_not_allowed"
    assert [c.name for c in done.unresolved] == ["sneaky"]


def test_middleware_termination_ends_the_loop_after_the_batch() -> None:
    loop = AgentLoop()
    loop.start()
    done = loop.send(results(loop.send(calls("a", "b")), terminated=("b",)))
    assert (done.status, done.reason, done.unresolved) == ("completed", "middleware_termination", [])
    assert loop.state.iteration == 1


def test_partial_approval_of_a_batch() -> None:
    loop = AgentLoop()
    loop.start()
    asked = loop.send(calls("read", "pay", "delete", approval=("pay", "delete")))
    assert isinstance(asked, RequestApproval)
    assert [c.name for c in asked.calls] == ["pay", "delete"]
    assert loop.awaiting_approval == ["c-pay", "c-delete"]
    assert loop.send(ApprovalDecision(call_id="c-pay", approved=True, edited=True)) == AwaitApproval(
        pending=["c-delete"]
    )
    assert loop.awaiting_approval == ["c-delete"]
    run = loop.send(ApprovalDecision(call_id="c-delete", approved=False, reason="too risky"))
    assert [(c.name, c.action, c.reason) for c in run.calls] == [
        ("read", "invoke", None),
        ("pay", "invoke", None),
        ("delete", "deny", "too risky"),
    ]
    # the denied call's result is not an error of the tool: the error count stays at zero
    assert isinstance(loop.send(results(run)), CallModel)
    assert loop.state.consecutive_error_batches == 0


def test_decisions_for_unknown_or_decided_calls_are_refused() -> None:
    loop = AgentLoop()
    loop.start()
    loop.send(calls("read", "pay", "send", approval=("pay", "send")))
    with pytest.raises(UnknownApprovalError):
        loop.send(ApprovalDecision(call_id="c-nope", approved=True))
    with pytest.raises(UnknownApprovalError):
        loop.send(ApprovalDecision(call_id="c-read", approved=True))  # never needed approval
    loop.send(ApprovalDecision(call_id="c-pay", approved=True))
    with pytest.raises(ApprovalAlreadyDecidedError):
        loop.send(ApprovalDecision(call_id="c-pay", approved=False))


def test_approval_timeout_rejects_pending_calls_or_fails_the_run() -> None:
    loop = AgentLoop()
    loop.start()
    loop.send(calls("pay", "send", approval=("pay", "send")))
    loop.send(ApprovalDecision(call_id="c-pay", approved=True))
    run = loop.send(ApprovalTimeout())
    assert [(c.name, c.action) for c in run.calls] == [("pay", "invoke"), ("send", "deny")]
    assert "deadline" in run.calls[1].reason

    failing = AgentLoop(LoopConfig(on_approval_timeout="fail"))
    failing.start()
    failing.send(calls("pay", approval=("pay",)))
    done = failing.send(ApprovalTimeout())
    assert (done.status, done.reason, [c.name for c in done.unresolved]) == ("failed", "approval_timeout", ["pay"])


def test_cancel_while_waiting_for_approval_reports_the_waiting_calls() -> None:
    loop = AgentLoop()
    loop.start()
    loop.send(calls("pay", approval=("pay",)))
    done = loop.send(Cancel(reason="user cancelled"))
    assert (done.status, done.reason, [c.name for c in done.unresolved]) == ("cancelled", "user cancelled", ["pay"])


def test_cancel_and_fail_while_waiting_for_the_model() -> None:
    loop = AgentLoop()
    loop.start()
    assert loop.send(Cancel()).status == "cancelled"
    failing = AgentLoop()
    failing.start()
    done = failing.send(Fail(reason="model error 400: bad request"))
    assert (done.status, done.reason) == ("failed", "model error 400: bad request")


def test_events_out_of_order_are_refused() -> None:
    loop = AgentLoop()
    with pytest.raises(LoopError):
        loop.send(answer())  # not started
    loop.start()
    with pytest.raises(LoopError):
        loop.start()
    with pytest.raises(LoopError, match="unexpected ToolResults"):
        loop.send(ToolResults(outcomes=[]))
    run = loop.send(calls("a", "b"))
    with pytest.raises(LoopError, match=r"missing \['c-b'\]"):
        loop.send(ToolResults(outcomes=[ToolOutcome(call_id="c-a")]))
    assert isinstance(loop.send(results(run)), CallModel)


def test_state_round_trips_through_json_mid_approval() -> None:
    loop = AgentLoop(LoopConfig(max_iterations=5))
    loop.start()
    loop.send(calls("read", "pay", approval=("pay",)))
    resumed = AgentLoop(state=LoopState.model_validate_json(loop.state.model_dump_json()))
    run = resumed.send(ApprovalDecision(call_id="c-pay", approved=True))
    assert [c.action for c in run.calls] == ["invoke", "invoke"]
    assert resumed.config.max_iterations == 5


def test_the_loop_is_deterministic() -> None:
    def drive() -> list[str]:
        loop = AgentLoop(LoopConfig(max_iterations=3))
        trace = [loop.start().model_dump_json()]
        for _ in range(3):
            run = loop.send(calls("x", "y", approval=("y",)))
            trace.append(run.model_dump_json())
            run = loop.send(ApprovalDecision(call_id="c-y", approved=False, reason="no"))
            trace.append(loop.send(results(run, errors=("x",))).model_dump_json())
        trace.append(loop.send(answer()).model_dump_json())
        return trace

    assert drive() == drive()


def test_what_travels_through_orchestration_history_stays_small() -> None:
    # The durable orchestrator replays every event and command; they carry ids and flags, never conversation content.
    loop = AgentLoop()
    command = loop.start()
    for _ in range(40):
        run = loop.send(calls(*[f"tool_{i}" for i in range(10)], approval=("tool_3",)))
        run = loop.send(ApprovalDecision(call_id="c-tool_3", approved=True))
        assert len(run.model_dump_json()) < 2_000
        command = loop.send(results(run))
    assert len(command.model_dump_json()) < 200
    assert len(loop.state.model_dump_json()) < 1_000  # constant: the state does not grow with the run


def test_the_loop_modules_import_nothing_that_does_io_or_keeps_time() -> None:
    import ast
    from pathlib import Path

    import agent_runtime

    allowed = {
        "__future__", "typing", "pydantic", "loop_types", "messages", "spend", "json", "collections.abc", "datetime",
        "json_limits",  # the bounded JSON reader: pure
    }
    package = Path(agent_runtime.__file__).parent
    for module in ("loop.py", "loop_types.py", "messages.py", "spend.py"):
        tree = ast.parse((package / module).read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):  # `from . import x` names x
                imported |= {node.module} if node.module else {alias.name for alias in node.names}
        assert imported <= allowed, f"{module} imports {sorted(imported - allowed)}"
