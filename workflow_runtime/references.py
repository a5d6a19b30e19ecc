"""References into a workflow's data: `{{ input.topic }}` in prompts, `steps.review.value.approved` in conditions.

A reference is a dotted path whose root is `input` (the validated workflow input) or `steps.<step_id>` (the output
of a step that ran before). Paths are parsed when a definition is built (so a typo fails at start-up) and resolved
inside activities, against data read from the store: the orchestrator only ever carries the references.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

_PATH = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*"
PLACEHOLDER = re.compile(r"\{\{\s*(" + _PATH + r")\s*\}\}")
_PATH_RE = re.compile(r"^" + _PATH + r"$")


class UnresolvedReference(LookupError):
    """A reference that does not resolve against the data at run time (the step's failure names it)."""


def parse_path(path: str) -> tuple[str, ...]:
    """Split and check a reference: `input[.x...]` or `steps.<id>[.x...]`."""
    if not _PATH_RE.match(path):
        raise ValueError(f"{path!r} is not a reference (expected e.g. 'input.topic' or 'steps.write.text')")
    parts = tuple(path.split("."))
    if parts[0] == "input":
        return parts
    if parts[0] == "steps" and len(parts) >= 2:
        return parts
    raise ValueError(f"{path!r} must start with 'input' or 'steps.<step id>'")


def referenced_steps(paths: list[str]) -> set[str]:
    return {parts[1] for parts in map(parse_path, paths) if parts[0] == "steps"}


def template_paths(template: str) -> list[str]:
    """The references a prompt template uses (each checked by `parse_path`)."""
    paths = PLACEHOLDER.findall(template)
    for path in paths:
        parse_path(path)
    return paths


def resolve(path: str, data: Mapping[str, Any]) -> Any:
    """The value at `path` in `{"input": ..., "steps": {...}}`; raises `UnresolvedReference` naming the missing part."""
    value: Any = data
    walked: list[str] = []
    for part in parse_path(path):
        walked.append(part)
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise UnresolvedReference(f"'{'.'.join(walked)}' does not exist (while resolving '{path}')")
    return value


def render(template: str, data: Mapping[str, Any]) -> str:
    """Replace every `{{ path }}` with its value (strings verbatim, anything else as JSON)."""

    def value_of(match: re.Match[str]) -> str:
        value = resolve(match.group(1), data)
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    return PLACEHOLDER.sub(value_of, template)


_ORDERING = {"gt": operator.gt, "ge": operator.ge, "lt": operator.lt, "le": operator.le}
Operator = Literal["eq", "ne", "gt", "ge", "lt", "le", "truthy", "falsy", "in", "contains"]


class Condition(BaseModel):
    """A test on structured output, e.g. `Condition(ref="steps.review.value.verdict", op="eq", value="approve")`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ref: str
    op: Operator = "truthy"
    value: Any = None

    @field_validator("ref")
    @classmethod
    def _ref(cls, ref: str) -> str:
        parse_path(ref)
        return ref

    def evaluate(self, data: Mapping[str, Any]) -> bool:
        actual = resolve(self.ref, data)
        match self.op:
            case "truthy":
                return bool(actual)
            case "falsy":
                return not actual
            case "eq":
                return bool(actual == self.value)
            case "ne":
                return bool(actual != self.value)
            case "in":
                return actual in (self.value or [])
            case "contains":
                return self.value in actual if isinstance(actual, str | list | dict) else False
        try:
            return bool(_ORDERING[self.op](actual, self.value))
        except TypeError as error:
            raise UnresolvedReference(f"'{self.ref}' = {actual!r} cannot be compared with {self.value!r}") from error
