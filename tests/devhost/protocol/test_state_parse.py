"""`OrchestratorOutput.from_state_json` reads the SDK's state text member by member and reuses the last episode's
parsed actions where the text repeats them: whatever the text, it must give what a plain `json.loads` + parse gives
(the same output, or the same error)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devhost.protocol.actions import Action, OrchestratorOutput, compact_json


def _reference(text: str) -> OrchestratorOutput:
    """The plain parse: the whole text decoded, every action parsed."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("orchestrator output is not a JSON object")
    custom = data.get("customStatus")
    return OrchestratorOutput(
        is_done=bool(data.get("isDone", False)),
        schema_version=data.get("schemaVersion"),
        action_groups=[[Action.from_json(a) for a in group] for group in data.get("actions") or []],
        output_json=compact_json(data["output"]) if "output" in data else None,
        error=data.get("error"),
        custom_status_json=compact_json(custom) if custom is not None else None,
    )


def _call(name: str, city: str) -> dict[str, Any]:
    return {"actionType": 1, "functionName": name, "input": json.dumps(city),
            "retryOptions": {"firstRetryIntervalInMilliseconds": 2000, "maxNumberOfAttempts": 3}}


def _step(name: str, city: str) -> dict[str, Any]:
    """The agent run's shape: WhenAny[WhenAll[call with retry], cancel event]."""
    return {"actionType": 11, "compoundActions": [
        {"actionType": 12, "compoundActions": [_call(name, city)]},
        {"actionType": 6, "externalEventName": "cancel", "reason": "ExternalEvent"}]}


def _state(steps: int, **extra: Any) -> dict[str, Any]:
    actions = [_step("call_model" if i % 2 == 0 else "invoke_tool", f"city {i} é\"\\") for i in range(steps)]
    return {"isDone": False, "schemaVersion": 2, "actions": [actions], **extra}


def _texts(state: dict[str, Any]) -> list[str]:
    """The same state as the SDK writes it, compact, pretty, with stray whitespace, and with its keys reordered."""
    reordered = dict(reversed(list(state.items())))
    return [json.dumps(state), compact_json(state), json.dumps(state, indent=2), f" \n\t{json.dumps(state)}\r\n ",
            json.dumps(reordered), json.dumps(state, separators=(" ,", " : "))]


@pytest.mark.parametrize("form", range(6))
def test_every_episode_reads_as_a_plain_parse_and_reuses_what_repeats(form: int) -> None:
    previous: OrchestratorOutput | None = None
    for steps in range(5):
        text = _texts(_state(steps, customStatus={"step": steps}))[form]
        output = OrchestratorOutput.from_state_json(text, previous)
        assert output == _reference(text)
        if previous is not None:  # the actions of the last episode are the very objects parsed then
            assert all(new is old for new, old in zip(output.action_groups[0], previous.action_groups[0],
                                                      strict=False))
        previous = output
    done = _texts(_state(5, isDone=True, output={"status": "completed"}))[form]
    assert OrchestratorOutput.from_state_json(done, previous) == _reference(done)


def test_an_episode_written_differently_is_parsed_again() -> None:
    """Equal values in another spelling are parsed again (only identical text is reused), with the same result."""
    previous = OrchestratorOutput.from_state_json(compact_json(_state(3)))
    text = json.dumps(_state(4))
    output = OrchestratorOutput.from_state_json(text, previous)
    assert output == _reference(text)
    assert not any(new is old for new, old in zip(output.action_groups[0], previous.action_groups[0], strict=False))


def test_a_changed_action_after_a_repeated_prefix_is_parsed_again() -> None:
    """An action whose text starts like the old one's but goes on differently is a new action."""
    previous = OrchestratorOutput.from_state_json(json.dumps(_state(2)))
    state = _state(2)
    state["actions"][0][1]["compoundActions"][1]["externalEventName"] = "cancel-2"
    text = json.dumps(state)
    output = OrchestratorOutput.from_state_json(text, previous)
    assert output == _reference(text)
    assert output.action_groups[0][0] is previous.action_groups[0][0]
    assert output.action_groups[0][1] is not previous.action_groups[0][1]


@pytest.mark.parametrize("text", [
    '{"isDone": true}', "{}", '{"actions": null, "isDone": false}', '{"actions": [], "output": null}',
    '{"actions": [[]], "actions": [[{"actionType": 5, "fireAt": "2030-01-01T00:00:00.000000Z", "isCanceled": true}]]}',
    '{"actions": [[{"actionType": 0, "functionName": "f", "input": {"not": "a string"}}], []], "schemaVersion": 2}',
    '{"actions": [[{"actionType": 6, "externalEventName": "x", "reason": "ExternalEvent"}]], "error": "boom"}',
])
def test_unusual_shapes_read_as_a_plain_parse(text: str) -> None:
    previous = OrchestratorOutput.from_state_json(json.dumps(_state(1)))
    assert OrchestratorOutput.from_state_json(text, previous) == _reference(text)


@pytest.mark.parametrize("text", [
    "null", "[]", '"text"', "", "{", '{"isDone": false', '{"actions": [[', '{"actions": [[{"actionType": 1}',
    '{"isDone": false} extra', '{"isDone": false,}', "{'isDone': false}", '{"a" 1}', '{"actions": {"x": 1}}',
    '{"actions": [{"actionType": 0}]}', '{"actions": [[{"actionType": 99}]]}', '{"actions": [[7]]}',
    '{"actions": [[{"actionType": 0, "functionName": "f"}] [] ]}', '\ufeff{"isDone": false}',
    '{"isDone": NaN, "actions": [[]]}', '{"isDone": false, "error": "\x01"}',
])
def test_anything_else_fails_or_reads_as_a_plain_parse(text: str) -> None:
    previous = OrchestratorOutput.from_state_json(json.dumps(_state(1)))
    try:
        expected: Any = _reference(text)
    except Exception as exc:  # whatever the plain parse raises is what is expected
        with pytest.raises(type(exc)) as raised:
            OrchestratorOutput.from_state_json(text, previous)
        assert str(raised.value) == str(exc)
    else:
        assert OrchestratorOutput.from_state_json(text, previous) == expected
