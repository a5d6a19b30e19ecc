"""`python -m scripted_model [--host H] [--port N] [--script FILE] [--latency-ms MS] [--chunk-delay-ms MS]`

Serves the script in FILE (a JSON `Script`), or the demo brain when no script is given, until interrupted.
Prints one line `scripted-model listening on http://HOST:PORT/v1` once it accepts connections (port 0 = a free port).
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from .demo import DemoBrain
from .script import Script
from .server import ScriptedModelServer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m scripted_model", description="Serve a scripted OpenAI-compatible chat-completions endpoint."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", help="a JSON Script file; default: the demo brain")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay added to every answer")
    parser.add_argument("--chunk-delay-ms", type=float, default=0.0, help="delay between streamed chunks")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    responder = Script.from_file(args.script) if args.script else DemoBrain()
    server = ScriptedModelServer(
        responder, host=args.host, port=args.port, latency_ms=args.latency_ms, chunk_delay_ms=args.chunk_delay_ms
    )
    await server.start_async()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"scripted-model listening on {server.base_url}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop_async()


def main(argv: list[str] | None = None) -> None:
    asyncio.run(serve(parse_args(argv)))


if __name__ == "__main__":
    main()
