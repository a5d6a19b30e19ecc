"""Serving the page's static files: a fixed set, read once, with their content types and strict headers."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import azure.functions as func

from http_api.adapter import http_endpoint
from http_api.problems import not_found

STATIC_DIR = Path(__file__).with_name("static")
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
# Everything is served from here: no inline script, no third-party origin.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def _files() -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in STATIC_DIR.iterdir() if path.suffix in CONTENT_TYPES}


@http_endpoint
async def page(req: func.HttpRequest) -> func.HttpResponse:
    """`GET /api/ui` (the page) and `GET /api/ui/{file}` (its scripts and styles)."""
    name = req.route_params.get("file") or "index.html"
    body = _files().get(name)
    if body is None:
        raise not_found("ui_file_not_found", "File", name, field="path.file")
    content_type = CONTENT_TYPES[Path(name).suffix]
    return func.HttpResponse(body, status_code=200, headers={"Content-Type": content_type, **SECURITY_HEADERS})
