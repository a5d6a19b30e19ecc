"""Properties of the loop over arbitrary model behaviour: it always ends within its budget, every proposed call gets
exactly one result or is reported unresolved, and its state survives a JSON round-trip at every step."""

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_runtime.loop import AgentLoop
from agent_runtime.loop_types import (
    ApprovalDecision,
    AwaitApproval,
    CallModel,
    Finish,
    LoopConfig,
    LoopState,
    ModelTurn,
    RequestApproval,
    RunTools,
    ToolCallRef,
    ToolOutcome,
    ToolResults,
)

call_flags = st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans())  # known, approval, error, approve
turns = st.lists(st.lists(call_flags, max_size=3), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(
    script=turns,
    max_iterations=st.integers(1, 6),
    max_errors=st.integers(1, 3),
    terminate_unknown=st.booleans(),
    tool_choice=st.sampled_from(["auto", "required", "none"]),
)
def test_loop_invariants(script, max_iterations, max_errors, terminate_unknown, tool_choice) -> None:
    config = LoopConfig(
        max_iterations=max_iterations,
        max_consecutive_errors=max_errors,
        terminate_on_unknown_calls=terminate_unknown,
        tool_choice=tool_choice,
    )
    loop = AgentLoop(config)
    command = loop.start()
    proposed: set[str] = set()
    answered: set[str] = set()
    flags: dict[str, tuple] = {}
    model_calls = 0
    for _ in range(500):
        loop = AgentLoop(state=LoopState.model_validate_json(loop.state.model_dump_json()))  # continue-as-new anywhere
        if isinstance(command, Finish):
            break
        if isinstance(command, CallModel):
            model_calls += 1
            batch = script[min(model_calls - 1, len(script) - 1)]
            refs = []
            for index, (known, approval, error, approve) in enumerate(batch):
                call_id = f"{model_calls}-{index}"
                flags[call_id] = (error, approve)
                refs.append(ToolCallRef(call_id=call_id, name="t", known=known, needs_approval=approval))
            proposed |= {r.call_id for r in refs}
            command = loop.send(ModelTurn(tool_calls=refs))
        elif isinstance(command, RequestApproval | AwaitApproval):
            pending = [i.ref.call_id for i in loop.state.batch if i.decision == "pending"]
            assert pending
            command = loop.send(ApprovalDecision(call_id=pending[0], approved=flags[pending[0]][1]))
        elif isinstance(command, RunTools):
            assert not {c.call_id for c in command.calls} & answered  # never asked to answer a call twice
            answered |= {c.call_id for c in command.calls}
            command = loop.send(
                ToolResults(
                    outcomes=[ToolOutcome(call_id=c.call_id, is_error=flags[c.call_id][0]) for c in command.calls]
                )
            )
    assert isinstance(command, Finish), "the loop must end"
    assert model_calls <= max_iterations + 1
    assert answered | {c.call_id for c in command.unresolved} == proposed
    assert not answered & {c.call_id for c in command.unresolved}
    if tool_choice == "required":
        assert model_calls == 1
