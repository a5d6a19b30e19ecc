"""What the Functions host puts into an `InvocationRequest` and reads out of an `InvocationResponse`, per trigger.

HTTP: the request as `RpcHttp` (body as bytes: the worker announces RawHttpBodyBytes), the response from the
`$return` or a named http output (`RpcHttp` with status, headers, cookies, body; a plain string is a text/plain 200).
Durable triggers: the trigger payload as a string, the function's JSON result back (durable-protocol.md §1.5).
The durable client binding: its JSON as a string. Failures: the worker's `"{Type}: {message}"` text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from http.cookies import SimpleCookie
from typing import Any

from devhost.http.conversion import HttpRequestData, HttpResponseData
from devhost.invoke import ActivityOutcome, activity_failure_text
from devhost.protocol.actions import OrchestratorOutput, compact_json
from devhost.protocol.entity_messages import BatchResult, EntityInternalError, parse_batch_result
from devhost.worker import rpc


class WorkerInvocationError(Exception):
    """The worker answered the invocation with a failure: `message` is its `"{Type}: {message}"` text."""

    def __init__(self, message: str, stack_trace: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.stack_trace = stack_trace


REQUIRES_ROUTE_PARAMETERS = "RequiresRouteParameters"


def http_binding(request: HttpRequestData) -> Any:
    return rpc.TypedData(http=rpc.RpcHttp(
        method=request.method, url=request.url, headers=request.headers, query=request.query,
        params=request.params, body=rpc.TypedData(bytes=request.body),
    ))


def proxied_http_binding(request: HttpRequestData, capabilities: Mapping[str, str]) -> Any:
    """HTTP v2: the request itself goes to the worker's web server, so the message carries at most its route values
    (azure-functions-host GrpcMessageConversionExtensions.cs, ToRpcHttp lines 108-126 at 89dc438): no method, URL,
    headers, query or body; the function reads those from the proxied request, whose path and query the host's proxy
    forwards as sent (Server/DefaultHttpProxyService.cs line 90: YARP's forwarder with its default transform)."""
    params = request.params if capabilities.get(REQUIRES_ROUTE_PARAMETERS) else {}
    return rpc.TypedData(http=rpc.RpcHttp(params=params))


def string_binding(text: str) -> Any:
    return rpc.TypedData(string=text)


def activity_input(input_text: str | None) -> Any:
    """DF unwraps `TaskScheduled.Input`'s one-element array; JSON goes as a string, a missing input as JSON null."""
    return rpc.TypedData(json="null") if input_text is None else rpc.TypedData(string=input_text)


def raise_for_failure(response: Any) -> None:
    if response.result.status != rpc.StatusResult.Success:
        raise WorkerInvocationError(response.result.exception.message, response.result.exception.stack_trace)


def typed_value(data: Any) -> Any:
    """The Python value of a returned TypedData (None when the function returned nothing)."""
    kind = data.WhichOneof("data") if data is not None else None
    if kind is None:
        return None
    if kind == "json":
        return json.loads(data.json)
    return getattr(data, kind)


def json_text(data: Any) -> str | None:
    """The JSON text the host keeps for a returned value (json as is, other scalars serialised)."""
    kind = data.WhichOneof("data")
    if kind is None:
        return None
    if kind == "json":
        return str(data.json)
    return json.dumps(getattr(data, kind))


def http_response(response: Any, outputs: tuple[str, ...]) -> HttpResponseData:
    """A set named http output wins over the return value, as in the worker's host."""
    chosen = next((p.data for name in outputs for p in response.output_data if p.name == name), None)
    data = chosen if chosen is not None else response.return_value
    kind = data.WhichOneof("data")
    if kind == "string":
        return HttpResponseData(status=200, headers=[("Content-Type", "text/plain; charset=utf-8")],
                                body=data.string.encode("utf-8"))
    if kind != "http":
        raise WorkerInvocationError(f"the http output of the function is {kind or 'empty'}, not an HTTP response")
    http = data.http
    headers = list(http.headers.items())
    headers += [("Set-Cookie", _cookie_header(c)) for c in http.cookies]
    body = typed_value(http.body)
    if isinstance(body, str):
        body = body.encode("utf-8")
    elif body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode("utf-8")
    return HttpResponseData(status=int(http.status_code or 200), headers=headers, body=body or b"")


def _cookie_header(cookie: Any) -> str:
    jar: SimpleCookie = SimpleCookie()
    jar[cookie.name] = cookie.value
    morsel = jar[cookie.name]
    if cookie.HasField("domain"):
        morsel["domain"] = cookie.domain.value
    if cookie.HasField("path"):
        morsel["path"] = cookie.path.value
    if cookie.HasField("expires"):
        morsel["expires"] = cookie.expires.value.ToDatetime().strftime("%a, %d %b %Y %H:%M:%S GMT")
    if cookie.HasField("secure") and cookie.secure.value:
        morsel["secure"] = True
    if cookie.HasField("http_only") and cookie.http_only.value:
        morsel["httponly"] = True
    if cookie.HasField("max_age"):
        morsel["max-age"] = str(int(cookie.max_age.value))
    same_site = {rpc.RpcHttpCookie.SameSite.Lax: "Lax", rpc.RpcHttpCookie.SameSite.Strict: "Strict",
                 rpc.RpcHttpCookie.SameSite.ExplicitNone: "None"}.get(cookie.same_site)
    if same_site:
        morsel["samesite"] = same_site
    return morsel.OutputString()


def activity_outcome(name: str, response: Any) -> ActivityOutcome:
    if response.result.status != rpc.StatusResult.Success:
        failure = response.result.exception
        return activity_failure_text(name, failure.message, failure.stack_trace)
    returned = response.return_value
    text = json_text(returned) if returned.WhichOneof("data") else "null"
    # The host parses the worker's JSON and re-serialises it compactly (Newtonsoft Formatting.None).
    return ActivityOutcome(ok=True, result_json=compact_json(json.loads(text or "null")))


def orchestrator_output(response: Any, previous: OrchestratorOutput | None = None) -> OrchestratorOutput:
    if response.result.status != rpc.StatusResult.Success:
        return OrchestratorOutput.from_failure_text(response.result.exception.message)
    text = json_text(response.return_value)
    try:
        return OrchestratorOutput.from_state_json(text or "null", previous)
    except (ValueError, TypeError) as exc:
        return OrchestratorOutput(error=f"Out of proc orchestrators must return a valid JSON schema: {exc}",
                                  raw_failure=True)


def entity_result(name: str, response: Any, batch_size: int) -> BatchResult:
    if response.result.status != rpc.StatusResult.Success:
        raise EntityInternalError(f"entity function '{name}' failed: {response.result.exception.message}")
    return parse_batch_result(json_text(response.return_value) or "null", batch_size)
