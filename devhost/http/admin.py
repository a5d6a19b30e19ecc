"""devhost's own test-control endpoints under `/admin/devhost/` (not part of Azure; used by subprocess tests).

* `POST /admin/devhost/idle?timeout=30&skipTimers=false` -> 200 once nothing is runnable (504 on timeout).
* `POST /admin/devhost/advance?seconds=N` -> 200 `{"now": ...}` after moving the virtual clock and running until idle
  (409 when the host runs on real time).
"""

from __future__ import annotations

import math

from aiohttp import web

from devhost.engine.api import DurableEngine, InvalidOperationError
from devhost.protocol.timefmt import dotnet_iso

from .query import QueryArgs
from .responses import error_response, json_response

ADMIN_PREFIX = "/admin/devhost/"
_MAX_ADVANCE_SECONDS = 1e12  # well inside timedelta's range (~8.6e13 s), and 30 000 years


class AdminHandler:
    def __init__(self, engine: DurableEngine) -> None:
        self.engine = engine

    async def handle(self, request: web.Request, action: str) -> web.Response:
        if request.method != "POST":
            return web.Response(status=405)
        args = QueryArgs(request.query)
        if action == "idle":
            timeout = args.get_float("timeout")
            if timeout is not None and not math.isfinite(timeout):  # a NaN loop timer would corrupt the loop's heap
                return error_response(400, "'timeout' must be a finite number of seconds")
            try:
                await self.engine.run_until_idle(timeout or 30.0, skip_timers=bool(args.get_bool("skipTimers")))
            except TimeoutError as exc:
                return error_response(504, "the host did not become idle in time", exc)
            return json_response(200, {"now": dotnet_iso(self.engine.now())})
        if action == "advance":
            seconds = args.get_float("seconds")
            if seconds is None or not 0 <= seconds < _MAX_ADVANCE_SECONDS:  # (NaN and inf: timedelta refuses them)
                return error_response(400, "'seconds' must be a non-negative number")
            try:
                await self.engine.advance(seconds)
            except InvalidOperationError as exc:
                return error_response(409, "the host runs on real time (start it with --virtual-clock)", exc)
            return json_response(200, {"now": dotnet_iso(self.engine.now())})
        return web.Response(status=404)
