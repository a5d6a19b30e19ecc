"""`python -m devhost`: load a Functions app, print its HTTP routes and serve it on 127.0.0.1 until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from devhost.app_loader import AppLoadError
from devhost.engine.api import Clock, VirtualClock
from devhost.host import DevHost, default_state_path
from devhost.http.host_config import HostConfigError
from devhost.workers import WorkerStartError

DEFAULT_PORT = 7071
EXIT_LOAD_ERROR = 2
EXIT_LISTEN_ERROR = 3
EXIT_FORCED = 130


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m devhost", description=__doc__)
    parser.add_argument("--app-dir", default=".", help="directory holding function_app.py (default: .)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port on 127.0.0.1 (default 7071; 0 = free)")
    parser.add_argument(
        "--state",
        default=None,
        help="SQLite state file, or :memory: (default: APP_DIR/.devhost/state.sqlite3)",
    )
    parser.add_argument(
        "--clock",
        choices=["real", "virtual", "auto-skip"],
        default="real",
        help="real time (default); virtual time moved only by POST /admin/devhost/advance; or virtual time that "
        "jumps to the next durable timer whenever the host is idle",
    )
    parser.add_argument("--virtual-clock", action="store_const", dest="clock", const="auto-skip",
                        help="same as --clock auto-skip")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="run activity and HTTP functions in N worker processes (default: FUNCTIONS_WORKER_PROCESS_COUNT, else "
        "0 = all in this process); orchestrators and entities always run in the host process",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser.parse_args(argv)


def format_routes(host: DevHost) -> str:
    lines = ["", "Functions:", ""]
    for route in host.routes():
        methods = ",".join(route.methods) if route.methods else "ALL"
        lines.append(f"        {route.function_name}: [{methods}] {route.url}")
    for kind, infos in (
        ("orchestrationTrigger", host.index.orchestrators()),
        ("activityTrigger", host.index.activities()),
        ("entityTrigger", host.index.entities()),
        ("not served", host.index.other_functions()),
    ):
        for info in infos:
            label = info.trigger_type if kind == "not served" else kind
            suffix = " (not served by devhost)" if kind == "not served" else ""
            lines.append(f"        {info.name}: {label}{suffix}")
    lines.append("")
    return "\n".join(lines)


async def serve(args: argparse.Namespace) -> int:
    app_dir = Path(args.app_dir).resolve()
    state = args.state or default_state_path(app_dir)
    if state != ":memory:":
        Path(state).parent.mkdir(parents=True, exist_ok=True)
    clock: Clock | None = None if args.clock == "real" else VirtualClock(auto_skip=args.clock == "auto-skip")
    try:
        host = await DevHost.start(app_dir, port=args.port, state_path=state, clock=clock, workers=args.workers)
    except (AppLoadError, HostConfigError, WorkerStartError) as exc:
        print(f"devhost: cannot load the app: {exc}", file=sys.stderr, flush=True)
        return EXIT_LOAD_ERROR
    except OSError as exc:
        print(f"devhost: cannot listen on 127.0.0.1:{args.port}: {exc}", file=sys.stderr, flush=True)
        return EXIT_LISTEN_ERROR
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():  # a second Ctrl-C while user code is still finishing: leave now
            os._exit(EXIT_FORCED)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    print(format_routes(host), flush=True)
    workers = f"{len(host.worker_pids)} worker processes" if host.worker_pids else "functions in-process"
    print(f"devhost: serving {app_dir} on {host.base_url} (state: {state}, clock: {args.clock}, {workers})",
          flush=True)
    try:
        await stop.wait()
    finally:
        print("devhost: stopping", flush=True)
        await host.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return asyncio.run(serve(args))
