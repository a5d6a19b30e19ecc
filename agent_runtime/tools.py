"""Tools: plain Python callables the model may call, described by a JSON schema derived with pydantic.

    @tool(approval="always", timeout=10)
    async def send_email(to: Annotated[str, "recipient address"], subject: str, body: str = "") -> str:
        '''Send an email.'''

The schema comes from the type hints, defaults, `Annotated` descriptions (a plain string or a `pydantic.Field`) and
the docstring (first paragraph = tool description; a Google-style `Args:` section describes parameters). A parameter
annotated `ToolContext` is not part of the schema: the runtime passes the call's context (idempotency key, ids) there.

Invalid arguments never crash a run: `Tool.validate_arguments` raises `ToolArgumentsError`, whose message is written
for the model to read and correct itself.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal, Protocol, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from agent_runtime.approvers import DEFAULT_APPROVERS, check_approvers

ApprovalPredicate = Callable[[BaseModel], bool]
# "never" / "always", or a predicate over the validated arguments (an instance of the tool's arguments model).
ApprovalPolicy = Literal["never", "always"] | ApprovalPredicate


class EffectLedger(Protocol):
    """Where a tool records a side effect exactly once (the durable host backs it with the session store)."""

    async def record_once(self, key: str, kind: str, payload: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Store `payload` under `key` unless something is stored there; return (stored payload, created now)."""
        ...


class ToolContext(BaseModel):
    """What the runtime tells a tool about the call it is serving.

    `idempotency_key` is stable across retries of the same call (an activity may run twice): a tool with side effects
    passes it to the system it changes so that the second delivery is a no-op there. `effects`, when the host offers
    one, is a ledger that does exactly that for effects the app keeps itself (see `record_effect_once`).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    idempotency_key: str
    call_id: str
    tool_name: str
    run_id: str | None = None
    session_id: str | None = None
    agent_name: str | None = None
    effects: Any = Field(default=None, exclude=True, repr=False)

    async def record_effect_once(self, kind: str, payload: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Record this call's side effect under its idempotency key; a retried call gets the first record back."""
        if self.effects is None:
            raise RuntimeError("this host offers no effect ledger to tools")
        ledger: EffectLedger = self.effects
        return await ledger.record_once(self.idempotency_key, kind, payload)


class EffectLedgerUnavailableError(Exception):
    """The host's effect ledger could not record or read an effect (its store is down or shedding load).

    Not the tool's failure: the step runner lets it escape so the host retries the whole step (the ledger makes the
    retry safe), instead of telling the model that the tool failed and leaving the effect unrecorded.
    """


class ToolArgumentsError(ValueError):
    """The model's arguments do not fit the tool's schema; the message is meant for the model."""


class ToolReportedError(Exception):
    """A tool's own account of why it failed, meant for the model: sent verbatim (unlike an unexpected exception,
    whose text may leak internals). Remote tools (MCP `isError` results, an unreachable server) raise it."""


class ToolTimeoutError(TimeoutError):
    """The tool did not finish within its timeout."""


class Tool:
    """A callable the model may call, with its schema, approval policy and timeout."""

    costly_argument_check: bool = False
    """Whether `validate_arguments` may take long enough to stall an event loop (a JSON Schema from outside, checked
    under a deadline of a second or more: MCP tools): the steps then run it on a worker thread. A pydantic model's
    check takes microseconds, less than the thread hop."""

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        approval: ApprovalPolicy | None = None,
        timeout: float | None = None,
        approvers: Sequence[str] = DEFAULT_APPROVERS,
        separation_of_duties: bool = False,
    ) -> None:
        if approval is not None and approval not in ("never", "always") and not callable(approval):
            raise ValueError(f"approval must be 'never', 'always' or a predicate, got {approval!r}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self.func = func
        self.name = name or getattr(func, "__name__", type(func).__name__)
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-' (OpenAI's rule)")
        summary, param_docs = _parse_docstring(inspect.getdoc(func) or "")
        self.description = description if description is not None else summary
        self.approval: ApprovalPolicy | None = approval  # None: the agent's default policy applies
        self.timeout = timeout
        # Who may decide this tool's approvals ("owner", "role:<role>", a principal id); see agent_runtime.approvers.
        self.approvers: list[str] = check_approvers(approvers)
        self.separation_of_duties = bool(separation_of_duties)
        # an object whose __call__ is async counts too (it would otherwise run in a thread and never be awaited)
        self.is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)
        self.arguments_model, self.context_parameter = _arguments_model(func, self.name, param_docs)
        self.parameters: dict[str, Any] = _clean_schema(self.arguments_model.model_json_schema())

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """A decorated function stays directly callable."""
        return self.func(*args, **kwargs)

    def spec(self) -> dict[str, Any]:
        """`{"name", "description", "parameters"}`: what a model client needs to offer the tool."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def validate_arguments(self, arguments: dict[str, Any] | str) -> BaseModel:
        """Parse and validate the model's arguments (a dict or JSON text) into the arguments model."""
        try:
            if isinstance(arguments, str):
                return self.arguments_model.model_validate_json(arguments or "{}")
            return self.arguments_model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolArgumentsError(_describe_validation_error(self.name, exc)) from None

    def needs_approval(self, arguments: BaseModel, default: ApprovalPolicy = "never") -> bool:
        """Whether this call must wait for a human: the tool's own policy, else the agent's default."""
        policy = self.approval if self.approval is not None else default
        if policy == "never":
            return False
        if policy == "always":
            return True
        return bool(policy(arguments))

    async def invoke(self, arguments: BaseModel, context: ToolContext | None = None) -> Any:
        """Run the tool with validated arguments, within its timeout. Sync functions run in a worker thread so they
        cannot block the event loop (a timed-out thread cannot be killed: it finishes in the background)."""
        kwargs = {field: getattr(arguments, field) for field in type(arguments).model_fields}
        if self.context_parameter is not None:
            if context is None:
                raise ValueError(f"tool {self.name!r} needs a ToolContext")
            kwargs[self.context_parameter] = context
        if self.is_async:
            awaitable: Awaitable[Any] = self.func(**kwargs)
        else:
            awaitable = asyncio.to_thread(functools.partial(self.func, **kwargs))
        if self.timeout is None:
            return await awaitable
        try:
            return await asyncio.wait_for(awaitable, self.timeout)
        except TimeoutError:
            raise ToolTimeoutError(f"tool {self.name!r} did not finish within {self.timeout:g} s") from None


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    approval: ApprovalPolicy | None = None,
    timeout: float | None = None,
    approvers: Sequence[str] = DEFAULT_APPROVERS,
    separation_of_duties: bool = False,
) -> Any:
    """Decorator turning a function into a `Tool`: `@tool` or `@tool(name=..., approval=..., timeout=...,
    approvers=["role:Payments.Approver", "owner"], separation_of_duties=True)`."""

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(
            f,
            name=name,
            description=description,
            approval=approval,
            timeout=timeout,
            approvers=approvers,
            separation_of_duties=separation_of_duties,
        )

    return wrap(func) if func is not None else wrap


def as_tool(value: Tool | Callable[..., Any]) -> Tool:
    """Accept plain functions wherever tools are expected."""
    return value if isinstance(value, Tool) else Tool(value)


# --------------------------------------------------------------------------------------------------- schema


class _ArgumentsBase(BaseModel):
    # Unknown arguments are an error the model should hear about, not something to drop silently.
    model_config = ConfigDict(extra="forbid")


def _arguments_model(
    func: Callable[..., Any], tool_name: str, param_docs: dict[str, str]
) -> tuple[type[BaseModel], str | None]:
    if isinstance(func, functools.partial):
        target: Any = func.func
    else:
        target = func if inspect.isroutine(func) else type(func).__call__
    signature = inspect.signature(func)
    hints = get_type_hints(target, include_extras=True)
    fields: dict[str, Any] = {}
    context_parameter: str | None = None
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ValueError(f"tool {tool_name!r}: *args/**kwargs cannot be described to a model")
        annotation = hints.get(parameter.name, Any)
        if _is_context(annotation):
            context_parameter = parameter.name
            continue
        fields[parameter.name] = _field_for(annotation, parameter, param_docs.get(parameter.name))
    model = create_model(f"{tool_name}_arguments", __base__=_ArgumentsBase, **fields)  # type: ignore[call-overload]
    return model, context_parameter


def _is_context(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return inspect.isclass(annotation) and issubclass(annotation, ToolContext)


def _field_for(annotation: Any, parameter: inspect.Parameter, doc: str | None) -> tuple[Any, Any]:
    """`(annotation, default)` for one parameter. `Annotated[T, "text"]` and `Annotated[T, Field(...)]` both describe
    it; a docstring `Args:` entry is the fallback description."""
    description = doc
    metadata: list[Any] = []
    if get_origin(annotation) is Annotated:
        annotation, *extras = get_args(annotation)
        for extra in extras:
            if isinstance(extra, str):
                description = extra
            else:
                metadata.append(extra)
    if description and not any(isinstance(m, FieldInfo) and m.description for m in metadata):
        metadata.append(Field(description=description))
    if metadata:
        annotation = Annotated[(annotation, *metadata)]
    default = ... if parameter.default is inspect.Parameter.empty else parameter.default
    return annotation, default


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_PARAM = re.compile(r"^\s+(\*{0,2}\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """First paragraph -> description; Google-style `Args:` entries -> parameter descriptions."""
    lines = doc.splitlines()
    summary_lines: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        summary_lines.append(line.strip())
    params: dict[str, str] = {}
    in_args, current = False, None
    for line in lines:
        if _SECTION.match(line.strip()):
            in_args, current = line.strip().rstrip(":") in ("Args", "Arguments", "Parameters"), None
            continue
        if not in_args:
            continue
        match = _PARAM.match(line)
        if match:
            current = match.group(1).lstrip("*")
            params[current] = match.group(2).strip()
        elif current and line.strip():
            params[current] = f"{params[current]} {line.strip()}".strip()
    return " ".join(summary_lines), params


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's auto-generated `title`s (noise in every prompt); keep everything that constrains values."""

    def clean(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            return {
                key: clean(value, in_properties=(key == "properties"))
                for key, value in node.items()
                if in_properties or key != "title"
            }
        if isinstance(node, list):
            return [clean(item) for item in node]
        return node

    return clean(schema)


def _describe_validation_error(tool_name: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        location = ".".join(str(part) for part in error["loc"]) or "arguments"
        problems.append(f"{location}: {error['msg']}")
    return f"Invalid arguments for tool '{tool_name}': " + "; ".join(problems)


__all__ = [
    "ApprovalPolicy",
    "ApprovalPredicate",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolReportedError",
    "ToolTimeoutError",
    "as_tool",
    "tool",
]
