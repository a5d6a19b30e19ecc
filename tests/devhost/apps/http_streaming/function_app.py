"""A small app on `azurefunctions-extensions-http-fastapi` (HTTP v2 mode): streamed and plain FastAPI responses.

The streaming functions are driven by the test through `/api/gates/...`: a gate is released by a request, so the
test decides when the next chunk may leave (no sleeps); what each generator saw is recorded for `/api/seen`.
"""

import asyncio
import os

import azure.functions as func
from azurefunctions.extensions.http.fastapi import JSONResponse, Request, Response, StreamingResponse

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

GATES: dict[str, asyncio.Event] = {}
SEEN: dict[str, list[str]] = {}


def gate(name: str) -> asyncio.Event:
    return GATES.setdefault(name, asyncio.Event())


@app.route(route="ticks/{name}", methods=["GET"])
async def ticks(req: Request) -> StreamingResponse:
    """Yields `tick n` for n in 0..count-1, waiting for gate `{name}-{n}` before each tick after the first."""
    name = req.path_params["name"]
    count = int(req.query_params.get("count", "3"))
    log = SEEN.setdefault(name, [])

    async def body():
        try:
            for n in range(count):
                if n:
                    await gate(f"{name}-{n}").wait()
                log.append(f"sent {n}")
                yield f"data: tick {n}\n\n"
            log.append("finished")
        except BaseException as exc:  # the disconnect arrives as a cancellation (or GeneratorExit) here
            log.append(f"stopped: {type(exc).__name__}")
            raise

    return StreamingResponse(body(), media_type="text/event-stream", headers={"X-Stream": name})


@app.route(route="gates/{name}", methods=["POST"])
async def release(req: Request) -> Response:
    gate(req.path_params["name"]).set()
    return Response(status_code=204)


@app.route(route="seen/{name}", methods=["GET"])
async def seen(req: Request) -> JSONResponse:
    return JSONResponse(SEEN.get(req.path_params["name"], []))


@app.route(route="echo/{a}/{b?}", methods=["POST", "PUT"])
async def echo(req: Request) -> dict:
    """A plain return value goes through FastAPI's JSON encoding."""
    return {
        "method": req.method,
        "path_params": dict(req.path_params),
        "query": dict(req.query_params),
        "header": req.headers.get("x-custom"),
        "body": (await req.body()).decode(),
        "url": str(req.url),
        "forwarded": {name: req.headers.get(f"x-forwarded-{name}") for name in ("for", "proto", "host", "prefix")},
        "pid": os.getpid(),
    }


@app.route(route="sync-text", methods=["GET"])
def sync_text(req: Request) -> Response:
    return Response(content="from a sync function", media_type="text/plain", status_code=201,
                    headers={"X-Sync": "yes"})


@app.route(route="unannotated", methods=["GET"])
async def unannotated(req):
    return Response(content=type(req).__module__ + "." + type(req).__name__, media_type="text/plain")


@app.route(route="fails", methods=["GET"])
async def fails(req: Request) -> Response:
    raise RuntimeError("boom")


@app.route(route="pid-stream", methods=["GET"])
async def pid_stream(req: Request) -> StreamingResponse:
    async def body():
        yield f"{os.getpid()}"

    return StreamingResponse(body(), media_type="text/plain")
