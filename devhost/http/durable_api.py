"""The Durable extension's HTTP API (HttpApiHandler), served both as the local RPC API and as the public webhooks.

Route order, status codes and bodies follow `HttpApiHandler.HandleRequestAsync` (docs/durable-protocol.md §2.2, E.5):
`orchestrators/{functionName}/{instanceId?}`, `entities/{entityName?}/{entityKey?}`,
`instances/{instanceId?}/{operation?}`, `instances/{instanceId?}/raiseEvent/{eventName}`; anything else is 404.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

from devhost.engine.api import (
    DurableEngine,
    InstanceExistsError,
    InstanceGoneError,
    InstanceNotFoundError,
    InstanceQuery,
    InstanceStatus,
    InvalidEntityKeyError,
    InvalidInstanceIdError,
    InvalidOperationError,
    RuntimeStatus,
    UnknownFunctionError,
)

from .client_binding import ManagementUrls, management_urls
from .entities_api import EntityHandlers
from .query import ArgumentError, QueryArgs
from .responses import compact_json, empty_response, error_response, json_response, request_text
from .routes import RouteTemplate, aspnet_url_decode

log = logging.getLogger("devhost.durable")

START_ROUTE = RouteTemplate("orchestrators/{functionName}/{instanceId?}")
ENTITY_ROUTE = RouteTemplate("entities/{entityName?}/{entityKey?}")
INSTANCES_ROUTE = RouteTemplate("instances/{instanceId?}/{operation?}")
RAISE_EVENT_ROUTE = RouteTemplate("instances/{instanceId?}/raiseEvent/{eventName}")

RUNNING_STATES = {RuntimeStatus.Running, RuntimeStatus.Pending, RuntimeStatus.ContinuedAsNew, RuntimeStatus.Suspended}
# Providers whose DurabilityProvider.SupportsPollFreeWait is true (Netherite's; Azure Storage and MSSQL keep the base
# class's false): the handler then waits whenever `timeout` is given, ignoring `pollingInterval`. The others refuse a
# `pollingInterval` longer than `timeout` (400) and wait only when both are given.
POLL_FREE_PROVIDERS = frozenset({"Netherite"})
_BY_CODE = {status.dtfx_code: status for status in RuntimeStatus}
# The enums Enum.TryParse reads: the query's OrchestrationRuntimeStatus, the purge's DTFx OrchestrationStatus
_ORCHESTRATION_STATUS_ENUM = {status.value: status.dtfx_code for status in RuntimeStatus}
_RUNTIME_STATUS_ENUM = {"Unknown": -1, **_ORCHESTRATION_STATUS_ENUM}
TERMINAL_STATES = {RuntimeStatus.Completed, RuntimeStatus.Failed, RuntimeStatus.Canceled, RuntimeStatus.Terminated}


def _is_json_media_type(request: web.Request) -> bool:
    return request.content_type.lower() == "application/json" and "content-type" in request.headers


class DurableHttpApi:
    """Maps the extension's HTTP API onto `DurableEngine`; one instance serves both base paths."""

    def __init__(self, engine: DurableEngine, *, hub_name: str, webhook_code: str | None = None) -> None:
        self.engine = engine
        self.hub_name = hub_name
        self.webhook_code = webhook_code  # put into the links when devhost checks keys
        self.entities = EntityHandlers(engine)
        self._instance_ops: dict[str, Callable[[web.Request, QueryArgs, str], Awaitable[web.Response]]] = {
            "terminate": self._terminate,
            "suspend": self._suspend,
            "resume": self._resume,
            "rewind": self._rewind,
            "restart": self._restart,
        }

    async def handle(self, request: web.Request, path: str) -> web.Response:
        try:
            # Percent-decoded twice, as ASP.NET decodes it (never a '+' into a space: that is the query string's rule;
            # the Python client puts instance ids into the path as they are): Kestrel decodes Request.Path, the host's
            # HttpRequestMessageFeature joins it back into RequestUri keeping what still reads as %XX, and the
            # extension's route match decodes RequestUri.AbsolutePath again (string to PathString). %2F is never
            # decoded, so it stays inside its segment ('a%2Fb' is the instance id 'a%2Fb', not a path 'a/b').
            return await self._route(request, aspnet_url_decode(aspnet_url_decode(path)))
        except (UnknownFunctionError, InvalidInstanceIdError, InvalidEntityKeyError, InvalidOperationError,
                ArgumentError) as exc:
            # The extension's ArgumentException catch-all.
            return error_response(400, "One or more of the arguments submitted is incorrect", exc)
        except InstanceNotFoundError:
            return empty_response(404)
        except InstanceGoneError:
            return empty_response(410)
        except web.HTTPException:
            # aiohttp's own answers, e.g. 413 for a body past the host's 100 MB limit: the Functions host refuses
            # such a request before any handler (the catch-all below made it a 500).
            raise
        except Exception as exc:
            log.exception("durable HTTP API request failed: %s %s", request.method, request.rel_url)
            return error_response(500, "Something went wrong while processing your request", exc)

    async def _route(self, request: web.Request, path: str) -> web.Response:
        method = request.method.upper()
        args = QueryArgs(request.query)
        values = START_ROUTE.match(path, decode=False)
        if values is not None:
            if method != "POST":
                return empty_response(404)
            return await self._start(request, args, values["functionName"], values.get("instanceId"))
        values = ENTITY_ROUTE.match(path, decode=False)
        if values is not None:
            return await self.entities.handle(request, args, values.get("entityName"), values.get("entityKey", ""))
        values = INSTANCES_ROUTE.match(path, decode=False)
        if values is not None:
            response = await self._instances(request, args, values.get("instanceId"), values.get("operation"))
            if response is not None:
                return response
        values = RAISE_EVENT_ROUTE.match(path, decode=False)
        if values is not None and "instanceId" in values:
            if method != "POST":
                return empty_response(404)
            return await self._raise_event(request, values["instanceId"], values["eventName"])
        return empty_response(404)

    async def _instances(
        self, request: web.Request, args: QueryArgs, instance_id: str | None, operation: str | None
    ) -> web.Response | None:
        method = request.method.upper()
        if instance_id is None:
            if method == "GET":
                return await self._query(request, args)
            if method == "DELETE":
                return await self._purge_by(args)
            return empty_response(404)
        if operation is None:
            if method == "GET":
                return await self._status(request, args, instance_id)
            if method == "DELETE":
                return await self._purge(instance_id)
            return empty_response(404)
        if method != "POST":
            return empty_response(404)
        handler = self._instance_ops.get(operation.lower())
        # An unknown POST operation falls through to the raise-event route (and then 404), as in the extension.
        return await handler(request, args, instance_id) if handler else None

    # ----- links -----

    def _check_status_response(self, request: web.Request, args: QueryArgs, instance_id: str) -> web.Response:
        links = self._links(request, args, instance_id)
        return json_response(
            202,
            links.check_status_body(),
            {"Location": links.status_query_get_uri, "Retry-After": "10"},
        )

    def _links(self, request: web.Request, args: QueryArgs, instance_id: str) -> ManagementUrls:
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(str(request.url)))
        task_hub = (args.get("taskHub") or "").strip() or self.hub_name
        connection = (args.get("connection") or "").strip() or None
        return management_urls(origin, instance_id, task_hub=task_hub, connection=connection, code=self.webhook_code)

    # ----- start / wait -----

    async def _start(
        self, request: web.Request, args: QueryArgs, function_name: str, instance_id: str | None
    ) -> web.Response:
        body = await request_text(request) if request.can_read_body else ""
        input_json = body if body else None
        if input_json is not None:
            try:
                json.loads(input_json)
            except ValueError as exc:
                return error_response(400, "Invalid JSON content", exc)
        new_id = instance_id or uuid.uuid4().hex
        try:
            new_id = await self.engine.start_new(function_name, new_id, input_json, args.get("version"))
        except InstanceExistsError as exc:
            return error_response(409, str(exc))
        return await self._respond_started(request, args, new_id)

    async def _respond_started(self, request: web.Request, args: QueryArgs, instance_id: str) -> web.Response:
        timeout = args.get_timespan_seconds("timeout")
        polling_interval = args.get_timespan_seconds("pollingInterval")
        if self.engine.options.storage_provider in POLL_FREE_PROVIDERS:
            polling_interval = timeout  # (the handler's override for a provider with SupportsPollFreeWait)
        if timeout is not None and polling_interval is not None:
            if polling_interval > timeout:  # WaitForCompletionOrCreateCheckStatusResponseAsync's ArgumentException
                raise ArgumentError(f"Total timeout {_dotnet_double(timeout)} should be bigger than retry timeout "
                                    f"{_dotnet_double(polling_interval)}")
            return await self._wait_or_check_status(request, args, instance_id, timeout)
        return self._check_status_response(request, args, instance_id)

    async def _wait_or_check_status(
        self, request: web.Request, args: QueryArgs, instance_id: str, timeout: float
    ) -> web.Response:
        """WaitForCompletionOrCreateCheckStatusResponseAsync, waiting on the engine instead of polling."""
        try:
            status = await self.engine.wait_for_status(instance_id, set(TERMINAL_STATES), timeout=max(timeout, 0.0))
        except TimeoutError:
            status = None
        if status is None or status.runtime_status not in TERMINAL_STATES:
            return self._check_status_response(request, args, instance_id)
        if status.runtime_status == RuntimeStatus.Completed:
            return json_response(200, status.to_json()["output"])
        return self._status_response(request, status, return_500_on_failure=False)

    # ----- status and queries -----

    async def _status(self, request: web.Request, args: QueryArgs, instance_id: str) -> web.Response:
        status = await self.engine.get_status(
            instance_id,
            show_history=bool(args.get_bool("showHistory")),
            show_history_output=bool(args.get_bool("showHistoryOutput")),
            show_input=args.get_bool("showInput") is not False,
        )
        if status is None:
            return empty_response(404)
        return self._status_response(
            request, status, return_500_on_failure=bool(args.get_bool("returnInternalServerErrorOnFailure"))
        )

    @staticmethod
    def _status_response(request: web.Request, status: InstanceStatus, *, return_500_on_failure: bool) -> web.Response:
        if status.runtime_status in RUNNING_STATES:
            headers = {"Location": str(request.url), "Retry-After": "5"}
            return json_response(202, status.to_json(), headers)
        code = 500 if status.runtime_status == RuntimeStatus.Failed and return_500_on_failure else 200
        return json_response(code, status.to_json())

    async def _query(self, request: web.Request, args: QueryArgs) -> web.Response:
        query = InstanceQuery(
            created_time_from=args.get_datetime("createdTimeFrom"),
            created_time_to=args.get_datetime("createdTimeTo"),
            runtime_status=self._status_filter(args, _RUNTIME_STATUS_ENUM),
            instance_id_prefix=args.get("instanceIdPrefix"),
            top=args.get_int("top"),
            continuation_token=request.headers.get("x-ms-continuation-token"),
            show_input=args.get_bool("showInput") is not False,
        )
        statuses, token = await self.engine.query_instances(query)
        return json_response(200, [s.to_json() for s in statuses], {"x-ms-continuation-token": token or ""})

    def _status_filter(self, args: QueryArgs, members: dict[str, int]) -> list[RuntimeStatus] | None:
        """`runtimeStatus` as the handler parses it (Enum.TryParse: names or numbers). A value no status has filters
        out every instance rather than none: the providers pass it on (MSSQL casts it, Azure Storage's Enum.Parse of
        its text takes a number), except that Azure Storage cannot parse the name of Unknown (-1): ArgumentException."""
        codes = args.get_enum_list("runtimeStatus", members)
        if codes is None:
            return None
        if -1 in codes and "Unknown" in members and self.engine.options.storage_provider == "AzureStorage":
            raise ArgumentError("Requested value 'Unknown' was not found.")
        return [_BY_CODE[code] for code in codes if code in _BY_CODE]

    # ----- purge -----

    async def _purge(self, instance_id: str) -> web.Response:
        if not instance_id.startswith("@"):
            status = await self.engine.get_status(instance_id)
            if status is None:
                return empty_response(404)
            if status.runtime_status not in TERMINAL_STATES:
                return json_response(
                    412,
                    "Only orchestrations in a terminal state can be purged, but the orchestration with instance ID "
                    f"{instance_id} has status {status.runtime_status.value}",
                )
        deleted = await self.engine.purge(instance_id)
        return json_response(200, {"instancesDeleted": deleted})

    async def _purge_by(self, args: QueryArgs) -> web.Response:
        created_from = args.get_datetime("createdTimeFrom")
        if created_from is None:
            return json_response(400, "Please provide value for 'createdTimeFrom' parameter.")
        query = InstanceQuery(
            created_time_from=created_from,
            created_time_to=args.get_datetime("createdTimeTo") or self.engine.now(),
            runtime_status=self._status_filter(args, _ORCHESTRATION_STATUS_ENUM),
        )
        deleted = await self.engine.purge_by(query)
        if deleted == 0:
            return empty_response(404)
        return json_response(200, {"instancesDeleted": deleted})

    # ----- instance operations -----

    async def _require_running(self, instance_id: str) -> web.Response | None:
        """404 unknown / 410 terminal, checked before the operation like the extension does."""
        status = await self.engine.get_status(instance_id, show_input=False)
        if status is None:
            return empty_response(404)
        if status.runtime_status in TERMINAL_STATES:
            return empty_response(410)
        return None

    async def _lifecycle(
        self, instance_id: str, reason: str | None, operation: Callable[[str, str | None], Awaitable[None]]
    ) -> web.Response:
        refusal = await self._require_running(instance_id)
        if refusal is not None:
            return refusal
        await operation(instance_id, reason)
        return empty_response(202)

    async def _terminate(self, request: web.Request, args: QueryArgs, instance_id: str) -> web.Response:
        return await self._lifecycle(instance_id, args.get("reason"), self.engine.terminate)

    async def _suspend(self, request: web.Request, args: QueryArgs, instance_id: str) -> web.Response:
        return await self._lifecycle(instance_id, args.get("reason"), self.engine.suspend)

    async def _resume(self, request: web.Request, args: QueryArgs, instance_id: str) -> web.Response:
        return await self._lifecycle(instance_id, args.get("reason"), self.engine.resume)

    async def _rewind(self, request: web.Request, args: QueryArgs, instance_id: str) -> web.Response:
        status = await self.engine.get_status(instance_id, show_input=False)
        if status is None:
            # The extension's message really contains the "$" (a stray character in its interpolated string).
            return json_response(404, f'No orchestration with instance ID "${instance_id}" found.')
        if status.runtime_status != RuntimeStatus.Failed:
            return json_response(
                412,
                f"This orchestration has status {status.runtime_status.value}, but only orchestrations in the "
                '"Failed" state can be rewound.',
            )
        await self.engine.rewind(instance_id, args.get("reason"))
        return empty_response(202)

    async def _restart(self, request: web.Request, args: QueryArgs, instance_id: str) -> web.Response:
        with_new_id = args.get_bool("restartWithNewInstanceId")
        try:
            new_id = await self.engine.restart(instance_id, new_instance_id=with_new_id is not False)
        except InstanceNotFoundError as exc:
            return error_response(400, "InstanceId does not match a valid orchestration instance.", exc)
        except InstanceExistsError as exc:
            return error_response(409, "A non-terminal instance with this instance ID already exists.", exc)
        try:
            return await self._respond_started(request, args, new_id)
        except ArgumentError as exc:  # (the restart handler's own ArgumentException catch)
            return error_response(400, "InstanceId does not match a valid orchestration instance.", exc)

    async def _raise_event(self, request: web.Request, instance_id: str, event_name: str) -> web.Response:
        refusal = await self._require_running(instance_id)
        if refusal is not None:
            return refusal
        if not _is_json_media_type(request):
            return error_response(400, "Only application/json request content is supported")
        body = await request_text(request)
        input_json: str | None = None
        if body:
            try:
                input_json = compact_json(json.loads(body))
            except ValueError as exc:
                return error_response(400, "Invalid JSON content", exc)
        await self.engine.raise_event(instance_id, event_name, input_json)
        return empty_response(202)


def _dotnet_double(value: float) -> str:
    """double.ToString() for the values a wait takes: 5 is "5", 0.5 is "0.5"."""
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text.upper()
