"""A real FastAPI `Request`, as the Python worker (HTTP v2 mode) hands one to an HTTP function."""

from __future__ import annotations

from azurefunctions.extensions.http.fastapi import Request


def fastapi_request(path: str, *, method: str = "POST", query: bytes = b"", headers: dict[str, str] | None = None,
                    body: bytes = b"", path_params: dict[str, str] | None = None) -> Request:
    sent = False

    async def receive() -> dict:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    raw = [(b"host", b"example.test")] + [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": query,
             "headers": raw, "scheme": "http", "server": ("example.test", 80), "path_params": path_params or {}}
    return Request(scope, receive)
