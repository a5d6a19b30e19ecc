"""`entities/{entityName?}/{entityKey?}` of the Durable HTTP API (docs/durable-protocol.md E.5.2)."""

from __future__ import annotations

import json

from aiohttp import web

from devhost.engine.api import DurableEngine, EntityQuery, InvalidEntityKeyError, UnknownFunctionError

from .query import QueryArgs
from .responses import compact_json, empty_response, error_response, json_response, request_text

EMPTY_KEY_SYMBOL = "$"


class EntityHandlers:
    def __init__(self, engine: DurableEngine) -> None:
        self.engine = engine

    async def handle(self, request: web.Request, args: QueryArgs, name: str | None, key: str) -> web.Response:
        method = request.method.upper()
        try:
            if method == "GET":
                if key:
                    return await self._read(_require_name(name), key)
                return await self._list(request, args, name)
            if method in {"POST", "DELETE"}:
                operation = "delete" if method == "DELETE" else (args.get("op") or "")
                return await self._signal(request, _require_name(name), key, operation)
            return empty_response(404)
        except (ValueError, InvalidEntityKeyError, UnknownFunctionError) as exc:
            # ArgumentException inside the entity route: 400 with only a Message.
            return error_response(400, str(exc))

    async def _read(self, name: str, key: str) -> web.Response:
        state = await self.engine.read_entity(name, "" if key == EMPTY_KEY_SYMBOL else key)
        if state is None or not state.exists:
            return empty_response(404)
        value = json.loads(state.state_json) if state.state_json is not None else None
        return json_response(200, value)

    async def _list(self, request: web.Request, args: QueryArgs, name: str | None) -> web.Response:
        fetch_state = bool(args.get_bool("fetchState"))
        query = EntityQuery(
            name=name,
            fetch_state=fetch_state,
            top=args.get_int("top"),
            continuation_token=request.headers.get("x-ms-continuation-token"),
            last_operation_time_from=args.get_datetime("lastOperationTimeFrom"),
            last_operation_time_to=args.get_datetime("lastOperationTimeTo"),
        )
        entities, token = await self.engine.query_entities(query)
        body = [e.to_list_item(fetch_state) for e in entities]
        return json_response(200, body, {"x-ms-continuation-token": token or ""})

    async def _signal(self, request: web.Request, name: str, key: str, operation: str) -> web.Response:
        body = await request_text(request) if request.can_read_body else ""
        input_json: str | None = None
        if body:
            if request.content_type.lower() == "application/json" and "content-type" in request.headers:
                try:
                    input_json = compact_json(json.loads(body))
                except ValueError as exc:
                    return error_response(400, f"Could not parse JSON content: {exc}")
            else:
                # Non-JSON content is passed on as a string, stored as its JSON string literal.
                input_json = json.dumps(body, ensure_ascii=False)
        await self.engine.signal_entity(name, key, operation, input_json)
        return empty_response(202)


def _require_name(name: str | None) -> str:
    if not name:
        raise ValueError("Value cannot be null. (Parameter 'entityName')")
    return name
