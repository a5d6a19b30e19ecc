"""One worker process: loads the app, connects to its host and runs the activity, HTTP, orchestrator and entity
calls it receives.

`python -m devhost.workers --app-dir DIR --connect 127.0.0.1:PORT` with the host's token in `DEVHOST_WORKER_TOKEN`
(never on the command line). The worker runs each call as a task on its own loop (sync functions on its thread
pool) through `InProcessExecutor`, exactly as a single-process devhost would, and answers when the call is done.
It exits as soon as the host's connection closes: a host that stops or dies never leaves workers behind.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from devhost.app_loader import AppLoadError, FunctionIndex, load_app
from devhost.execution import FunctionFailedError, InProcessExecutor
from devhost.http.trigger import HttpTriggerSpec
from devhost.invoke import ActivityOutcome, activity_failure, install_sdk_caches
from devhost.protocol.actions import OrchestratorOutput
from devhost.protocol.replay import unknown_function_message

from .messages import (
    ActivityCall,
    ActivityDone,
    EntityCall,
    EntityDone,
    Frame,
    Hello,
    HttpCall,
    HttpDone,
    OrchestratorCall,
    OrchestratorDone,
    encode_frame,
    read_frame,
)

TOKEN_VARIABLE = "DEVHOST_WORKER_TOKEN"
EXIT_LOAD_ERROR = 2
EXIT_NO_HOST = 3

log = logging.getLogger("devhost.worker")


class Worker:
    def __init__(self, index: FunctionIndex, writer: asyncio.StreamWriter) -> None:
        self.index = index
        self.executor = InProcessExecutor(index.app_dir)
        self.http_specs = {
            f.name: HttpTriggerSpec.from_function_info(f, http_v2=index.http_v2) for f in index.http_functions()
        }
        self._writer = writer
        self._tasks: set[asyncio.Task[None]] = set()

    def dispatch(self, frame: Frame) -> None:
        if isinstance(frame, ActivityCall):
            task = asyncio.create_task(self._activity(frame))
        elif isinstance(frame, HttpCall):
            task = asyncio.create_task(self._http(frame))
        elif isinstance(frame, OrchestratorCall):
            task = asyncio.create_task(self._orchestrator(frame))
        elif isinstance(frame, EntityCall):
            task = asyncio.create_task(self._entity(frame))
        else:
            log.error("unexpected frame from the host: %s", frame.type)
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _activity(self, call: ActivityCall) -> None:
        function = self.index.activity(call.function)
        if function is None:
            known = [f.name for f in self.index.activities()]
            outcome = ActivityOutcome(ok=False, reason=unknown_function_message("activity", call.function, known))
        else:
            try:
                outcome = await self.executor.run_activity(function, call.input, call.client_binding)
            except BaseException as exc:  # even a cancelled call is answered: the host must never wait forever
                outcome = activity_failure(call.function, exc)
        self._writer.write(encode_frame(ActivityDone(id=call.id, outcome=outcome)))

    async def _orchestrator(self, call: OrchestratorCall) -> None:
        function = self.index.orchestrator(call.function)
        if function is None:
            known = [f.name for f in self.index.orchestrators()]
            output = OrchestratorOutput(error=unknown_function_message("orchestrator", call.function, known),
                                        raw_failure=True)
        else:
            try:
                output = await self.executor.run_orchestrator(function, call.trigger)
            except BaseException as exc:  # even a cancelled call is answered: the host must never wait forever
                output = OrchestratorOutput(error=f"{type(exc).__name__}: {exc}", raw_failure=True)
        self._writer.write(encode_frame(OrchestratorDone(id=call.id, output=output)))

    async def _entity(self, call: EntityCall) -> None:
        function = self.index.entity(call.function)
        if function is None:
            done = EntityDone(id=call.id, internal_error=f"no entity function {call.function!r} in this worker")
        else:
            try:
                done = EntityDone(id=call.id, result=await self.executor.run_entity_batch(function, call.batch,
                                                                                          call.size))
            except BaseException as exc:  # EntityInternalError, or a cancelled call: always answered
                done = EntityDone(id=call.id, internal_error=f"{type(exc).__name__}: {exc}")
        self._writer.write(encode_frame(done))

    async def _http(self, call: HttpCall) -> None:
        spec = self.http_specs.get(call.function)
        if spec is None:
            done = HttpDone(id=call.id, error=f"KeyError: no HTTP function {call.function!r} in this worker")
        else:
            try:
                response = await self.executor.run_http(spec, call.request, call.client_binding)
                done = HttpDone(id=call.id, response=response)
            except FunctionFailedError as exc:
                log.error("Executed 'Functions.%s' (Failed)", call.function, exc_info=exc.__cause__)
                done = HttpDone(id=call.id, error=str(exc))
            except BaseException as exc:  # even a cancelled call is answered: the host must never wait forever
                done = HttpDone(id=call.id, error=f"{type(exc).__name__}: {exc}")
        self._writer.write(encode_frame(done))


async def serve(app_dir: str, host: str, port: int, token: str) -> int:
    try:
        index = load_app(app_dir)
    except AppLoadError as exc:
        print(f"devhost worker: cannot load the app: {exc}", file=sys.stderr, flush=True)
        return EXIT_LOAD_ERROR
    install_sdk_caches()
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as exc:
        print(f"devhost worker: cannot reach the host at {host}:{port}: {exc}", file=sys.stderr, flush=True)
        return EXIT_NO_HOST
    writer.write(encode_frame(Hello(token=token)))
    worker = Worker(index, writer)
    while (frame := await read_frame(reader)) is not None:
        worker.dispatch(frame)
    return 0  # the host closed the connection: nobody is left to receive results


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m devhost.workers", description=__doc__)
    parser.add_argument("--app-dir", required=True)
    parser.add_argument("--connect", required=True, help="HOST:PORT of the devhost that started this worker")
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    # Ctrl-C reaches the whole process group: the host decides when its workers stop (it closes the connection).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s [worker %(process)d] %(name)s: %(message)s")
    host, _, port = args.connect.rpartition(":")
    code = asyncio.run(serve(args.app_dir, host, int(port), os.environ.pop(TOKEN_VARIABLE, "")))
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave at once: threads still running sync user code would otherwise hold the interpreter open.
    os._exit(code)
