"""How a run ended, built the same way by the in-process runner and by a durable run's finish activity.

One rule set for both runners (the conformance table in `tests/runs/test_run_semantics.py` holds them to it):
- a run that completed with an agent `output_type` whose answer does not validate ends `failed` with the code
  `invalid_structured_output` (its text stays in the result, so the caller can see what the model said);
- a failure reason is `"<code>: <message>"`, the code being what the HTTP API reports as `error.code`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .agents import AgentDefinition
from .loop_types import LoopState
from .messages import FunctionApprovalRequestContent, Message, Usage, last_assistant_text
from .overrides import OutputSchemaError, RunOverrides

RunStatusLike = Literal["completed", "failed", "cancelled", "requires_action"]

INVALID_STRUCTURED_OUTPUT = "invalid_structured_output"

_CODE = re.compile(r"^([a-z][a-z0-9_]*):\s*(.*)$", re.DOTALL)


class RunResult(BaseModel):
    """How a run ended (or paused). `messages`: what the run added to the conversation, in order."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_id: str
    status: RunStatusLike
    reason: str
    text: str = ""
    value: Any = None
    """The structured output (an instance of the agent's `output_type`) when the agent has one."""
    usage: Usage = Field(default_factory=Usage)
    messages: list[Message] = Field(default_factory=list)
    pending_approvals: list[FunctionApprovalRequestContent] = Field(default_factory=list)
    loop_state: LoopState | None = None
    """Set while `requires_action`: what `resume()` continues from."""
    mcp_tools: list[dict[str, Any]] = Field(default_factory=list)
    """The MCP tools discovered for this run (`McpToolSpec` JSON): `resume()` offers exactly these again."""

    @property
    def code(self) -> str | None:
        """The stable error code of a run that did not complete (`reason` is `"<code>: <message>"`)."""
        if self.status == "completed":
            return None
        return error_of(self.status, self.reason)["code"]


def failure_reason(code: str, message: str) -> str:
    return f"{code}: {message}"


def error_of(status: str, reason: str) -> dict[str, Any]:
    """The `{code, message}` a failed or cancelled run reports for `reason`."""
    match = _CODE.match(reason)
    if match:
        return {"code": match.group(1), "message": match.group(2) or reason}
    return {"code": reason if re.fullmatch(r"[a-z_]+", reason) else status, "message": reason}


def structured_value(
    agent: AgentDefinition, text: str, overrides: RunOverrides | None = None
) -> tuple[Any, str | None]:
    """(the parsed structured output, None) or (None, the first line of why it does not validate). `overrides`: the
    run's own output format, which replaces the agent's."""
    try:
        return (overrides or RunOverrides()).parse_output(agent, text), None
    except OutputSchemaError as error:
        return None, str(error).splitlines()[0]
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in e['loc']) or 'answer'}: {e['msg']}" for e in error.errors()[:3]
        )
        return None, f"the answer does not match the output type ({problems})"
    except ValueError as error:  # json's JSONDecodeError (a JSON-schema output type)
        return None, f"the answer is not JSON ({str(error).splitlines()[0]})"
    except RecursionError:
        return None, "the answer is JSON nested too deep to check"


def checks_structured_output(agent: AgentDefinition, status: RunStatusLike, overrides: RunOverrides | None) -> bool:
    """Whether `build_run_result` parses and validates the answer (a completed run with an output format): the only
    part of it that is more than bookkeeping."""
    structured = agent.output_type is not None or (overrides is not None and overrides.has_output_format)
    return status == "completed" and structured


def build_run_result(
    agent: AgentDefinition,
    run_id: str,
    status: RunStatusLike,
    reason: str,
    usage: Usage,
    added: Sequence[Message],
    *,
    overrides: RunOverrides | None = None,
) -> RunResult:
    """The result of a run that added `added` to the conversation and ended with `status`/`reason`."""
    text = last_assistant_text(added)
    value = None
    if checks_structured_output(agent, status, overrides):
        value, problem = structured_value(agent, text, overrides)
        if problem is not None:
            status, reason = "failed", failure_reason(INVALID_STRUCTURED_OUTPUT, problem)
    return RunResult(run_id=run_id, status=status, reason=reason, text=text, value=value, usage=usage, messages=added)


__all__ = [
    "INVALID_STRUCTURED_OUTPUT",
    "RunResult",
    "RunStatusLike",
    "build_run_result",
    "checks_structured_output",
    "error_of",
    "failure_reason",
    "structured_value",
]
