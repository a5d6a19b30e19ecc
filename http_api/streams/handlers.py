"""The stream routes: the same lookups and problems as the polls (401/404 before the stream starts), then SSE.

The run is found with the poll routes' own lookups (`runs.run_or_404`, `workflows._workflow_run_or_404`), so access
rules added to those lookups apply to streams too. Where to start: `Last-Event-ID` (what browsers send when they
reconnect), else `?after=<cursor>`, else `?continuation_token=` (a poll's token: the stream goes on from that poll),
else the beginning of the run.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import azure.durable_functions as df
import azure.functions as func
from azurefunctions.extensions.http.fastapi import Request, Response

from agent_runs.services import RunServices
from agent_runtime.settings_snapshot import current_settings
from http_api import run_views, workflow_views
from http_api.access import RightsKey, rights_key
from http_api.adapter import http_endpoint, query_model
from http_api.caller import current_principal
from http_api.fastapi_bridge import serve
from http_api.problems import ApiProblem
from http_api.request_context import base_url, verify_token
from http_api.runs import is_workflow_run, run_or_404
from http_api.workflows import _workflow_run_or_404

from . import sse
from .connection import EventStreamResponse, Position, StreamPosition, stream_events
from .cursor import Cursor
from .feeds import Feed, RunFeed, WorkflowFeed
from .query import StreamQuery
from .settings import StreamSettings
from .watchers import REGISTRY, Lease


async def stream_run(req: Request, client: df.DurableOrchestrationClient) -> Response:
    """`GET /api/runs/{run_id}/stream`."""
    return await serve(_open_run, req, client)


async def stream_workflow_run(req: Request, client: df.DurableOrchestrationClient) -> Response:
    """`GET /api/workflows/runs/{run_id}/stream`."""
    return await serve(_open_workflow_run, req, client)


@http_endpoint
async def _open_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> Response:
    services = RunServices.current()
    run = await run_or_404(services.store, req.route_params["run_id"])
    if is_workflow_run(run):
        raise ApiProblem(
            404, "run_is_a_workflow", "This run is a workflow run",
            f"Stream it at /api/workflows/runs/{run.run_id}/stream.", field="path.run_id",
            workflow_run=f"{base_url(req)}/api/workflows/runs/{run.run_id}/stream",
        )
    position = Position(start_cursor(req, services, run_views.TOKEN_SCOPE, run.run_id))
    links, viewer = base_url(req), current_principal()
    return await open_stream(lambda: RunFeed(services, client, run, links, viewer), "run", run.run_id, position,
                             links, rights_key(viewer))


@http_endpoint
async def _open_workflow_run(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> Response:
    services = RunServices.current()
    record = await _workflow_run_or_404(services, req.route_params["run_id"])
    position = Position(start_cursor(req, services, workflow_views.TOKEN_SCOPE, record.run_id))
    links, viewer = base_url(req), current_principal()
    return await open_stream(lambda: WorkflowFeed(services, client, record, links, viewer), "workflow", record.run_id,
                             position, links, rights_key(viewer))


async def open_stream(make_feed: Callable[[], Feed], kind: str, run_id: str, position: StreamPosition,
                      links: str = "", viewer: RightsKey = ()) -> Response:
    """The SSE response of one client: the run's shared watcher (started on first use, waited for its first reading,
    its failure raised before anything is sent), `position` deciding what the client is sent. A client that has had
    everything (back after `done`) gets 204 No Content: an `EventSource` stops reconnecting at a 204. `links`: the
    root of the links the feed builds; clients share a watcher only with the same one (locally the request's host).
    `viewer`: whom the feed's views say what they may do for (`access.rights_key`): shared only with the same one."""
    settings = current_settings(StreamSettings)
    lease = Lease(REGISTRY.acquire(kind, run_id, make_feed, settings, links, viewer))
    try:
        await lease.watcher.ready()
        if lease.watcher.failure is not None:  # nothing streamed yet: answer with the problem (503 for an outage)
            raise lease.watcher.failure
    except BaseException:
        # Also when cancelled while the first reading is under way (the client left, the function timed out): a
        # subscription never released keeps the watcher polling the run for as long as it runs.
        lease.release()
        raise
    if position.delivered(lease.watcher):
        lease.release()
        return Response(status_code=204, headers=sse.HEADERS)
    events = stream_events(lease, position, settings.ping_seconds, settings.max_seconds)
    weakref.finalize(events, lease.release)  # a response never sent (client gone first) still lets the watcher go
    return EventStreamResponse(events, headers=sse.HEADERS)


def start_cursor(req: func.HttpRequest, services: RunServices, scope: str, run_id: str) -> Cursor:
    query = query_model(req, StreamQuery)
    candidates = (("header.last-event-id", req.headers.get("last-event-id")), ("query.after", query.after))
    for field, raw in candidates:
        if raw:
            try:
                return Cursor.parse(raw)
            except ValueError as error:
                raise ApiProblem(400, "invalid_cursor", "Invalid stream cursor", str(error), field=field) from error
    token = verify_token(services, query.continuation_token, scope, run_id)
    seq = token.get("seq") if token else None
    return Cursor(seq=seq) if isinstance(seq, int) else Cursor()
