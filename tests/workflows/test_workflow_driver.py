"""The sans-IO `WorkflowDriver` alone: typed requests out, typed events in, no Durable. Control flow, journal seqs,
references, child runs, gates (approve, reject, expire, escalate), signals, delays, monitors, cancel, failures and
continue-as-new."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from activities.workflow_agents import workflow_flag_children_cancelled, workflow_record_agents, workflow_start_agents
from activities.workflow_finish import workflow_closed_before, workflow_finish
from activities.workflow_gates import workflow_expire_gate, workflow_open_gate, workflow_record_gate
from activities.workflow_steps import (
    workflow_call_function,
    workflow_evaluate,
    workflow_find_signal,
    workflow_record_delay,
    workflow_record_signal,
    workflow_resolve_time,
)
from agent_runs.budget import within_budget
from agent_runs.contracts import FinishResult, RunInput, RunRef
from agent_runtime.loop_types import LoopConfig
from durable_steps import OUTAGE_RETRIES
from served_workflows.review_pipeline import review_pipeline
from workflow_runtime import (
    AgentStep,
    ApprovalStep,
    Condition,
    DelayStep,
    Escalate,
    FunctionStep,
    MonitorStep,
    ParallelStep,
    SignalStep,
    WorkflowDefinition,
)
from workflow_runtime.contracts import (
    AgentRunsRecord,
    ChildRunIds,
    DelayRecord,
    FinishRequest,
    GateExpiry,
    GateOpened,
    GateRecord,
    GateRequest,
    NoResult,
    SignalFound,
    SignalProbe,
    SignalRecord,
    StartedRuns,
    StepRequest,
    StepResult,
    WorkflowClosed,
    WorkflowInput,
    WorkflowRef,
    WorkflowState,
)
from workflow_runtime.driver import (
    LOOKS_PER_EXECUTION,
    STEPS_PER_EXECUTION,
    WorkflowDriver,
    WorkflowDriverError,
)
from workflow_runtime.requests import (
    ActivityCompleted,
    CallActivity,
    Cancelled,
    CheckSignal,
    ChildRunsDrained,
    ChildRunsEnded,
    ContinueAsNew,
    DrainChildRuns,
    Event,
    Failed,
    Finished,
    Pause,
    Rang,
    Request,
    RunChildRuns,
    Silent,
    Sleep,
    TakeCancel,
    TimerFired,
    WaitForDecision,
    WaitForSignal,
)

NOW = datetime(2030, 1, 1, tzinfo=UTC)
RECORDERS = {workflow_record_agents, workflow_call_function, workflow_evaluate, workflow_record_delay,
             workflow_record_signal, workflow_record_gate}


class Empty(BaseModel):
    pass


class Stamp(BaseModel):
    at: str


def _driver(definition: WorkflowDefinition, state: dict[str, Any] | None = None, **flags: bool) -> WorkflowDriver:
    ref = WorkflowRef(run_id="wf1", workflow=definition.name, **flags)
    return WorkflowDriver(definition, WorkflowInput(ref=ref, **({"state": state} if state else {})))


def _flow(*steps: Any) -> WorkflowDefinition:
    return WorkflowDefinition(name="flow", input_model=Empty, steps=list(steps))


def _child(run_id: str) -> RunInput:
    ref = RunRef(run_id=run_id, session_id=run_id, agent="writer", ordinal=1)
    return RunInput(run=ref, loop_config=LoopConfig(), next_position=1, approval_timeout_seconds=60)


def _ok(step_id: str, **facts: Any) -> StepResult:
    return StepResult(**{"step_id": step_id, "status": "ok", **facts})


Answer = Callable[[Request], Event | None]


class Drive:
    """Runs a driver to its end (or a continue-as-new), answering every request as a smooth run would unless
    `answer` says otherwise (return None for the default). Timers move the clock to when they fire."""

    def __init__(self, driver: WorkflowDriver, answer: Answer = lambda request: None, now: datetime = NOW) -> None:
        self.driver = driver
        self.now = now
        self.requests: list[Request] = []
        self.progress: list[Any] = []
        request = driver.start(now)
        while not isinstance(request, Finished | ContinueAsNew):
            self.requests.append(request)
            self.progress.append(driver.progress())
            event = answer(request) or _default(request)
            if isinstance(event, TimerFired) and isinstance(request, Sleep | Pause | WaitForSignal | WaitForDecision):
                self.now = request.until or self.now
            request = driver.send(event, self.now)
        self.end = request

    @property
    def outcome(self) -> Any:
        assert isinstance(self.end, Finished), self.end
        return self.end.outcome

    def calls(self, activity: Any = None) -> list[CallActivity]:
        calls = [r for r in self.requests if isinstance(r, CallActivity)]
        return [c for c in calls if activity is None or c.activity is activity]

    def ran(self) -> list[str]:
        """The steps whose result was recorded, in order."""
        return [call.input.step_id for call in self.calls() if call.activity in RECORDERS]

    def finish(self) -> FinishRequest:
        [*_, finish] = self.calls(workflow_finish)
        return finish.input


def _default(request: Request) -> Event:
    """What happens in a smooth run."""
    if isinstance(request, CallActivity):
        return ActivityCompleted(output=_default_output(request))
    if isinstance(request, TakeCancel | CheckSignal):
        return Silent()
    if isinstance(request, RunChildRuns):
        return ChildRunsEnded()
    if isinstance(request, DrainChildRuns):
        return ChildRunsDrained()
    if isinstance(request, Sleep | Pause):
        return TimerFired()
    return Rang()  # a signal or a decision arrived


def _default_output(call: CallActivity) -> Any:
    step_input = call.input
    if call.activity is workflow_start_agents:
        return StartedRuns(runs=[_child(f"wf1.{step_input.key}")])
    if call.activity is workflow_open_gate:
        level = "escalation" if step_input.level else "approval"
        return GateOpened(approval_id=f"wf1.{step_input.key}.{level}", expires_at=step_input.expires_at)
    if call.activity is workflow_expire_gate:
        return GateExpiry(status="expired")
    if call.activity is workflow_find_signal:
        return SignalFound(found=False)
    if call.activity is workflow_resolve_time:
        return NOW + timedelta(days=3)
    if call.activity is workflow_flag_children_cancelled:
        return NoResult()
    if call.activity is workflow_finish:
        return WorkflowClosed()  # closed as asked
    return _ok(step_input.step_id, approved=True if call.activity is workflow_record_gate else None)


def _results(**by_step: dict[str, Any]) -> Answer:
    """Answer the recording activity of a step with these facts."""

    def answer(request: Request) -> Event | None:
        if isinstance(request, CallActivity) and request.activity in RECORDERS:
            facts = by_step.get(request.input.step_id)
            if facts is not None:
                return ActivityCompleted(output=_ok(request.input.step_id, **facts))
        return None

    return answer


# ----------------------------------------------------------------------------------------------------- control flow


def test_review_pipeline_takes_the_revision_branch_only_when_the_condition_holds() -> None:
    revised = Drive(_driver(review_pipeline), _results(needs_revision={"condition": True, "journaled": False}))
    assert revised.ran() == ["write", "review", "needs_revision", "revise", "final", "sign_off"]
    refs = revised.driver.state.refs
    assert set(refs) == {"write", "review", "revise", "final", "sign_off"}
    assert len(set(refs.values())) == 5  # every entry its own seq
    assert revised.outcome.status == "completed" and revised.outcome.reason == "all steps completed"
    assert revised.finish().refs == refs and revised.finish().last_step == "sign_off"

    straight = Drive(_driver(review_pipeline), _results(needs_revision={"condition": False, "journaled": False}))
    assert straight.ran() == ["write", "review", "needs_revision", "final", "sign_off"]


def test_each_step_activity_gets_its_step_seq_references_and_time() -> None:
    run = Drive(_driver(review_pipeline), _results(needs_revision={"condition": False, "journaled": False}))
    [write_start, review_start, *_] = run.calls(workflow_start_agents)
    assert write_start.input == StepRequest(
        ref=run.driver.ref, step_id="write", key="write", seq=write_start.input.seq, refs={}, at=NOW
    )
    assert review_start.input.refs == {"write": write_start.input.seq}
    assert review_start.input.seq == write_start.input.seq + 1
    [record] = [c for c in run.calls(workflow_record_agents) if c.input.step_id == "write"]
    assert record.input == AgentRunsRecord(**write_start.input.model_dump(), run_ids=["wf1.write"])
    # every step begins where a cancel that arrived meanwhile is taken
    assert run.requests[0] == TakeCancel() and run.requests.count(TakeCancel()) == 5


def test_a_failed_step_ends_the_workflow_naming_it() -> None:
    run = Drive(_driver(review_pipeline), _results(write={"status": "failed", "error": "model_http_400: bad"}))
    assert run.ran() == ["write"]
    assert run.outcome.model_dump(exclude={"resume"}) == {
        "run_id": "wf1", "status": "failed", "reason": "step 'write' failed: model_http_400: bad", "code": None,
        "failed_step": "write",
    }
    assert run.finish().failed_step == "write" and run.finish().refs == {}  # a failed run resolves no output


def test_a_failed_step_is_where_a_rewind_goes_on_with_a_key_of_its_own() -> None:
    run = Drive(_driver(review_pipeline), _results(write={"status": "failed", "error": "model_http_400: bad"}))
    resume = run.outcome.resume
    assert resume is not None and resume.state.attempts == {"write": 1} and resume.state.generation == 1
    again = Drive(WorkflowDriver(review_pipeline, resume), _results())
    keys = [r.input.key for r in again.requests if isinstance(r, CallActivity) and hasattr(r.input, "key")]
    assert keys[0] == "write.r1" and "write" not in keys  # the failed attempt's child run is never met again
    assert again.outcome.status == "completed"
    assert Drive(_driver(review_pipeline), _results()).outcome.resume is None  # nothing to resume after success


def test_a_stored_cancel_request_ends_the_workflow_cancelled() -> None:
    run = Drive(_driver(review_pipeline), _results(write={"cancel_requested": True}))
    assert run.ran() == ["write"] and run.outcome.status == "cancelled"


# ----------------------------------------------------------------------------------------------------- child runs


def test_a_parallel_step_runs_its_branches_as_child_runs_and_records_them() -> None:
    panel = ParallelStep(id="panel", branches=[AgentStep(id=f"b{i}", agent="writer", prompt="p") for i in (1, 2)])

    def started(request: Request) -> Event | None:
        if isinstance(request, CallActivity) and request.activity is workflow_start_agents:
            return ActivityCompleted(output=StartedRuns(runs=[_child("wf1.panel.b1"), _child("wf1.panel.b2")]))
        return None

    run = Drive(_driver(_flow(panel)), started)
    [children] = [r for r in run.requests if isinstance(r, RunChildRuns)]
    assert [child.run.run_id for child in children.runs] == ["wf1.panel.b1", "wf1.panel.b2"]
    during = run.progress[run.requests.index(children)]
    assert during.child_runs == ["wf1.panel.b1", "wf1.panel.b2"] and during.active_kind == "parallel"
    [record] = run.calls(workflow_record_agents)
    assert record.input.run_ids == ["wf1.panel.b1", "wf1.panel.b2"] and record.input.failure is None
    assert run.outcome.status == "completed"


def test_a_crashed_child_run_is_recorded_as_the_step_failure() -> None:
    def crash(request: Request) -> Event | None:
        return ChildRunsEnded(crash="an internal step failed (correlation id c1)") if isinstance(
            request, RunChildRuns) else None

    run = Drive(_driver(review_pipeline), crash)
    [record, *_] = run.calls(workflow_record_agents)
    assert record.input.failure == "a child run crashed: an internal step failed (correlation id c1)"


def _child_running_until(until: datetime, clock: list[datetime]) -> Answer:
    """Answers looks at the step's children with `running` until `until` (timers move `clock[0]`)."""

    def running(request: Request) -> Event | None:
        if isinstance(request, Sleep):
            clock[0] = request.until or clock[0]
        elif isinstance(request, CallActivity) and request.activity is workflow_record_agents and clock[0] < until:
            looked = StepResult(step_id=request.input.step_id, status="running", journaled=False)
            return ActivityCompleted(output=looked)
        return None

    return running


def test_a_step_looks_at_a_rewound_child_still_running_rarely_once_it_runs_long() -> None:
    """Each look is a timer and an activity in the workflow's history: a child rewound on its own that runs for a day
    (or whose own orchestration crashed) grows it by a few looks an hour, not one every few minutes."""
    clock = [NOW]
    running_for_a_day = _child_running_until(NOW + timedelta(days=1), clock)

    run = Drive(_driver(review_pipeline), running_for_a_day)
    looks = [r for r in run.requests if isinstance(r, Sleep)]
    assert 24 <= len(looks) <= 40, len(looks)
    assert looks[0].until == NOW + timedelta(seconds=1)  # soon at first: a quick repair is seen at once
    assert run.outcome.status == "completed"


def test_a_step_waiting_for_a_rewound_child_continues_as_new_every_few_looks() -> None:
    """Started with `looks_continue`, the step continues as new every `LOOKS_PER_EXECUTION` looks, carrying itself
    (key, journal seq, children, looks): each execution's history stays flat however long the child runs. The next
    execution looks again at once, starts no child, and goes on with the workflow once the child has ended."""
    clock = [NOW]
    running_for_a_day = _child_running_until(NOW + timedelta(days=1), clock)

    ref = WorkflowRef(run_id="wf1", workflow=review_pipeline.name, looks_continue=True)
    workflow_input, executions, looks, first_seq = WorkflowInput(ref=ref), 0, 0, None
    while True:
        run = Drive(WorkflowDriver(review_pipeline, workflow_input), running_for_a_day, now=clock[0])
        executions += 1
        sleeps = [r for r in run.requests if isinstance(r, Sleep)]
        assert len(sleeps) <= LOOKS_PER_EXECUTION
        looks += len(sleeps)
        first_look = run.calls(workflow_record_agents)[0].input
        first_seq = first_seq or first_look.seq
        if executions > 1:
            started = [r.runs[0].run.run_id for r in run.requests if isinstance(r, RunChildRuns)]
            assert "wf1.write" not in started  # `write` runs no new child
            assert run.calls()[0].activity is workflow_record_agents  # it looks again at once
            assert first_look.run_ids == ["wf1.write"] and first_look.seq == first_seq
        if not isinstance(run.end, ContinueAsNew):
            break
        workflow_input = run.end.input
        assert workflow_input.state.awaiting is not None and workflow_input.state.awaiting.step_id == "write"
        within_budget(workflow_input.model_dump(mode="json"), "continue-as-new input")
    assert 24 <= looks <= 40 and executions >= 3, (looks, executions)
    assert run.outcome.status == "completed"
    assert "awaiting" not in WorkflowInput(ref=ref).model_dump(mode="json")["state"]  # inputs as before when unset


def test_a_workflow_cancel_flagged_in_the_store_ends_a_step_waiting_for_a_rewound_child() -> None:
    """After a continue-as-new the cancel's event may be gone: the look's flag ends the step cancelled."""
    def flagged(request: Request) -> Event | None:
        if isinstance(request, CallActivity) and request.activity is workflow_record_agents:
            result = StepResult(step_id="write", status="running", journaled=False, cancel_requested=True)
            return ActivityCompleted(output=result)
        return None

    ref = WorkflowRef(run_id="wf1", workflow=review_pipeline.name, looks_continue=True)
    run = Drive(WorkflowDriver(review_pipeline, WorkflowInput(ref=ref)), flagged)
    assert run.outcome.status == "cancelled"
    assert run.calls(workflow_flag_children_cancelled)[0].input == ChildRunIds(run_ids=["wf1.write"])
    assert not [r for r in run.requests if isinstance(r, Sleep)]


def test_a_step_whose_prompt_cannot_be_rendered_fails_without_child_runs() -> None:
    def broken(request: Request) -> Event | None:
        if isinstance(request, CallActivity) and request.activity is workflow_start_agents:
            return ActivityCompleted(output=StartedRuns(error="prompt of 'write': steps.x is not set"))
        return None

    run = Drive(_driver(review_pipeline), broken)
    assert not [r for r in run.requests if isinstance(r, RunChildRuns)] and not run.calls(workflow_record_agents)
    assert run.outcome.reason == "step 'write' failed: prompt of 'write': steps.x is not set"


def test_cancel_while_child_runs_work_flags_them_then_lets_them_end() -> None:
    run = Drive(_driver(review_pipeline), lambda r: Cancelled() if isinstance(r, RunChildRuns) else None)
    tail = run.requests[run.requests.index(next(r for r in run.requests if isinstance(r, RunChildRuns))) + 1:]
    assert tail == [
        CallActivity(activity=workflow_flag_children_cancelled, input=ChildRunIds(run_ids=["wf1.write"])),
        DrainChildRuns(),
        CallActivity(activity=workflow_finish, input=run.finish()),
    ]
    assert run.progress[-2].status == "cancelling" and run.progress[-2].child_runs == ["wf1.write"]
    assert run.progress[-1].child_runs == []
    assert run.outcome.status == "cancelled" and run.outcome.reason == "cancelled by the client"
    assert run.driver.progress().status == "cancelled"


def _cancel_of_children_fails(times: int, outage: bool = True) -> Answer:
    """The workflow's cancel of its children fails for good (its retries spent) `times` times, then goes through:
    the store down (`outage`), or a bug."""
    failures = iter(range(times))

    def answer(request: Request) -> Event | None:
        if isinstance(request, RunChildRuns):
            return Cancelled()
        cancelling = isinstance(request, CallActivity) and request.activity is workflow_flag_children_cancelled
        if cancelling and next(failures, None) is not None:
            return Failed(code="activity_failed", message="an internal step failed (correlation id c1)", outage=outage)
        return None

    return answer


def _after_the_cancel(run: Drive) -> list[Request]:
    return run.requests[run.requests.index(next(r for r in run.requests if isinstance(r, RunChildRuns))) + 1:]


def test_a_cancel_of_the_children_that_fails_is_tried_again_after_a_wait() -> None:
    run = Drive(_driver(review_pipeline, outlasts_store_outages=True), _cancel_of_children_fails(2))
    cancel = CallActivity(activity=workflow_flag_children_cancelled, input=ChildRunIds(run_ids=["wf1.write"]))
    first, second = OUTAGE_RETRIES[:2]
    assert _after_the_cancel(run) == [
        cancel, Pause(until=NOW + first), cancel, Pause(until=NOW + first + second), cancel, DrainChildRuns(),
        CallActivity(activity=workflow_finish, input=run.finish()),
    ]
    assert {p.status for p in run.progress[-5:-1]} == {"cancelling"}
    assert run.outcome.status == "cancelled" and run.outcome.reason == "cancelled by the client"


def test_a_cancel_of_the_children_that_keeps_failing_is_given_up_and_they_end_on_their_own() -> None:
    """Not a failed step: the workflow waits for its children (a poll of the cancelling workflow cancels them)."""
    run = Drive(_driver(review_pipeline, outlasts_store_outages=True), _cancel_of_children_fails(100))
    tail = _after_the_cancel(run)
    assert len(run.calls(workflow_flag_children_cancelled)) == len(OUTAGE_RETRIES) + 1
    assert [r.until - NOW for r in tail if isinstance(r, Pause)] == list(itertools.accumulate(OUTAGE_RETRIES))
    assert tail[-2:] == [DrainChildRuns(), CallActivity(activity=workflow_finish, input=run.finish())]
    assert run.outcome.status == "cancelled"


def test_a_cancel_of_the_children_that_fails_with_a_bug_is_given_up_at_once() -> None:
    """Not an outage: trying again an hour long would fail the same way. The workflow waits for its children."""
    run = Drive(_driver(review_pipeline, outlasts_store_outages=True), _cancel_of_children_fails(1, outage=False))
    tail = _after_the_cancel(run)
    assert len(run.calls(workflow_flag_children_cancelled)) == 1 and not [r for r in tail if isinstance(r, Pause)]
    assert tail[-2:] == [DrainChildRuns(), CallActivity(activity=workflow_finish, input=run.finish())]
    assert run.outcome.status == "cancelled"


def test_workflows_started_before_the_retries_fail_the_step_when_the_cancel_of_the_children_fails() -> None:
    run = Drive(_driver(review_pipeline), _cancel_of_children_fails(1))
    assert not [r for r in run.requests if isinstance(r, Pause | DrainChildRuns)]
    assert run.outcome.code == "activity_failed" and run.outcome.failed_step == "write"


def test_a_run_already_cancelled_in_the_store_starts_no_child_run() -> None:
    def stored(request: Request) -> Event | None:
        if isinstance(request, CallActivity) and request.activity is workflow_start_agents:
            return ActivityCompleted(output=StartedRuns(cancelled=True))
        return None

    run = Drive(_driver(review_pipeline), stored)
    assert not [r for r in run.requests if isinstance(r, RunChildRuns)] and run.outcome.status == "cancelled"


# ----------------------------------------------------------------------------------------------------- cancel, failures


def test_a_cancel_between_steps_ends_the_workflow_before_the_next_step() -> None:
    takes = iter([Silent(), Cancelled()])
    run = Drive(_driver(review_pipeline), lambda r: next(takes) if isinstance(r, TakeCancel) else None)
    assert run.ran() == ["write"] and run.outcome.status == "cancelled"
    assert run.finish().status == "cancelled" and run.finish().refs == {}


def test_a_failed_request_fails_its_step_with_the_stable_code_and_safe_message() -> None:
    failure = Failed(code="activity_failed", message="an internal step failed (correlation id c2)")
    run = Drive(_driver(review_pipeline), lambda r: failure if isinstance(r, RunChildRuns) else None)
    assert run.outcome.model_dump(exclude={"resume"}) == {
        "run_id": "wf1", "status": "failed", "code": "activity_failed", "failed_step": "write",
        "reason": "step 'write' failed: an internal step failed (correlation id c2)",
    }
    assert run.finish().code == "activity_failed" and run.driver.progress().child_runs == []


def test_a_failed_wait_leaves_no_waiting_status_behind() -> None:
    gate = ApprovalStep(id="gate", message="ok?", timeout_seconds=60)
    failure = Failed(code="payload_too_large", message="its data outgrew the budget (correlation id c3)")
    run = Drive(_driver(_flow(gate)), lambda r: failure if isinstance(r, WaitForDecision) else None)
    assert run.outcome.code == "payload_too_large" and run.outcome.failed_step == "gate"
    progress = run.driver.progress()
    assert progress.status == "failed" and progress.waiting is None


@pytest.mark.parametrize("outlasts_store_outages", [False, True])
def test_a_finish_over_the_budget_is_recorded_as_failed_without_references(outlasts_store_outages: bool) -> None:
    """Not tried again after a wait (the same payload outgrows the budget every time)."""
    too_large = Failed(code="payload_too_large", message="its data outgrew the budget (correlation id c4)")
    answers = iter([too_large, None])
    run = Drive(
        _driver(review_pipeline, outlasts_store_outages=outlasts_store_outages),
        lambda r: next(answers) if isinstance(r, CallActivity) and r.activity is workflow_finish else None,
    )
    assert not [r for r in run.requests if isinstance(r, Pause)]
    first, second = (call.input for call in run.calls(workflow_finish))
    assert first.status == "completed" and first.refs
    assert second.model_dump(include={"status", "code", "reason", "refs"}) == {
        "status": "failed", "code": "payload_too_large", "reason": too_large.message, "refs": {}
    }
    assert run.outcome.status == "failed" and run.outcome.code == "payload_too_large"


def test_a_close_that_fails_for_good_is_tried_again_after_a_wait_and_ends_as_it_would_have() -> None:
    outage = Failed(code="activity_failed", message="an internal step failed (correlation id c5)", outage=True)
    answers = iter([outage, outage, None])
    run = Drive(
        _driver(review_pipeline, outlasts_store_outages=True),
        lambda r: next(answers) if isinstance(r, CallActivity) and r.activity is workflow_finish else None,
    )
    finishes = run.calls(workflow_finish)
    assert len(finishes) == 3 and {call.input.status for call in finishes} == {"completed"}
    assert [r.until - NOW for r in run.requests if isinstance(r, Pause)] == list(
        itertools.accumulate(OUTAGE_RETRIES[:2])
    )
    assert run.outcome.status == "completed"


def _start_of_agents_fails(times: int, outage: bool = True) -> Answer:
    """The step's start of its agent runs fails for good `times` times, then goes through: the store down
    (`outage`), or a bug."""
    failures = iter(range(times))

    def answer(request: Request) -> Event | None:
        starting = isinstance(request, CallActivity) and request.activity is workflow_start_agents
        if starting and next(failures, None) is not None:
            return Failed(code="activity_failed", message="an internal step failed (correlation id c8)", outage=outage)
        return None

    return answer


def test_a_step_whose_activity_fails_in_an_outage_is_tried_again_after_a_wait_and_goes_on() -> None:
    run = Drive(_driver(review_pipeline, steps_outlast_store_outages=True), _start_of_agents_fails(2))
    starts = run.calls(workflow_start_agents)
    assert [call.input for call in starts[:3]] == [starts[0].input] * 3  # the same step, the same attempt
    first, second = OUTAGE_RETRIES[:2]
    assert [r.until - NOW for r in run.requests if isinstance(r, Pause)] == [first, first + second]
    assert run.ran() == Drive(_driver(review_pipeline)).ran() and run.outcome.status == "completed"  # as without


def test_a_step_whose_store_stays_down_fails_after_about_an_hour() -> None:
    run = Drive(_driver(review_pipeline, steps_outlast_store_outages=True), _start_of_agents_fails(100))
    assert len(run.calls(workflow_start_agents)) == len(OUTAGE_RETRIES) + 1
    assert (run.outcome.status, run.outcome.code, run.outcome.failed_step) == ("failed", "activity_failed", "write")


@pytest.mark.parametrize("flags", [{"steps_outlast_store_outages": True}, {"outlasts_store_outages": True}])
def test_a_step_is_not_tried_again_for_a_bug_nor_in_workflows_started_before(flags: dict[str, bool]) -> None:
    """A bug fails alike every time; a workflow started before steps outlasted outages replays as it ran (only its
    close and its cancel of children were tried again)."""
    outage = "outlasts_store_outages" in flags
    run = Drive(_driver(review_pipeline, **flags), _start_of_agents_fails(1, outage=outage))
    assert len(run.calls(workflow_start_agents)) == 1 and not [r for r in run.requests if isinstance(r, Pause)]
    assert (run.outcome.status, run.outcome.failed_step) == ("failed", "write")


def test_a_close_that_fails_with_a_bug_is_not_tried_again() -> None:
    """The store is up; the close fails alike every time: recorded failed at once (then the orchestration ends)."""
    bug = Failed(code="activity_failed", message="an internal step failed (correlation id c7)")
    answers = iter([bug, None])
    run = Drive(
        _driver(review_pipeline, outlasts_store_outages=True),
        lambda r: next(answers) if isinstance(r, CallActivity) and r.activity is workflow_finish else None,
    )
    assert [call.input.status for call in run.calls(workflow_finish)] == ["completed", "failed"]
    assert not [r for r in run.requests if isinstance(r, Pause)]
    assert run.outcome.status == "failed" and run.outcome.code == "activity_failed"


def _finish_answers(closed: WorkflowClosed) -> Answer:
    return lambda r: (
        ActivityCompleted(output=closed) if isinstance(r, CallActivity) and r.activity is workflow_finish else None
    )


def test_a_workflow_the_store_closed_cancelled_reports_that_end() -> None:
    """A cancel flagged after the last step read the flag: `workflow_finish` was asked `completed`, the store closed
    it `cancelled` (`rules.finish`). The orchestration's outcome and progress say what the record says."""
    flagged = FinishResult(status="cancelled", reason="cancelled by the client")
    run = Drive(_driver(review_pipeline), _finish_answers(WorkflowClosed(ended=flagged)))
    [finish] = (call.input for call in run.calls(workflow_finish))
    assert finish.status == "completed"
    assert run.outcome.model_dump(include={"status", "reason", "code", "failed_step"}) == {
        "status": "cancelled", "reason": "cancelled by the client", "code": "cancelled", "failed_step": None
    }
    assert run.outcome.resume is None
    assert run.driver.progress().status == "cancelled"


def test_a_failed_step_the_store_closed_cancelled_leaves_nothing_to_resume() -> None:
    """A step failed after the cancel was flagged: the workflow ended cancelled, so a rewind has no step to go on
    from (`resume` is for a failed workflow only)."""
    failing = _flow(FunctionStep(id="f", function=dict))
    flagged = FinishResult(status="cancelled", reason="cancelled by the client")

    def answer(request: Request) -> Event | None:
        if isinstance(request, CallActivity) and request.activity is workflow_finish:
            return ActivityCompleted(output=WorkflowClosed(ended=flagged))
        if isinstance(request, CallActivity) and request.input.step_id == "f":
            return ActivityCompleted(output=StepResult(step_id="f", status="failed", error="boom"))
        return None

    run = Drive(_driver(failing), answer)
    [finish] = (call.input for call in run.calls(workflow_finish))
    assert (finish.status, finish.failed_step) == ("failed", "f")
    assert (run.outcome.status, run.outcome.failed_step, run.outcome.resume) == ("cancelled", None, None)


def test_a_finish_recorded_before_the_change_answered_nothing_and_ends_as_asked() -> None:
    """Histories from before hold `{}` for `workflow_finish` (it returned nothing): it parses as closed as asked."""
    assert workflow_finish.parse({}) == WorkflowClosed()
    assert WorkflowClosed().model_dump(mode="json") == {}  # and a close as asked still records `{}`
    run = Drive(_driver(review_pipeline), _finish_answers(workflow_finish.parse({})))
    assert (run.outcome.status, run.outcome.code) == ("completed", None)


def test_a_workflow_that_cannot_be_closed_ends_the_orchestration() -> None:
    driver = _driver(_flow(FunctionStep(id="f", function=dict)))
    request = driver.start(NOW)
    while not (isinstance(request, CallActivity) and request.activity is workflow_finish):
        request = driver.send(_default(request), NOW)
    failure = Failed(code="activity_failed", message="an internal step failed (correlation id c5)")
    again = driver.send(failure, NOW)
    assert isinstance(again, CallActivity) and again.activity is workflow_finish and again.input.status == "failed"
    with pytest.raises(WorkflowDriverError, match="could not be closed"):
        driver.send(failure, NOW)


def test_events_out_of_turn_are_refused() -> None:
    driver = _driver(review_pipeline)
    with pytest.raises(WorkflowDriverError):
        driver.send(Silent(), NOW)  # not started
    assert driver.start(NOW) == TakeCancel()
    assert isinstance(driver.send(Silent(), NOW), CallActivity)
    with pytest.raises(WorkflowDriverError, match="expected ActivityCompleted, got Rang"):
        driver.send(Rang(), NOW)
    run = Drive(_driver(_flow(FunctionStep(id="f", function=dict))))
    with pytest.raises(WorkflowDriverError, match="finished"):
        run.driver.send(Silent(), NOW)


# ----------------------------------------------------------------------------------------------------- gates


def test_an_approved_gate_waits_for_its_decision_then_records_it() -> None:
    gate = ApprovalStep(id="gate", message="ok?", timeout_seconds=60)
    run = Drive(_driver(_flow(gate)))
    [open_gate] = run.calls(workflow_open_gate)
    request = open_gate.input
    assert request == GateRequest(**request.model_dump(include=set(StepRequest.model_fields)), level=0,
                                  expires_at=NOW + timedelta(seconds=60))
    wait = run.requests[run.requests.index(open_gate) + 1]
    assert wait == WaitForDecision(event="approval:wf1.gate.approval", until=NOW + timedelta(seconds=60))
    waiting = run.progress[run.requests.index(wait)]
    assert waiting.status == "requires_action" and waiting.waiting.approval_id == "wf1.gate.approval"
    [record] = run.calls(workflow_record_gate)
    assert record.input.model_dump(include={"approval_id", "level", "timed_out"}) == {
        "approval_id": "wf1.gate.approval", "level": 0, "timed_out": False
    }
    assert run.progress[run.requests.index(record)].status == "in_progress"
    assert not run.calls(workflow_expire_gate) and run.outcome.status == "completed"


@pytest.mark.parametrize(("on_reject", "status"), [("fail", "failed"), ("continue", "completed")])
def test_a_rejection_fails_only_when_the_gate_says_so(on_reject: str, status: str) -> None:
    gate = ApprovalStep(id="gate", message="ok?", timeout_seconds=60, on_reject=on_reject)
    run = Drive(_driver(_flow(gate, FunctionStep(id="after", function=dict))), _results(gate={"approved": False}))
    assert run.outcome.status == status
    if status == "failed":
        assert run.outcome.reason == "step 'gate' was rejected" and run.ran() == ["gate"]
    else:
        assert run.ran() == ["gate", "after"]


def test_an_expired_gate_escalates_once_then_expires_for_good() -> None:
    gate = ApprovalStep(id="gate", message="ok?", timeout_seconds=60,
                        on_timeout=Escalate(to="chief", timeout_seconds=600, then="reject"))
    run = Drive(_driver(_flow(gate)), lambda r: TimerFired() if isinstance(r, WaitForDecision) else None)
    kinds = [type(r).__name__ if not isinstance(r, CallActivity) else r.activity.name for r in run.requests]
    assert kinds == [
        "TakeCancel", "workflow_open_gate", "WaitForDecision", "workflow_expire_gate",
        "workflow_open_gate", "WaitForDecision", "workflow_expire_gate", "workflow_record_gate", "workflow_finish",
    ]
    first, second = (call.input for call in run.calls(workflow_open_gate))
    assert (first.level, first.expires_at) == (0, NOW + timedelta(seconds=60))
    assert (second.level, second.expires_at) == (1, NOW + timedelta(seconds=660))  # from the first deadline
    expiries = [call.input for call in run.calls(workflow_expire_gate)]
    assert [(e.approval_id, e.level, e.at) for e in expiries] == [
        ("wf1.gate.approval", 0, NOW + timedelta(seconds=60)),
        ("wf1.gate.escalation", 1, NOW + timedelta(seconds=660)),
    ]
    [record] = run.calls(workflow_record_gate)
    assert record.input == GateRecord(**record.input.model_dump(include=set(StepRequest.model_fields)),
                                      approval_id="wf1.gate.escalation", level=1, timed_out=True)


def test_a_decision_that_won_the_race_with_the_deadline_stands() -> None:
    gate = ApprovalStep(id="gate", message="ok?", timeout_seconds=60,
                        on_timeout=Escalate(to="chief", timeout_seconds=600, then="reject"))

    def late(request: Request) -> Event | None:
        if isinstance(request, WaitForDecision):
            return TimerFired()
        if isinstance(request, CallActivity) and request.activity is workflow_expire_gate:
            return ActivityCompleted(output=GateExpiry(status="approved"))
        return None

    run = Drive(_driver(_flow(gate)), late)
    assert len(run.calls(workflow_open_gate)) == 1  # not escalated
    [record] = run.calls(workflow_record_gate)
    assert (record.input.level, record.input.timed_out) == (0, False)


def test_cancel_while_a_gate_waits_ends_the_workflow() -> None:
    gate = ApprovalStep(id="gate", message="ok?", timeout_seconds=60)
    run = Drive(_driver(_flow(gate)), lambda r: Cancelled() if isinstance(r, WaitForDecision) else None)
    assert not run.calls(workflow_record_gate) and run.outcome.status == "cancelled"
    assert run.driver.progress().waiting is None


# ----------------------------------------------------------------------------------------------------- signals, delays


def test_a_signal_that_already_rang_is_recorded_without_waiting() -> None:
    step = SignalStep(id="go", name="go")
    run = Drive(_driver(_flow(step), {"signals": {"go": 3}}), lambda r: Rang() if isinstance(r, CheckSignal) else None)
    assert run.requests[1] == CheckSignal(events=["signal:go:3", "signal:go:4"])
    assert not run.calls(workflow_find_signal)
    [record] = run.calls(workflow_record_signal)
    assert (record.input.name, record.input.index) == ("go", 3)
    assert run.driver.state.signals == {"go": 4}  # consumed exactly once


def test_a_signal_found_in_the_store_is_recorded_without_waiting() -> None:
    def stored(request: Request) -> Event | None:
        if isinstance(request, CallActivity) and request.activity is workflow_find_signal:
            return ActivityCompleted(output=SignalFound(found=True))
        return None

    run = Drive(_driver(_flow(SignalStep(id="go", name="go"))), stored)
    [probe] = run.calls(workflow_find_signal)
    assert probe.input == SignalProbe(ref=run.driver.ref, name="go", index=1)
    assert not [r for r in run.requests if isinstance(r, WaitForSignal)]
    assert run.calls(workflow_record_signal)[0].input.index == 1


def test_a_signal_waits_with_its_timeout_and_records_a_timeout() -> None:
    step = SignalStep(id="go", name="go", timeout_seconds=30, on_timeout="continue")
    run = Drive(_driver(_flow(step)), lambda r: TimerFired() if isinstance(r, WaitForSignal) else None)
    [wait] = [r for r in run.requests if isinstance(r, WaitForSignal)]
    assert wait == WaitForSignal(events=["signal:go:1", "signal:go:2"], until=NOW + timedelta(seconds=30))
    waiting = run.progress[run.requests.index(wait)]
    assert waiting.status == "waiting" and (waiting.waiting.signal, waiting.waiting.signal_index) == ("go", 1)
    [record] = run.calls(workflow_record_signal)
    assert record.input == SignalRecord(**record.input.model_dump(include=set(StepRequest.model_fields)),
                                        name="go", index=None)
    assert record.input.at == NOW + timedelta(seconds=30)
    assert run.driver.state.signals == {}  # nothing consumed: the next wait is for the same signal


def test_signals_of_one_name_are_consumed_in_order() -> None:
    run = Drive(_driver(_flow(SignalStep(id="a", name="go"), SignalStep(id="b", name="go"))))
    waits = [r for r in run.requests if isinstance(r, WaitForSignal)]
    assert [w.events for w in waits] == [["signal:go:1", "signal:go:2"], ["signal:go:2", "signal:go:3"]]
    assert [c.input.index for c in run.calls(workflow_record_signal)] == [1, 2] and waits[0].until is None


def test_cancel_while_a_signal_is_awaited_ends_the_workflow() -> None:
    run = Drive(_driver(_flow(SignalStep(id="go", name="go"))),
                lambda r: Cancelled() if isinstance(r, WaitForSignal) else None)
    assert not run.calls(workflow_record_signal) and run.outcome.status == "cancelled"


def test_a_delay_sleeps_for_its_seconds_or_until_its_resolved_time() -> None:
    run = Drive(_driver(_flow(DelayStep(id="pause", seconds=90))))
    [sleep] = [r for r in run.requests if isinstance(r, Sleep)]
    assert sleep == Sleep(until=NOW + timedelta(seconds=90))
    assert run.progress[run.requests.index(sleep)].waiting.until == sleep.until
    [record] = run.calls(workflow_record_delay)
    assert record.input == DelayRecord(**record.input.model_dump(include=set(StepRequest.model_fields)),
                                       until=NOW + timedelta(seconds=90))

    until = Drive(_driver(WorkflowDefinition(name="d", input_model=Stamp, steps=[DelayStep(id="d", until="input.at")])))
    assert [type(r).__name__ for r in until.requests[1:4]] == ["CallActivity", "Sleep", "CallActivity"]
    assert until.calls()[0].activity is workflow_resolve_time
    assert [r for r in until.requests if isinstance(r, Sleep)] == [Sleep(until=NOW + timedelta(days=3))]


def test_cancel_during_a_delay_ends_the_workflow() -> None:
    delay = _flow(DelayStep(id="pause", seconds=90))
    run = Drive(_driver(delay), lambda r: Cancelled() if isinstance(r, Sleep) else None)
    assert not run.calls(workflow_record_delay) and run.outcome.status == "cancelled"


# ----------------------------------------------------------------------------------------------------- monitors


def _monitor(deadline: float | None, on_deadline: str = "fail") -> WorkflowDefinition:
    check = MonitorStep(
        id="watch", function=lambda data: {}, every_seconds=3600, until=Condition(ref="steps.watch.done"),
        deadline_seconds=deadline, on_deadline=on_deadline,
    )
    return _flow(check, FunctionStep(id="after", function=dict))


def _unmet(request: Request) -> Event | None:
    """The monitor's condition does not hold."""
    checks = isinstance(request, CallActivity) and request.activity is workflow_call_function
    unmet = ActivityCompleted(output=_ok("watch", condition=False))
    return unmet if checks and request.input.step_id == "watch" else None


def test_a_monitor_sleeps_between_checks_and_fails_at_its_deadline() -> None:
    run = Drive(_driver(_monitor(deadline=3 * 3600 + 60)), _unmet)
    sleeps = [r.until - NOW for r in run.requests if isinstance(r, Sleep)]
    assert sleeps == [*(timedelta(hours=n) for n in (1, 2, 3)), timedelta(hours=3, minutes=1)]  # capped at the deadline
    checks = [c.input for c in run.calls(workflow_call_function)]
    assert [c.key for c in checks] == [f"watch.{n}" for n in range(5)]
    assert len({c.seq for c in checks}) == 5  # every check its own journal entry
    assert run.outcome.failed_step == "watch" and "deadline" in run.outcome.reason
    asleep = run.progress[run.requests.index(next(r for r in run.requests if isinstance(r, Sleep)))]
    assert (asleep.status, asleep.active_step, asleep.iteration) == ("waiting", "watch", 1)


def test_a_monitor_whose_deadline_may_pass_goes_on_and_one_whose_condition_holds_stops() -> None:
    lenient = Drive(_driver(_monitor(deadline=3600, on_deadline="continue")), _unmet)
    assert lenient.ran()[-1] == "after" and lenient.outcome.status == "completed"

    met = Drive(_driver(_monitor(deadline=None)), _results(watch={"condition": True}))
    assert met.ran() == ["watch", "after"] and not [r for r in met.requests if isinstance(r, Sleep)]


def test_an_eternal_monitor_continues_as_new_and_resumes_where_it_was() -> None:
    definition = _monitor(deadline=None)
    run = Drive(_driver(definition), _unmet)
    assert isinstance(run.end, ContinueAsNew)
    carried = run.end.input
    within_budget(carried.model_dump(mode="json"), "continue-as-new input")
    assert carried.state.generation == 1 and carried.state.steps_done == STEPS_PER_EXECUTION  # checks and sleeps
    assert run.requests[-1] == TakeCancel()  # a cancel that arrived meanwhile is taken first
    resumed = Drive(WorkflowDriver(definition, carried), _results(watch={"condition": True}), now=run.now)
    [first_check, after] = [c.input for c in resumed.calls(workflow_call_function)]
    assert first_check.key == f"watch.{STEPS_PER_EXECUTION // 2}" and after.step_id == "after"
    last_seq = max(c.input.seq for c in run.calls(workflow_call_function))
    assert first_check.seq > last_seq  # journal seqs keep increasing across executions


def test_a_continue_as_new_input_over_the_budget_fails_the_workflow() -> None:
    definition = _monitor(deadline=None)
    driver = _driver(definition)
    run = Drive(driver, _unmet)
    assert isinstance(run.end, ContinueAsNew)
    request = driver.send(Failed(code="payload_too_large", message="its data outgrew (correlation id c6)"), run.now)
    assert isinstance(request, CallActivity) and request.activity is workflow_finish
    assert request.input.model_dump(include={"status", "code", "failed_step"}) == {
        "status": "failed", "code": "payload_too_large", "failed_step": None
    }


def _given_up(closed: FinishResult | None) -> Answer:
    """`workflow_closed_before` reads the workflow's record: closed (`closed`) or open (None)."""
    return lambda request: (
        ActivityCompleted(output=closed)
        if isinstance(request, CallActivity) and request.activity is workflow_closed_before
        else None
    )


def _reading_record(definition: WorkflowDefinition, generation: int = 0) -> WorkflowDriver:
    ref = WorkflowRef(run_id="wf1", workflow=definition.name, reads_record_first=True)
    return WorkflowDriver(definition, WorkflowInput(ref=ref, state=WorkflowState(generation=generation)))


def test_a_workflow_given_up_before_its_first_step_ends_as_its_record_says_running_nothing() -> None:
    given_up = FinishResult(status="failed", reason="start_failed: could not start")
    drive = Drive(_reading_record(review_pipeline), _given_up(given_up))
    assert [type(r).__name__ for r in drive.requests] == ["CallActivity"]
    assert drive.calls()[0].activity is workflow_closed_before
    assert isinstance(drive.end, Finished) and drive.end.closed_before
    assert (drive.outcome.status, drive.outcome.code, drive.outcome.reason) == (
        "failed", "start_failed", "start_failed: could not start"
    )
    assert drive.driver.progress().status == "failed"


def test_an_open_record_runs_the_workflow_and_only_its_first_execution_reads_it() -> None:
    drive = Drive(_reading_record(review_pipeline), _given_up(None))
    assert drive.calls()[0].activity is workflow_closed_before and len(drive.calls(workflow_closed_before)) == 1
    assert drive.ran()[0] == "write" and drive.outcome.status == "completed" and not drive.end.closed_before
    later = Drive(_reading_record(review_pipeline, generation=1))  # continued as new, or a rewind's execution
    assert later.calls(workflow_closed_before) == []


def test_workflows_started_before_the_check_do_not_read_their_record() -> None:
    """Their histories hold no such activity: replayed as they ran (the flag is absent from their input)."""
    assert Drive(_driver(review_pipeline)).calls(workflow_closed_before) == []
    assert "reads_record_first" not in WorkflowRef(run_id="wf1", workflow="flow").model_dump(mode="json")


def test_a_record_that_cannot_be_read_fails_the_workflow_where_a_rewind_runs_its_first_step() -> None:
    """A store failing for longer than the read's retries fails the workflow before its first step (nothing ran): as
    a first step failing so would, a rewind starts it again - from its first step, without reading again (the
    rewind reopened the record). Before, it failed with no resume point: a rewind was refused (`run_not_rewindable`)
    where the same outage one activity later could be repaired."""
    failure = Failed(code="activity_failed", message="an internal step failed (correlation id c6)")
    reads = lambda r: failure if isinstance(r, CallActivity) and r.activity is workflow_closed_before else None  # noqa: E731
    run = Drive(_reading_record(review_pipeline), reads)
    assert run.ran() == [] and (run.outcome.status, run.outcome.code) == ("failed", "activity_failed")
    resume = run.outcome.resume
    assert resume is not None and (resume.state.pc, resume.state.generation, resume.state.attempts) == (0, 1, {})
    again = Drive(WorkflowDriver(review_pipeline, resume), _results())
    assert again.calls(workflow_closed_before) == [] and again.ran()[0] == "write"
    assert again.outcome.status == "completed"


GIVEN_UP = FinishResult(status="failed", reason="start_failed: could not start")
ACTING = {  # the steps that act (a child run, a person asked, user code), their activity and its answer then
    "agent": (AgentStep(id="s", agent="writer", prompt="p"), workflow_start_agents, StartedRuns(ended=GIVEN_UP)),
    "gate": (ApprovalStep(id="s", message="ok?", timeout_seconds=60), workflow_open_gate,
             GateOpened(approval_id="wf1.s.approval", expires_at=NOW, ended=GIVEN_UP)),
    "function": (FunctionStep(id="s", function=dict), workflow_call_function,
                 StepResult(step_id="s", status="ok", journaled=False, ended=GIVEN_UP)),
}


@pytest.mark.parametrize("kind", list(ACTING))
def test_a_step_that_finds_its_workflow_given_up_meanwhile_acts_not_and_ends_it_as_its_record_says(kind: str) -> None:
    """The record read open before the first step (`workflow_closed_before`), then closed by the start giving the
    workflow up: the step's activity reads it again before acting (the read it makes anyway) and says so (`ended`).
    The workflow ends as the record says: no child run, no wait for a decision, no later step, no finish."""
    step, activity, answer = ACTING[kind]
    def reads(request: Request) -> Event | None:
        acts = isinstance(request, CallActivity) and request.activity is activity
        return ActivityCompleted(output=answer) if acts else None

    drive = Drive(_driver(_flow(step, FunctionStep(id="later", function=dict))), reads)
    assert [call.activity for call in drive.calls()] == [activity]
    assert not [r for r in drive.requests if isinstance(r, RunChildRuns | WaitForDecision)]
    assert isinstance(drive.end, Finished) and drive.end.closed_before
    assert (drive.outcome.status, drive.outcome.code) == ("failed", "start_failed")
    progress = drive.driver.progress()
    assert (progress.status, progress.active_step, progress.child_runs) == ("failed", None, [])


def test_a_step_answer_without_ended_leaves_the_wire_as_it_was() -> None:
    """`ended` is absent from every answer but that one: histories and payloads stay as before."""
    assert "ended" not in StartedRuns().model_dump(mode="json")
    assert "ended" not in _ok("s").model_dump(mode="json")
    assert "ended" not in GateOpened(approval_id="a", expires_at=NOW).model_dump(mode="json")
