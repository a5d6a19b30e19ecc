"""`agent_runs.wire_shapes.reads_back_unchanged`: which payload types `compact_json` writes without validating its
output again, and that for those its output reads back as the checked path says."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import pytest
from agent_run_activities import ACTIVITIES
from golden_histories import TASK_COMPLETED, TASK_SCHEDULED, cases, payload
from pydantic import (
    AfterValidator,
    BaseModel,
    Discriminator,
    Field,
    TypeAdapter,
    computed_field,
    field_validator,
    model_validator,
)

from agent_runs.contracts import (
    CloseIfFinal,
    ModelCallInput,
    ResumePoint,
    RunInput,
    RunOutcome,
    RunProgress,
    RunRef,
    TurnInput,
)
from agent_runs.wire import compact_json
from agent_runs.wire_shapes import reads_back_unchanged
from agent_runtime.loop_types import BatchCall, CallModel, Finish, LoopConfig, LoopState, RequiredFunction, ToolCallRef
from agent_runtime.messages import Usage


def test_the_payloads_of_a_run_read_back_unchanged_but_where_a_union_or_a_serializer_could_say_otherwise() -> None:
    assert all(reads_back_unchanged(model) for model in (RunInput, RunProgress, ResumePoint, TurnInput))
    assert not reads_back_unchanged(RunOutcome)  # its serializer leaves `resume` out
    assert all(reads_back_unchanged(activity.input_model) for activity in ACTIVITIES.values())
    checked = {name for name, activity in ACTIVITIES.items() if not reads_back_unchanged(activity.output_type)}
    assert checked == {"discover_tools"}  # `ToolsDiscovered | StepFailure`: no tag tells them apart


def _values() -> list[tuple[Any, BaseModel]]:
    """(reader type, value) of every payload the golden histories hold, and of some with every field set."""
    found: list[tuple[Any, BaseModel]] = []
    for case in cases():
        found.append((RunInput, RunInput.model_validate(payload(case["input"]))))
        names = {e["EventId"]: e["Name"] for e in case["history"] if e["EventType"] == TASK_SCHEDULED}
        for event in case["history"]:
            if event["EventType"] == TASK_SCHEDULED:
                model = ACTIVITIES[event["Name"]].input_model
                found.append((model, model.model_validate(payload(event["Input"]))))
            elif event["EventType"] == TASK_COMPLETED and payload(event["Result"]) is not None:
                activity = ACTIVITIES[names[event["TaskScheduledId"]]]
                found.append((activity.output_type, activity.parse(payload(event["Result"]))))
    state = LoopState(config=LoopConfig(max_iterations=3, tool_choice=RequiredFunction(required_function_name="f")),
                      phase="finished", iteration=2, tools_disabled_reason="max_iterations", usage=Usage(cost=0.0),
                      batch=[BatchCall(ref=ToolCallRef(call_id="c", name="t", known=False), decision="rejected")],
                      finish=Finish(status="failed", reason="x", unresolved=[ToolCallRef(call_id="c", name="t")]))
    run = RunRef(run_id="r", session_id="s", agent="a", ordinal=0)
    found.append((ModelCallInput, ModelCallInput(run=run, command=CallModel(iteration=1, tool_choice="none"),
                                                 first_seq=0, close=CloseIfFinal(loop_state=state, first_seq=0))))
    found.append((RunProgress, RunProgress(status="requires_action", visible_seq=0, pending_approvals=["a"],
                                           approvals_expire_at=datetime(2030, 1, 1, tzinfo=UTC))))
    return found


@pytest.mark.parametrize(("read_as", "value"), _values(), ids=lambda item: getattr(item, "__name__", None))
def test_what_is_written_unchecked_is_what_the_checked_path_writes_and_reads_back_the_same(
    read_as: Any, value: BaseModel
) -> None:
    parse = TypeAdapter(read_as).validate_python
    unchecked = compact_json(value, parse, read_as=read_as)
    assert unchecked == compact_json(value, parse)  # (no `read_as`: validated and compared)
    assert parse(unchecked) == value == parse(value.model_dump(mode="json"))


VALIDATED: list[type[BaseModel]] = []


class _Counted(BaseModel):
    name: str = "x"

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        VALIDATED.append(cls)
        return super().model_validate(obj, **kwargs)


class _CountedWithValidator(_Counted):
    size: int = 0

    @field_validator("size")
    @classmethod
    def _non_negative(cls, value: int) -> int:
        return max(value, 0)


def test_only_a_type_that_may_read_back_otherwise_is_validated_again() -> None:
    VALIDATED.clear()
    assert compact_json(_Counted(name="y")) == {"name": "y"}
    assert VALIDATED == []
    assert compact_json(_CountedWithValidator(size=2)) == {"size": 2}
    assert VALIDATED.count(_CountedWithValidator) == len(VALIDATED) == 1


class _Small(BaseModel):
    size: int = 0


class _TaggedA(BaseModel):
    kind: Literal["a"] = "a"
    size: int = 0


class _TaggedB(BaseModel):
    kind: Literal["b"] = "b"
    size: int = 0


class _Wide(BaseModel):
    kind: Literal["a", "b"] = "a"


class _Tree(BaseModel):
    children: list[_Tree] = Field(default_factory=list)
    label: str | None = None


class _Aliased(BaseModel):
    size: int = Field(default=0, alias="Size")


class _ValidatedDefault(BaseModel):
    size: int = Field(default=0, validate_default=True)


class _ModelValidator(BaseModel):
    size: int = 0

    @model_validator(mode="before")
    @classmethod
    def _fill(cls, data: Any) -> Any:
        return data


class _Computed(BaseModel):
    size: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def double(self) -> int:
        return 2 * self.size


class _Untyped(BaseModel):
    value: Any = None


class _Annotated(BaseModel):
    size: Annotated[int, AfterValidator(abs)] = 0


class _Bounded(BaseModel):
    size: int = Field(default=0, ge=0, le=10)
    name: str = Field(default="", max_length=5, pattern="^[a-z]*$")


@pytest.mark.parametrize(("annotation", "unchanged"), [
    (_Small | _Bounded, False),  # a `_Bounded` missing `name` reads as a `_Small` (test_wire.py shows it)
    (_TaggedA | _TaggedB, True),  # their tags, always written, tell them apart
    (Annotated[_TaggedA | _TaggedB, Field(discriminator="kind")], True),
    (Annotated[_TaggedA | _Wide, Field(discriminator="kind")], False),  # `_Wide.kind` is no tag: it may be left out
    (Annotated[_TaggedA | _TaggedB, Discriminator(lambda value: "a")], False),
    (_Small | str | None, True),
    (list[_Small] | None, True),
    (dict[str, _Small | _Bounded], False),
    (_Tree, True),
    (_Bounded, True),
    (_Aliased, False),
    (_ValidatedDefault, False),
    (_ModelValidator, False),
    (_Computed, False),
    (_Untyped, False),
    (_Annotated, False),
])
def test_what_the_declaration_shows(annotation: Any, unchanged: bool) -> None:
    assert reads_back_unchanged(annotation) is unchanged
