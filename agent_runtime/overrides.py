"""Per-run changes to an agent: extra instructions and a structured output format that apply to one run only.

A client may start a run with its own instructions (added after the agent's) and its own output schema (e.g. the
OpenAI Responses surface's `instructions` and `text.format`). They change that run's model calls and the check of its
answer, never the agent definition or later runs of the session. They travel in the run's store record (read by the
model and finish steps), not in orchestration payloads: a schema can be large, and history must stay small.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field

from .agents import AgentDefinition
from .loop_types import ToolChoice
from .models.types import ChatOptions, ResponseFormat

MAX_INSTRUCTIONS_CHARS = 64_000


class OutputSchemaError(ValueError):
    """The answer is not JSON matching the run's output schema."""


class RunOverrides(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    instructions: str | None = Field(default=None, max_length=MAX_INSTRUCTIONS_CHARS)
    """Extra system instructions for this run, after the agent's own."""
    response_format: ResponseFormat | None = None
    """Structured output for this run, replacing the agent's `output_type`."""

    @classmethod
    def from_record(cls, stored: dict[str, Any] | None) -> RunOverrides:
        return cls.model_validate(stored or {})

    def to_record(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    def system_prompt(self, agent: AgentDefinition) -> str:
        return "\n\n".join(part for part in (agent.instructions, self.instructions) if part)

    def chat_options(self, agent: AgentDefinition, tool_choice: ToolChoice | None = None) -> ChatOptions:
        options = agent.chat_options(tool_choice)
        if self.response_format is None:
            return options
        return options.model_copy(update={"response_format": self.response_format.model_copy(deep=True)})

    @property
    def has_output_format(self) -> bool:
        return self.response_format is not None

    def parse_output(self, agent: AgentDefinition, text: str) -> Any:
        """The structured answer (the agent's own `output_type` without a per-run format); raises a ValueError when
        the answer does not fit."""
        fmt = self.response_format
        if fmt is None:
            return agent.parse_output(text)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise OutputSchemaError(f"the answer is not JSON: {error}") from error
        if not isinstance(value, dict):
            raise OutputSchemaError("the answer is not a JSON object")
        if fmt.type == "json_schema" and fmt.json_schema is not None:
            try:
                jsonschema.validate(value, fmt.json_schema)
            except jsonschema.ValidationError as error:
                where = "/".join(str(part) for part in error.absolute_path) or "(root)"
                raise OutputSchemaError(f"the answer does not match the schema at {where}: {error.message}") from error
            except Exception as error:  # e.g. a $ref the schema cannot resolve: the answer cannot be checked
                raise OutputSchemaError(f"the answer cannot be checked against the schema: {error}") from error
        return value


def check_output_schema(schema: dict[str, Any]) -> None:
    """Raise a ValueError when `schema` is not a usable JSON schema with an object root (before a run starts)."""
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as error:
        raise ValueError(f"not a valid JSON schema: {error.message}") from error
    except Exception as error:  # an unknown `$schema` dialect and the like
        raise ValueError(f"not a usable JSON schema: {error}") from error
    ResponseFormat.from_json_schema(schema)  # the object root check


__all__ = ["OutputSchemaError", "RunOverrides", "check_output_schema"]
