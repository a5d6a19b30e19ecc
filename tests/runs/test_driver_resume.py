"""RunDriver's resume points: where a rewind of a failed run goes on from (pure, no host)."""

from __future__ import annotations

from test_driver import NOW, driver, turn

from agent_runs.contracts import FinishResult, StepFailure
from agent_runs.driver import RunDriver
from agent_runtime.loop_types import (
    CallModel,
    Finish,
    ModelTurn,
    RequestApproval,
    RunTools,
    ToolOutcome,
)


def finish(d: RunDriver, command: Finish) -> None:
    d.finish_input(command)
    d.on_finished(command, FinishResult(status=command.status, reason=command.reason))


def test_a_model_call_that_failed_after_its_retries_is_where_the_run_goes_on() -> None:
    d = driver()
    d.model_call(d.first_command())
    tools = d.on_model_result(turn(("a", False)))
    d.tool_calls(tools)
    d.model_call(_after_tools(d))
    failed = d.on_failure("model_call_failed: down")
    assert isinstance(failed, Finish) and failed.status == "failed"
    finish(d, failed)
    resume = d.resume_point()
    assert resume is not None and resume.step == "call_model" and resume.iteration == 2
    assert isinstance(resume.input.pending_command, CallModel) and resume.input.generation == 1
    assert resume.input.loop_state is not None and resume.input.loop_state.phase == "awaiting_model"
    # Positions go on after everything the failed run wrote (its finish too): tokens' cursors stay valid.
    assert resume.input.next_position > 1 + 2 * 16 + 1
    # The resumed driver executes that model call first, then carries on as any run.
    again = RunDriver(resume.input)
    assert isinstance(again.first_command(), CallModel) and not again.needs_middleware_before()


def _after_tools(d: RunDriver) -> CallModel:
    command = d.on_tool_results([ToolOutcome(call_id="a")])
    assert isinstance(command, CallModel)
    return command


def test_a_model_call_refused_for_good_is_repeatable_too() -> None:
    d = driver()
    d.model_call(d.first_command())
    failed = d.on_model_result(StepFailure(code="model_http_400", message="refused"))
    finish(d, failed)
    assert d.resume_point().step == "call_model"


def test_a_failed_tool_batch_is_executed_again() -> None:
    d = driver()
    d.model_call(d.first_command())
    command = d.on_model_result(turn(("a", False), ("b", False)))
    assert isinstance(command, RunTools)
    d.tool_calls(command)
    finish(d, d.on_failure("tool_call_failed: worker died"))
    resume = d.resume_point()
    assert resume.step == "invoke_tool" and resume.input.pending_command == command
    assert resume.input.loop_state.phase == "awaiting_tools"


def test_nothing_to_resume_after_an_approval_step_failed_a_cancel_or_a_success() -> None:
    d = driver()
    d.model_call(d.first_command())
    command = d.on_model_result(turn(("a", True)))
    assert isinstance(command, RequestApproval)
    d.approval_requests(command, NOW)
    finish(d, d.on_failure("approval_step_failed: store down"))
    assert d.resume_point() is None

    cancelled = driver()
    cancelled.model_call(cancelled.first_command())
    finish(cancelled, cancelled.on_model_result(StepFailure.cancelled()))
    assert cancelled.resume_point() is None

    done = driver()
    done.model_call(done.first_command())
    finish(done, done.on_model_result(ModelTurn(has_text=True)))
    assert done.resume_point() is None


def test_a_failure_before_the_loop_started_restarts_the_run() -> None:
    d = driver(run_middleware=True)
    assert d.needs_middleware_before()
    d.middleware_before_input()
    finish(d, d.on_failure("run_middleware_error: boom"))
    resume = d.resume_point()
    assert resume.step == "run_middleware_before" and resume.input.generation == 0
    assert resume.input.pending_command is None and RunDriver(resume.input).needs_middleware_before()

    discovering = driver(discover_tools=True)
    discovering.discovery_started()
    finish(discovering, discovering.on_failure("tool_discovery_failed: down"))
    assert discovering.resume_point().step == "discover_tools"
