"""devhost's JSON writers give exactly what `json.dumps` gives with the same settings."""

from __future__ import annotations

import json
from enum import IntEnum
from typing import Any

import pytest

from devhost.protocol.jsontext import compact_json, spaced_json


class _Level(IntEnum):
    HIGH = 3


VALUES: list[Any] = [
    None, True, 0, -17, 2**70, 1.5, 1e-7, float("nan"), float("inf"), "", "plain", 'quote " back \\ slash',
    "é ü 漢字 \u2028 \x00 \ud83d\ude00", [], {}, [1, "a", None, [2, {"b": []}]],
    {"EventId": -1, "IsPlayed": False, "Timestamp": "2030-01-01T00:00:05.12Z", "EventType": 5, "Result": '{"a":1}'},
    {"z": 1, "a": {"nested": ["é", 1.25, False]}, "1": None}, {1: "int key", 2.5: "float key", None: "none key"},
    (1, 2), _Level.HIGH, {"level": _Level.HIGH},
]


@pytest.mark.parametrize("value", VALUES)
def test_the_texts_are_json_dumps(value: Any) -> None:
    assert compact_json(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert spaced_json(value) == json.dumps(value, ensure_ascii=False)


@pytest.mark.parametrize("value", [object(), {"a": {1, 2}}, [b"bytes"], {("tuple", "key"): 1}])
def test_what_json_dumps_refuses_is_refused_alike(value: Any) -> None:
    with pytest.raises(TypeError) as expected:
        json.dumps(value, ensure_ascii=False)
    for dumps in (compact_json, spaced_json):
        with pytest.raises(TypeError) as raised:
            dumps(value)
        assert str(raised.value) == str(expected.value)
