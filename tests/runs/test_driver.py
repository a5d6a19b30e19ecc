"""RunDriver: the pure bookkeeping of a durable run (positions, visibility, approvals, continue-as-new)."""

from datetime import UTC, datetime, timedelta, timezone

from agent_runs.budget import PAYLOAD_BUDGET_BYTES, payload_size
from agent_runs.contracts import (
    DecisionsResult,
    FinishResult,
    MiddlewareBeforeResult,
    RunInput,
    RunRef,
    StepFailure,
)
from agent_runs.driver import MIDDLEWARE_SLOTS, MODEL_CALLS_PER_EXECUTION, RunDriver
from agent_runs.sequence import SLOTS_PER_MODEL_CALL, seq_for
from agent_runtime.conversation import approval_id
from agent_runtime.escalation import Escalate
from agent_runtime.loop_types import (
    ApprovalDecision,
    AwaitApproval,
    CallModel,
    Finish,
    LoopConfig,
    ModelTurn,
    RequestApproval,
    RunTools,
    ToolCallRef,
    ToolOutcome,
)
from agent_runtime.messages import Usage

NOW = datetime(2030, 1, 1, tzinfo=UTC)
RUN = RunRef(run_id="r1", session_id="s1", agent="assistant", ordinal=3)


def driver(**overrides: object) -> RunDriver:
    fields = {"run": RUN, "loop_config": LoopConfig(), "next_position": 2, "approval_timeout_seconds": 60.0}
    return RunDriver(RunInput(**{**fields, **overrides}))


def turn(*calls: tuple[str, bool]) -> ModelTurn:
    return ModelTurn(tool_calls=[ToolCallRef(call_id=c, name="t", needs_approval=a) for c, a in calls], has_text=True)


def test_positions_are_reserved_in_order_and_seq_is_per_run() -> None:
    d = driver()
    model = d.model_call(d.first_command())
    assert model.first_seq == seq_for(3, 2)
    command = d.on_model_result(turn(("a", False), ("b", False)))
    assert isinstance(command, RunTools)
    calls = d.tool_calls(command)
    assert [c.seq for c in calls] == [seq_for(3, 2 + SLOTS_PER_MODEL_CALL), seq_for(3, 3 + SLOTS_PER_MODEL_CALL)]
    assert [c.invocation.call_id for c in calls] == ["a", "b"]


def test_visible_seq_covers_only_completed_steps() -> None:
    d = driver()
    assert d.progress().visible_seq == seq_for(3, 2) - 1  # the input only
    model = d.model_call(d.first_command())
    assert d.progress().visible_seq == seq_for(3, 2) - 1  # the model call is in flight: its slots stay hidden
    d.on_model_result(turn(("a", False)))
    assert d.progress().visible_seq == model.first_seq + SLOTS_PER_MODEL_CALL - 1


def test_an_answer_asking_for_approvals_shows_with_its_requests_not_before() -> None:
    """While the requests are being recorded, a poller must not see the answer's calls without them: they would look
    under way (the Responses stream announced them as running `mcp_call` items, then replaced them)."""
    d = driver()
    before = d.progress().visible_seq
    model = d.model_call(d.first_command())
    command = d.on_model_result(turn(("a", True), ("c", False)))
    assert isinstance(command, RequestApproval)
    requests = d.approval_requests(command, NOW)
    assert d.progress().visible_seq == before  # recording the requests: the answer is not shown yet...
    assert d.progress().model_call_seq == model.first_seq  # ...its text stays the draft pollers read
    d.on_approvals_recorded()
    assert d.progress().visible_seq == requests.first_seq + len(requests.calls) - 1  # the answer and its requests
    assert d.progress().model_call_seq is None
    assert model.first_seq + SLOTS_PER_MODEL_CALL - 1 < d.progress().visible_seq


def test_approvals_pending_then_partially_decided_then_tools_run() -> None:
    d = driver()
    d.model_call(d.first_command())
    command = d.on_model_result(turn(("a", True), ("b", True), ("c", False)))
    assert isinstance(command, RequestApproval)
    requests = d.approval_requests(command, NOW)
    assert requests.expires_at == NOW + timedelta(seconds=60)
    assert d.pending_approvals == [approval_id("r1", "a"), approval_id("r1", "b")]
    # Pollers see "requires_action" once the requests are stored (they list them from the store), not before.
    assert d.progress().status == "in_progress"
    d.on_approvals_recorded()
    assert d.progress().status == "requires_action"
    assert d.on_decision(ApprovalDecision(call_id="unknown", approved=True)) is None  # not pending here: ignored

    decisions = d.decisions_input(rung=[approval_id("r1", "a")])
    assert decisions.approval_ids == [approval_id("r1", "a"), approval_id("r1", "b")]  # a slot for every pending one
    command = d.on_decisions(DecisionsResult(decided=[ApprovalDecision(call_id="a", approved=True)]))
    assert isinstance(command, AwaitApproval)
    assert d.pending_approvals == [approval_id("r1", "b")]
    assert d.progress().status == "requires_action"
    # The same decision delivered again (a duplicate event, a retried activity) is applied once.
    assert d.on_decisions(DecisionsResult(decided=[ApprovalDecision(call_id="a", approved=True)])) is None

    assert d.decisions_input(rung=[]).first_seq == decisions.first_seq + 2  # fresh slots for every application
    command = d.on_decisions(DecisionsResult(decided=[ApprovalDecision(call_id="b", approved=False, reason="no")]))
    assert isinstance(command, RunTools)
    assert {c.call_id: c.action for c in command.calls} == {"a": "invoke", "b": "deny", "c": "invoke"}
    assert d.progress().status == "in_progress"
    assert d.progress().pending_approvals == []


def test_a_batch_of_decisions_is_applied_in_one_step() -> None:
    d = driver()
    d.model_call(d.first_command())
    d.approval_requests(d.on_model_result(turn(("a", True), ("b", True), ("c", True))), NOW)
    d.decisions_input(rung=[approval_id("r1", "b")])
    command = d.on_decisions(
        DecisionsResult(decided=[ApprovalDecision(call_id=c, approved=c != "b") for c in ("a", "b", "c")])
    )
    assert isinstance(command, RunTools)
    assert {c.call_id: c.action for c in command.calls} == {"a": "invoke", "b": "deny", "c": "invoke"}


def test_timeout_applies_race_winners_first_then_times_out_the_rest() -> None:
    d = driver()
    d.model_call(d.first_command())
    d.approval_requests(d.on_model_result(turn(("a", True), ("b", True))), NOW)
    expiry = d.expire_input()
    assert expiry.approval_ids == [approval_id("r1", "a"), approval_id("r1", "b")]
    d.on_deadline_step(handed_on=[approval_id("r1", "b")])  # expired
    assert d.decided_during_deadline == [approval_id("r1", "a")]  # decided in the store: applied, not expired
    d.decisions_input(rung=d.decided_during_deadline)
    applied = d.on_decisions(DecisionsResult(decided=[ApprovalDecision(call_id="a", approved=True)]))
    assert isinstance(applied, AwaitApproval)
    assert d.decided_during_deadline == []
    command = d.on_timeout()
    assert isinstance(command, RunTools)
    actions = {c.call_id: c.action for c in command.calls}
    assert actions == {"a": "invoke", "b": "deny"}


def test_an_escalation_hands_the_batch_on_once_with_a_new_deadline() -> None:
    d = driver(escalation=Escalate(to="role:Supervisors", timeout_seconds=600, then="fail"))
    d.model_call(d.first_command())
    d.approval_requests(d.on_model_result(turn(("a", True), ("b", True))), NOW)
    later = NOW + timedelta(seconds=60)
    escalation = d.escalation_input(later)
    assert escalation is not None
    assert (escalation.to, escalation.expires_at) == ("role:Supervisors", later + timedelta(seconds=600))
    assert escalation.approval_ids == [approval_id("r1", "a"), approval_id("r1", "b")]
    # Not stored yet: the progress keeps the first deadline, so that the one announcing the new deadline comes after
    # the escalation is in the store (a stream that read the approvals in between reads them again then).
    assert d.progress().approvals_expire_at == NOW + timedelta(seconds=60)  # approval_timeout_seconds
    d.on_deadline_step(handed_on=[approval_id("r1", "b")])  # "a" was decided in the store meanwhile
    assert d.approvals_expire_at == escalation.expires_at
    assert d.progress().approvals_expire_at == escalation.expires_at  # pollers see the new deadline
    assert d.decided_during_deadline == [approval_id("r1", "a")]
    assert d.escalation_input(later) is None  # once per batch: the next deadline is the last


def test_timeout_in_fail_mode_finishes_the_run_failed() -> None:
    d = driver(loop_config=LoopConfig(on_approval_timeout="fail"))
    d.model_call(d.first_command())
    d.approval_requests(d.on_model_result(turn(("a", True))), NOW)
    d.on_deadline_step(handed_on=[approval_id("r1", "a")])
    command = d.on_timeout()
    assert isinstance(command, Finish)
    assert command.status == "failed"


def test_step_failure_and_cancel_finish_the_run() -> None:
    d = driver()
    d.model_call(d.first_command())
    failed = d.on_model_result(StepFailure(code="model_http_400", message="bad request"))
    assert isinstance(failed, Finish)
    assert failed.status == "failed"
    assert "model_http_400" in failed.reason

    d = driver()
    d.model_call(d.first_command())
    cancelled = d.on_cancel("stop")
    assert isinstance(cancelled, Finish)
    assert cancelled.status == "cancelled"
    outcome = d.on_finished(cancelled)
    assert outcome.status == "cancelled"
    assert d.progress().status == "cancelled"


def test_continue_as_new_resumes_the_same_loop_at_the_same_position() -> None:
    d = driver()
    command = d.first_command()
    while not d.should_continue_as_new(command):
        d.model_call(command)
        command = d.on_model_result(turn(("x", False)))
        calls = d.tool_calls(command)
        command = d.on_tool_results([ToolOutcome(call_id=c.invocation.call_id) for c in calls])
    assert isinstance(command, CallModel)
    assert command.iteration == MODEL_CALLS_PER_EXECUTION + 1
    carried = d.continue_as_new_input(command)
    assert payload_size(carried) < PAYLOAD_BUDGET_BYTES
    # The payload survives JSON (Durable stores it) and the next execution continues where this one stopped.
    resumed = RunDriver(RunInput.model_validate_json(carried.model_dump_json()))
    assert resumed.first_command() == command
    assert resumed.model_call(command).first_seq == seq_for(3, carried.next_position)
    assert carried.generation == 1
    assert not resumed.should_continue_as_new(command)


def test_the_model_call_in_flight_is_published_for_its_streamed_draft() -> None:
    d = driver()
    assert d.progress().model_call_seq is None
    model = d.model_call(d.first_command())
    assert d.progress().model_call_seq == model.first_seq  # pollers read the draft there
    d.on_model_result(turn(("a", False)))
    assert d.progress().model_call_seq is None  # the answer is complete: an ordinary update now


# ----------------------------------------------------------------------------------------------- run middleware


def test_run_middleware_pre_processing_runs_first_and_post_processing_is_asked_at_the_finish() -> None:
    d = driver(run_middleware=True)
    assert d.needs_middleware_before()
    before = d.middleware_before_input()
    assert before.first_seq == seq_for(3, 2) and before.slots == MIDDLEWARE_SLOTS
    command = d.on_middleware_before(MiddlewareBeforeResult(proceed=True))
    assert isinstance(command, CallModel)
    model = d.model_call(command)
    assert model.first_seq == seq_for(3, 2 + MIDDLEWARE_SLOTS)  # after what the middleware may have written
    finish = d.on_model_result(turn())
    assert isinstance(finish, Finish)
    assert d.finish_input(finish).run_middleware == "after"


def test_run_middleware_that_ends_the_run_skips_the_loop_and_the_post_processing() -> None:
    d = driver(run_middleware=True)
    d.middleware_before_input()
    command = d.on_middleware_before(MiddlewareBeforeResult(proceed=False, status="completed", reason="run_middleware"))
    assert command == Finish(status="completed", reason="run_middleware")
    assert d.finish_input(command).run_middleware == "ended"
    outcome = d.on_finished(command, FinishResult(status="completed", reason="run_middleware"))
    assert (outcome.status, d.progress().status) == ("completed", "completed")


def test_run_middleware_pre_processing_is_not_repeated_after_continue_as_new() -> None:
    d = driver(run_middleware=True, generation=1, pending_command=CallModel(iteration=9, tool_choice="auto"))
    assert not d.needs_middleware_before()
    assert d.finish_input(Finish(status="completed", reason="stop")).run_middleware == "after"
    assert not driver().needs_middleware_before()  # an agent without run middleware
    assert driver().finish_input(Finish(status="completed", reason="stop")).run_middleware == "none"


def test_a_cancelled_or_failed_pre_processing_is_not_post_processed() -> None:
    d = driver(run_middleware=True)
    d.middleware_before_input()
    command = d.on_cancel("stop")
    assert isinstance(command, Finish) and command.status == "cancelled"
    assert d.finish_input(command).run_middleware == "none"


def test_finish_run_may_change_the_verdict_of_the_loop() -> None:
    d = driver()
    d.model_call(d.first_command())
    finish = d.on_model_result(turn())
    assert isinstance(finish, Finish)
    verdict = FinishResult(status="failed", reason="invalid_structured_output: the answer is not JSON")
    outcome = d.on_finished(finish, verdict)
    assert (outcome.status, outcome.reason) == ("failed", verdict.reason)
    assert (d.progress().status, d.progress().reason) == ("failed", verdict.reason)
    assert driver().on_finished(Finish(status="completed", reason="stop")).status == "completed"  # old histories


def test_a_model_call_carries_what_closing_the_run_needs_and_its_loop_decides_as_the_driver_does() -> None:
    from agent_runtime.loop import AgentLoop

    d = driver()
    d.model_call(d.first_command())
    d.tool_calls(d.on_model_result(turn(("a", False))))
    last = d.model_call(d.on_tool_results([ToolOutcome(call_id="a")]))
    assert last.close is not None
    answer = ModelTurn(has_text=True, finish_reason="stop")
    # The loop as the call carries it decides what the driver's own loop decides for the same answer.
    in_activity = AgentLoop(state=last.close.loop_state.model_copy(deep=True)).send(answer)
    twin = driver()
    twin.model_call(twin.first_command())
    twin.tool_calls(twin.on_model_result(turn(("a", False))))
    twin.model_call(twin.on_tool_results([ToolOutcome(call_id="a")]))
    assert in_activity == twin.on_model_result(answer)
    assert isinstance(in_activity, Finish)
    # The close writes in the block `finish_input` allocates next.
    assert last.close.first_seq == twin.finish_input(in_activity).first_seq == last.first_seq + SLOTS_PER_MODEL_CALL
    assert last.close.approvals_asked is False


def test_a_run_with_run_middleware_leaves_the_close_to_finish_run() -> None:
    """Its post-processing is recorded once; a model call redelivered before closing asks the model again."""
    d = driver(run_middleware=True, generation=1)
    assert d.model_call(d.first_command()).close is None


def test_a_turn_that_closed_the_run_ends_it_as_closed_with_nothing_left_to_schedule() -> None:
    from agent_runs.contracts import ClosedModelTurn

    d = driver()
    call = d.model_call(d.first_command())
    closed = ClosedModelTurn(
        turn=ModelTurn(has_text=True, finish_reason="stop"),
        finished=FinishResult(status="failed", reason="invalid_structured_output: not JSON"),
    )
    finish = d.on_model_result(closed)
    assert (finish.status, finish.reason) == ("completed", "stop")  # the loop's verdict; the close's stands below
    assert d.closed_by_step == closed.finished
    outcome = d.on_finished(finish, d.closed_by_step)
    assert (outcome.status, outcome.reason) == ("failed", "invalid_structured_output: not JSON")
    progress = d.progress()
    assert progress.status == "failed"
    assert progress.visible_seq >= call.close.first_seq  # the finish block counts as written, as after finish_run


def test_the_progress_key_tells_apart_every_progress_a_run_publishes() -> None:
    """A replayed step's custom status is looked up by `progress_key` (orchestrators.agent_run._publish) instead of
    being built: two states with one key must publish the same progress, down to the bytes."""
    published: dict[bytes, str] = {}

    def publish(d: RunDriver) -> None:
        progress = d.progress().model_dump_json()
        assert published.setdefault(d.progress_key(), progress) == progress

    for usage, now in ((Usage(input_tokens=5), NOW), (Usage(input_tokens=5, cost=0.0), NOW),
                       (Usage(input_tokens=5), NOW.astimezone(timezone(timedelta(hours=1))))):
        d = driver()
        publish(d)
        d.model_call(d.first_command())
        publish(d)
        command = d.on_model_result(turn(("a", True), ("b", False)).model_copy(update={"usage": usage}))
        publish(d)
        assert isinstance(command, RequestApproval)
        d.approval_requests(command, now)
        d.on_approvals_recorded()
        publish(d)
        d.on_decisions(DecisionsResult(decided=[ApprovalDecision(call_id="a", approved=False, reason="no")]))
        publish(d)
    # The same deadline in another zone is another custom status (its JSON differs): so is its key.
    assert len(set(published.values())) == len(published) == 1 + 1 + 2 + 3 + 2
