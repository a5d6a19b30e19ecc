"""`python -m devhost`: load a Functions app and serve it on 127.0.0.1 until SIGINT/SIGTERM.

The banner says where the app is and what to try first (the app's `[tool.devhost] banner` lines in its
pyproject.toml, if any); `--list-functions` lists every function and exits without serving (so it can run beside the
host serving the app). A task hub named by an app setting that nothing sets (host.json `"hubName": "%TASKHUB_NAME%"`,
as on Azure) is given a local name instead of stopping the host."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from devhost.app_loader import AppLoadError, FunctionIndex, apply_local_settings, load_app
from devhost.banner import banner
from devhost.engine.api import Clock, VirtualClock
from devhost.host import (
    INPROCESS_WORKER,
    DevHost,
    RouteInfo,
    default_state_path,
    index_routes,
    mark_devhost_environment,
)
from devhost.http.host_config import HostConfig, HostConfigError, unset_hub_setting
from devhost.worker.pool import WorkerStartError as RuntimeWorkerStartError
from devhost.worker.pool import library_version
from devhost.workers import WorkerStartError

DEFAULT_PORT = 7071
EXIT_LOAD_ERROR = 2
EXIT_LISTEN_ERROR = 3
EXIT_FORCED = 130
LOCAL_HUB_NAME = "local"


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
        help="run activity, HTTP and orchestrator functions and entity batches in N worker processes (default: "
        "FUNCTIONS_WORKER_PROCESS_COUNT, else 0 = all in this process); the host process keeps the HTTP server and "
        "the engine",
    )
    parser.add_argument("--list-functions", action="store_true",
                        help="list every function (routes as served on --port, and triggers) and exit, serving nothing")
    parser.add_argument(
        "--function-keys",
        default=None,
        metavar="FILE",
        help="enforce each HTTP trigger's authLevel with the keys in FILE (x-functions-key header or ?code=), as "
        "Azure does; default: no key is checked, as under func start",
    )
    parser.add_argument(
        "--worker",
        choices=["auto", "runtime", "inprocess"],
        default=None,
        help="runtime: run the app through Azure's Python worker library (azure-functions-runtime, Python 3.13+) in "
        "worker processes; inprocess: devhost calls the functions itself; auto (default, or DEVHOST_WORKER): the "
        "real worker wherever it is installed",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser.parse_args(argv)


def format_routes(routes: list[RouteInfo], index: FunctionIndex) -> str:
    lines = ["", "Functions:", ""]
    for route in routes:
        methods = ",".join(route.methods) if route.methods else "ALL"
        lines.append(f"        {route.function_name}: [{methods}] {route.url}")
    for kind, infos in (
        ("orchestrationTrigger", index.orchestrators()),
        ("activityTrigger", index.activities()),
        ("entityTrigger", index.entities()),
        ("not served", index.other_functions()),
    ):
        for info in infos:
            label = info.trigger_type if kind == "not served" else kind
            suffix = " (not served by devhost)" if kind == "not served" else ""
            lines.append(f"        {info.name}: {label}{suffix}")
    lines.append("")
    return "\n".join(lines)


def apply_app_settings(app_dir: Path) -> str | None:
    """local.settings.json's values, and a local task hub name when the hub's setting is set nowhere (only here, on a
    laptop: the Functions host on Azure refuses to start without it); returns that setting's name."""
    apply_local_settings(app_dir)
    hub_setting = unset_hub_setting(app_dir)
    if hub_setting:
        os.environ[hub_setting] = LOCAL_HUB_NAME
    return hub_setting


def list_command(app_dir: Path, port: int) -> str:
    """This interpreter's `--list-functions` for the app served: the project's environment (e.g. `.venv/bin/python`,
    where devhost is installed), not whatever `python` is on PATH."""
    executable = Path(sys.executable)
    cwd = Path.cwd()
    shown = str(executable.relative_to(cwd)) if executable.is_relative_to(cwd) else str(executable)
    app = "" if app_dir == cwd.resolve() else f" --app-dir {app_dir}"
    port_option = "" if port == DEFAULT_PORT else f" --port {port}"
    return f"{shown} -m devhost{app}{port_option} --list-functions"


def list_functions(args: argparse.Namespace) -> int:
    """Load the app (imported in this process) and print its functions; nothing is served or stored."""
    app_dir = Path(args.app_dir).resolve()
    mark_devhost_environment()  # as when serving
    try:
        apply_app_settings(app_dir)
        index = load_app(app_dir)
        routes = index_routes(index, HostConfig.load(app_dir), f"http://127.0.0.1:{args.port or DEFAULT_PORT}")
    except (AppLoadError, HostConfigError) as exc:
        print(f"devhost: cannot load the app: {exc}", file=sys.stderr, flush=True)
        return EXIT_LOAD_ERROR
    print(format_routes(routes, index), flush=True)
    return 0


async def serve(args: argparse.Namespace) -> int:
    app_dir = Path(args.app_dir).resolve()
    state = args.state or default_state_path(app_dir)
    if state != ":memory:":
        Path(state).parent.mkdir(parents=True, exist_ok=True)
    clock: Clock | None = None if args.clock == "real" else VirtualClock(auto_skip=args.clock == "auto-skip")
    try:
        hub_setting = apply_app_settings(app_dir)
        if hub_setting:
            print(f"devhost: {hub_setting} is not set: using the task hub name {LOCAL_HUB_NAME!r} "
                  "(on Azure, set it as an app setting)", flush=True)
        host = await DevHost.start(app_dir, port=args.port, state_path=state, clock=clock, workers=args.workers,
                                   function_keys=args.function_keys, worker=args.worker)
    except (AppLoadError, HostConfigError, WorkerStartError, RuntimeWorkerStartError) as exc:
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
    workers = f"{len(host.worker_pids)} worker processes" if host.worker_pids else "functions in-process"
    worker = host.http.status.get("worker", INPROCESS_WORKER)
    workers += f", worker: {worker}"
    if worker == INPROCESS_WORKER and library_version() is None:
        print(f"devhost: Azure's worker library (azure-functions-runtime) needs Python 3.13+; on "
              f"{sys.version.split()[0]} devhost runs the functions in-process, after the Python worker's indexing "
              "checks", flush=True)
    print(f"devhost: serving {app_dir} on {host.base_url} (state: {state}, clock: {args.clock}, {workers})",
          flush=True)
    print(banner(host, app_dir, DEFAULT_PORT, list_command(app_dir, host.port)), flush=True)
    try:
        await stop.wait()
    finally:
        print("devhost: stopping", flush=True)
        await host.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.list_functions:
        return list_functions(args)
    return asyncio.run(serve(args))
