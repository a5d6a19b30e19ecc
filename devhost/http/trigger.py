"""Calling one HTTP-triggered user function the way the Python worker does.

Keyword arguments by binding name (trigger request, `durableClient` JSON string, `func.Out` for named http outputs),
plus `context` when the function declares it; async functions run on the host loop, sync ones on a thread pool.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

import azure.functions as func
from azure.functions import _abc

from devhost.app_loader import FunctionInfo

from .routes import RouteTemplate


@dataclass(frozen=True)
class DurableClientInput:
    name: str
    task_hub: str | None = None
    connection: str | None = None


@dataclass(frozen=True)
class HttpTriggerSpec:
    """Everything the host needs to serve one HTTP-triggered function."""

    function_name: str
    route: str
    methods: tuple[str, ...] | None
    request_param: str
    user_function: Callable[..., Any]
    durable_client: DurableClientInput | None = None
    http_outputs: tuple[str, ...] = ()
    # The function has a `$return` http binding: the worker encodes the returned value even when a named output is set
    returns: bool = True
    # HTTP v2 mode (devhost.http.streaming): the function gets a fastapi.Request; `streams`: it returns a stream
    http_v2: bool = False
    streams: bool = False
    template: RouteTemplate = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "template", RouteTemplate(self.route))

    @cached_property
    def takes_context(self) -> bool:
        """The function declares `context`: read from its signature once, as the worker does when it loads it."""
        return "context" in inspect.signature(self.user_function).parameters

    @cached_property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.user_function)

    @classmethod
    def from_function_info(cls, info: FunctionInfo, *, http_v2: bool = False) -> HttpTriggerSpec:
        """Build the spec from the loader's index entry (its `bindings` are the worker's raw binding JSON)."""
        client = next((b for b in info.bindings if b.get("type") == "durableClient"), None)
        return cls(
            function_name=info.name,
            route=info.route or info.name,
            methods=tuple(info.methods) if info.methods else None,
            request_param=info.trigger_param,
            user_function=info.fn,
            durable_client=(
                DurableClientInput(client["name"], client.get("taskHub"), client.get("connectionName"))
                if client
                else None
            ),
            http_outputs=tuple(
                b["name"]
                for b in info.bindings
                if b.get("type") == "http" and str(b.get("direction", "")).upper() == "OUT" and b["name"] != "$return"
            ),
            http_v2=http_v2,
            streams=info.streams,
            returns=any(b.get("name") == "$return" for b in info.bindings),
        )


class _OutParam(func.Out[Any]):
    """The worker's `Out` holder for a named output binding."""

    def __init__(self) -> None:
        self._value: Any = None

    def set(self, val: Any) -> None:
        self._value = val

    def get(self) -> Any:
        return self._value


class _TraceContext(_abc.TraceContext):
    def __init__(self) -> None:
        self._attributes: dict[str, str] = {}
        self._trace_parent = f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-00"

    @property
    def trace_parent(self) -> str:
        return self._trace_parent

    @property
    def trace_state(self) -> str:
        return ""

    @property
    def attributes(self) -> dict[str, str]:
        return self._attributes


class _RetryContext(_abc.RetryContext):
    @property
    def retry_count(self) -> int:
        return 0

    @property
    def max_retry_count(self) -> int:
        return 0

    @property
    def exception(self) -> _abc.RpcException | None:
        return None


class InvocationContext(func.Context):
    """`func.Context` for one invocation (passed when the function has a `context` parameter)."""

    def __init__(self, function_name: str, function_directory: str) -> None:
        self._invocation_id = str(uuid.uuid4())
        # The worker hands out a threading.local instance here, whatever the annotation says.
        self._thread_local = threading.local()
        self._function_name = function_name
        self._function_directory = function_directory
        self._trace = _TraceContext()
        self._retry = _RetryContext()

    @property
    def invocation_id(self) -> str:
        return self._invocation_id

    @property
    def thread_local_storage(self) -> threading.local:  # type: ignore[override]
        return self._thread_local

    @property
    def function_name(self) -> str:
        return self._function_name

    @property
    def function_directory(self) -> str:
        return self._function_directory

    @property
    def trace_context(self) -> _abc.TraceContext:
        return self._trace

    @property
    def retry_context(self) -> _abc.RetryContext:
        return self._retry


async def invoke_http_function(
    spec: HttpTriggerSpec,
    request: Any,
    *,
    client_binding_json: str | None,
    executor: Executor | None,
    function_directory: str,
) -> Any:
    """Run the user function; returns the http result (a set named output wins over the return value).

    `request` is a `func.HttpRequest`, or in HTTP v2 mode the extension's `fastapi.Request`."""
    kwargs: dict[str, Any] = {spec.request_param: request}
    if spec.durable_client is not None:
        kwargs[spec.durable_client.name] = client_binding_json
    outputs = {name: _OutParam() for name in spec.http_outputs}
    kwargs.update(outputs)
    if spec.takes_context and "context" not in kwargs:
        kwargs["context"] = InvocationContext(spec.function_name, function_directory)
    if spec.is_async:
        result = await spec.user_function(**kwargs)
    else:
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(executor, partial(spec.user_function, **kwargs))
    for out in outputs.values():
        if out.get() is not None:
            if spec.returns and not spec.http_v2:
                from .conversion import HttpResponseData

                HttpResponseData.from_result(result)  # raises for None / a dict, as the worker's encoding does
            return out.get()
    return result
