"""The extension's built-in HTTP activity (`BuiltIn::HttpActivity`) behind `context.call_http`."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from devhost.invoke import ActivityOutcome
from devhost.protocol.actions import compact_json
from devhost.protocol.replay import BUILTIN_HTTP_ACTIVITY

_TIMEOUT = aiohttp.ClientTimeout(total=100)


async def run_http_activity(input_text: str | None) -> ActivityOutcome:
    """Send the `DurableHttpRequest`; the result is the `DurableHttpResponse` JSON (statusCode, headers, content)."""
    try:
        request: dict[str, Any] = json.loads(input_text or "{}")
        if request.get("tokenSource"):
            raise ValueError("managed-identity token sources need Azure; devhost cannot acquire tokens")
        headers = {k: v if isinstance(v, str) else ",".join(v) for k, v in (request.get("headers") or {}).items()}
        async with aiohttp.ClientSession(timeout=_TIMEOUT) as session, session.request(
            request.get("method") or "GET", request["uri"], data=request.get("content"), headers=headers,
            allow_redirects=False,
        ) as response:
            content = await response.text()
            result = {
                "statusCode": response.status,
                "headers": {k: response.headers.getall(k) for k in response.headers},
                "content": content,
            }
        return ActivityOutcome(ok=True, result_json=compact_json(result))
    except Exception as exc:
        friendly = f" {type(exc).__name__}: {exc}"
        return ActivityOutcome(ok=False, reason=f"Activity function '{BUILTIN_HTTP_ACTIVITY}' failed: {friendly}",
                               details=None)
