"""HTTP request/response data between the host and the worker, converted with the real `azure.functions` converters.

The host turns the aiohttp request into `HttpRequestData` (what the host's RpcHttp message carries); the worker
decodes it with `HttpRequestConverter.decode` and encodes the function's result with `HttpResponseConverter.encode`
into `HttpResponseData`, which the host sends. Going through the same converters keeps header casing, content-type
defaults and the str / HttpResponse rules identical to a deployed app. Both data models are plain JSON (bodies in
base64), so the same path serves functions run in the host process and in worker processes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import azure.functions as func
from aiohttp import web
from azure.functions import meta
from azure.functions.http import HttpRequestConverter, HttpResponseConverter
from multidict import CIMultiDict
from pydantic import BaseModel, ConfigDict


class ResultEncodingError(TypeError):
    """The function returned something the http output binding cannot encode (the worker fails the invocation)."""


class HttpRequestData(BaseModel):
    """One request as the worker receives it: the headers as `host_headers`, the query as `host_query` makes them."""

    model_config = ConfigDict(frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    method: str
    url: str
    headers: dict[str, str]
    query: dict[str, str]
    params: dict[str, str]
    body: bytes

    @classmethod
    def from_web_request(cls, request: web.Request, body: bytes, route_params: dict[str, str]) -> HttpRequestData:
        return cls(method=request.method, url=str(request.url), headers=host_headers(request.headers.items()),
                   query=host_query(request.query.items()), params=route_params, body=body)

    def to_func_request(self) -> func.HttpRequest:
        """The `func.HttpRequest` the Python worker builds from the host's message."""
        datum = meta.Datum(
            type="http",
            value={
                "method": _string_datum(self.method),
                "url": _string_datum(self.url),
                "headers": {k: _string_datum(v) for k, v in self.headers.items()},
                "query": {k: _string_datum(v) for k, v in self.query.items()},
                "params": {k: _string_datum(v) for k, v in self.params.items()},
                # The worker announces RawHttpBodyBytes, so the host always sends the body as bytes.
                "body": meta.Datum(value=self.body, type="bytes"),
            },
        )
        return HttpRequestConverter.decode(datum, trigger_metadata=None)


def host_headers(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """`RpcHttp.headers` as the Functions host fills it from ASP.NET's `HttpRequest.Headers` (the pairs as received).

    azure-functions-host `src/WebJobs.Script.Grpc/MessageExtensions/GrpcMessageConversionExtensions.cs` (ToRpcHttp,
    lines 155-170 at 89dc438): `http.Headers.Add(pair.Key.ToLowerInvariant(), pair.Value.ToString())` for every
    header, an empty one too (the Python worker announces neither `IgnoreEmptyValuedRpcHttpHeaders` nor
    `UseNullableValueDictionaryForHttp`). Kestrel keeps a repeated header as one `IHeaderDictionary` entry (names
    compared ignoring case) whose `StringValues` holds each value (`StringValues.Concat`), so its `ToString()` joins
    them with "," and skips empty ones, as for the query. `X-A: 1` twice reads as "1,1", like `X-A: 1,1` once; the
    worker's `HttpRequestHeaders` then looks names up ignoring case."""
    values: dict[str, list[str]] = {}
    for name, value in pairs:
        values.setdefault(name.lower(), []).append(value)
    return {name: string_values_text(given) for name, given in values.items()}


def string_values_text(values: Iterable[str]) -> str:
    """.NET's `StringValues.ToString()` of several values (dotnet/runtime Microsoft.Extensions.Primitives
    `StringValues.GetJoinedStringValueFromArray`): the non-empty ones joined with ",", no space."""
    return ",".join(value for value in values if value)


def host_query(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """`RpcHttp.query` as the Functions host fills it from ASP.NET's `HttpRequest.Query` (the decoded pairs in order).

    azure-functions-host `src/WebJobs.Script.Grpc/MessageExtensions/GrpcMessageConversionExtensions.cs` (ToRpcHttp,
    lines 139-152 at 89dc438) adds one entry per name, `pair.Value.ToString()`, and skips it when that is empty (the
    Python worker does not announce `UseNullableValueDictionaryForHttp`). `StringValues.ToString()` (dotnet/runtime
    Microsoft.Extensions.Primitives `StringValues.GetJoinedStringValueFromArray`) joins the values with "," and skips
    empty ones. ASP.NET groups names ignoring case (aspnetcore `QueryFeature.KvpAccumulator`, OrdinalIgnoreCase), and
    a repeated name takes the spelling of its second occurrence (the accumulator re-sets it under that key, and its
    `AdaptiveCapacityDictionary` replaces the key). So `?a=1&a=&a=2` is `{"a": "1,2"}`, as `?a=1,2` would be; `?a=`
    leaves `a` out."""
    values: dict[str, list[str]] = {}
    spelling: dict[str, str] = {}
    for name, value in pairs:
        key = _ordinal_upper(name)
        seen = values.setdefault(key, [])
        if len(seen) < 2:
            spelling[key] = name
        seen.append(value)
    joined = {spelling[key]: string_values_text(seen) for key, seen in values.items()}
    return {name: value for name, value in joined.items() if value}


def _ordinal_upper(name: str) -> str:
    """The key .NET's OrdinalIgnoreCase compares by: each character's simple upper case (never 'ß' -> 'SS')."""
    return "".join(upper if len(upper := char.upper()) == 1 else char for char in name)


class HttpResponseData(BaseModel):
    """The function's http result as the host sends it (headers in order, repeated names kept)."""

    model_config = ConfigDict(frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @classmethod
    def from_result(cls, result: Any) -> HttpResponseData:
        """Encode a returned `func.HttpResponse` or `str` like the worker does."""
        try:
            datum = HttpResponseConverter.encode(result, expected_type=None)
        except NotImplementedError as exc:
            raise ResultEncodingError(
                "unable to encode outgoing TypedData: unsupported type \"http\" for Python type "
                f'"{type(result).__name__}"') from exc
        if datum.type == "string":
            return cls(status=200, headers=[("Content-Type", "text/plain; charset=utf-8")],
                       body=str(datum.value).encode("utf-8"))
        value = datum.value
        headers = [(name, header.value) for name, header in value["headers"].items()]
        for cookie in value.get("cookies") or []:
            headers += [("Set-Cookie", morsel.OutputString()) for morsel in cookie.values()]
        return cls(status=int(value["status_code"].value), headers=headers, body=value["body"].value or b"")

    def to_web_response(self) -> web.Response:
        headers: CIMultiDict[str] = CIMultiDict()
        for name, value in self.headers:
            headers.add(name, value)
        return web.Response(status=self.status, body=self.body, headers=headers)


def _string_datum(value: str) -> meta.Datum:
    return meta.Datum(value=value, type="string")
