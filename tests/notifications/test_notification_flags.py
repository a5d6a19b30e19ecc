"""`NotificationFlags`: the one typed piece that `prepare_notifications` returns and that `RunInput` and
`WorkflowRef` both carry; inputs of the shapes older code wrote read back and are written again as they were."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_runs.contracts import RunInput
from agent_runs.wire import compact_json
from notifications.contracts import NotificationFlags
from workflow_runtime.contracts import WorkflowRef

RUN = {"run": {"run_id": "r1", "session_id": "r1", "agent": "helper", "ordinal": 1}, "loop_config": {},
       "next_position": 1, "approval_timeout_seconds": 86400.0}
REF = {"run_id": "w1", "workflow": "review_pipeline", "package": "workflows", "session_id": None, "trace": None}
FLAGS = ({}, {"notify": True}, {"notify": True, "notify_gives_up": True})  # before any, before giving up, before now


@pytest.mark.parametrize("flags", FLAGS, ids=["none", "notify", "gives_up"])
@pytest.mark.parametrize(("model", "fields"), [(RunInput, RUN), (WorkflowRef, REF)], ids=["run", "workflow"])
def test_an_input_written_by_older_code_reads_back_and_is_written_as_it_was(
    model: type[RunInput] | type[WorkflowRef], fields: dict[str, Any], flags: dict[str, bool]
) -> None:
    written = {**fields, **flags}  # where older code wrote them: last
    read = model.model_validate_json(json.dumps(written))
    assert read.notify == bool(flags) and read.notify_gives_up == ("notify_gives_up" in flags)
    assert not read.notify_notes_cancels
    again = compact_json(read) if isinstance(read, RunInput) else read.model_dump(mode="json")  # as each is written
    assert again == written
    if not flags:  # golden histories' and most in-flight inputs: the very bytes
        assert json.dumps(again) == json.dumps(written)


def test_the_flags_a_run_s_start_decides_go_into_either_input_unsplatted() -> None:
    flags = NotificationFlags(notify=True, notify_gives_up=True, notify_notes_cancels=True)
    run = RunInput.model_validate(RUN).notifying(flags)
    ref = WorkflowRef.model_validate(REF).notifying(flags)
    assert isinstance(run, RunInput) and isinstance(ref, WorkflowRef)
    for notifying in (run, ref):
        assert NotificationFlags.model_validate(notifying.model_dump(include=set(NotificationFlags.model_fields))) \
            == flags
    assert RunInput.model_validate(RUN).notifying(NotificationFlags()).model_dump() == RunInput.model_validate(
        RUN).model_dump()
