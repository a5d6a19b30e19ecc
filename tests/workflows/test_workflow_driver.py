"""The sans-IO `WorkflowDriver` alone: control flow, journal seqs, references, monitors, continue-as-new."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from agent_runs.budget import within_budget
from workflow_runtime import ApprovalStep, Condition, FunctionStep, MonitorStep, WorkflowDefinition
from workflow_runtime.contracts import StepResult, WorkflowInput, WorkflowRef
from workflow_runtime.driver import STEPS_PER_EXECUTION, ContinueAsNew, Done, ExecuteStep, Sleep, WorkflowDriver
from workflows.review_pipeline import review_pipeline

NOW = datetime(2030, 1, 1, tzinfo=UTC)


class Empty(BaseModel):
    pass


def _driver(definition: WorkflowDefinition, state: dict | None = None) -> WorkflowDriver:
    ref = WorkflowRef(run_id="wf1", workflow=definition.name)
    return WorkflowDriver(definition, WorkflowInput(ref=ref, **({"state": state} if state else {})))


def _ok(command: ExecuteStep, **facts: object) -> StepResult:
    return StepResult(step_id=command.step_id, status="ok", **facts)


def _run(driver: WorkflowDriver, answers: dict[str, dict]) -> list[str]:
    """Drive to the end, answering each step with `answers[step_id]` (default: ok)."""
    ran: list[str] = []
    while not isinstance(command := driver.next_command(NOW), Done):
        assert isinstance(command, ExecuteStep)
        ran.append(command.step_id)
        driver.on_result(_ok(command, **answers.get(command.step_id, {})), NOW)
    return ran


def test_review_pipeline_takes_the_revision_branch_only_when_the_condition_holds() -> None:
    revised = _driver(review_pipeline)
    answers = {"needs_revision": {"condition": True, "journaled": False}, "sign_off": {"approved": True}}
    assert _run(revised, answers) == [
        "write", "review", "needs_revision", "revise", "final", "sign_off"
    ]
    assert set(revised.state.refs) == {"write", "review", "revise", "final", "sign_off"}
    assert len(set(revised.state.refs.values())) == 5  # every entry its own seq
    assert revised.next_command(NOW) == Done(status="completed", reason="all steps completed")

    straight = _driver(review_pipeline)
    assert _run(straight, {"needs_revision": {"condition": False, "journaled": False}}) == [
        "write", "review", "needs_revision", "final", "sign_off"
    ]


def test_a_failed_step_ends_the_workflow_naming_it() -> None:
    driver = _driver(review_pipeline)
    command = driver.next_command(NOW)
    driver.on_result(StepResult(step_id=command.step_id, status="failed", error="model_http_400: bad"), NOW)
    done = driver.next_command(NOW)
    assert done == Done(status="failed", reason="step 'write' failed: model_http_400: bad", failed_step="write")
    assert driver.finish_request(done).failed_step == "write"


def test_a_rejection_fails_only_when_the_gate_says_so() -> None:
    gate = ApprovalStep(id="gate", message="ok?", timeout_seconds=60, on_reject="fail")
    driver = _driver(WorkflowDefinition(name="g", input_model=Empty, steps=[gate]))
    command = driver.next_command(NOW)
    driver.on_result(_ok(command, approved=False), NOW)
    assert driver.next_command(NOW) == Done(status="failed", reason="step 'gate' was rejected", failed_step="gate")


def test_a_stored_cancel_request_ends_the_workflow_cancelled() -> None:
    driver = _driver(review_pipeline)
    command = driver.next_command(NOW)
    driver.on_result(_ok(command, cancel_requested=True), NOW)
    assert driver.next_command(NOW).status == "cancelled"


def _monitor(deadline: float | None) -> WorkflowDefinition:
    check = MonitorStep(
        id="watch", function=lambda data: {}, every_seconds=3600, until=Condition(ref="steps.watch.done"),
        deadline_seconds=deadline, on_deadline="fail",
    )
    return WorkflowDefinition(name="m", input_model=Empty, steps=[check, FunctionStep(id="after", function=dict)])


def test_a_monitor_sleeps_between_checks_and_fails_at_its_deadline() -> None:
    driver = _driver(_monitor(deadline=3 * 3600 + 60))
    now = NOW
    sleeps = []
    while not isinstance(command := driver.next_command(now), Done):
        if isinstance(command, Sleep):
            sleeps.append(command.until - NOW)
            now = command.until
            driver.on_slept()
            continue
        assert command.key == f"watch.{command.iteration}"
        driver.on_result(_ok(command, condition=False), now)
    hours = [timedelta(hours=n) for n in (1, 2, 3)]
    assert sleeps == [*hours, timedelta(hours=3, minutes=1)]  # the last pause stops at the deadline
    assert command.failed_step == "watch" and "deadline" in command.reason


def test_an_eternal_monitor_continues_as_new_and_resumes_where_it_was() -> None:
    definition = _monitor(deadline=None)
    driver = _driver(definition)
    now = NOW
    while not isinstance(command := driver.next_command(now), ContinueAsNew):
        if isinstance(command, Sleep):
            now = command.until
            driver.on_slept()
        else:
            driver.on_result(_ok(command, condition=False), now)
    carried = command.input
    within_budget(carried.model_dump(mode="json"), "continue-as-new input")
    assert carried.state.generation == 1 and carried.state.steps_done == STEPS_PER_EXECUTION
    resumed = WorkflowDriver(definition, carried)
    next_command = resumed.next_command(now)
    assert isinstance(next_command, ExecuteStep) and next_command.iteration == STEPS_PER_EXECUTION // 2
    resumed.on_result(_ok(next_command, condition=True), now)
    after = resumed.next_command(now)
    assert isinstance(after, ExecuteStep) and after.step_id == "after"
    assert after.seq > next_command.seq  # journal seqs keep increasing across executions
