"""The workload's scripted model server in a process of its own.

A benchmark whose clients and model server share one process measures that process's GIL too: under load the
server thread waits behind hundreds of client coroutines, and every model call of the host under test gets slower
for reasons that are not the host's. Serving the model from its own process keeps the figures about the host.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection

from bench.workload.brain import WorkloadBrain
from scripted_model.server import ScriptedModelServer

START_TIMEOUT_SECONDS = 30.0


def _serve(latency_ms: float, ready: Connection) -> None:
    async def main() -> None:
        server = ScriptedModelServer(WorkloadBrain(), latency_ms=latency_ms)
        await server.start_async()
        ready.send(server.base_url)
        await asyncio.Event().wait()  # until the parent terminates this process

    asyncio.run(main())


@contextmanager
def model_server_process(latency_ms: float = 0.0) -> Iterator[str]:
    """Start a `WorkloadBrain` server in a child process; yields its base URL; terminates it at exit."""
    receive, send = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(latency_ms, send), name="workload-model", daemon=True
    )
    process.start()
    try:
        if not receive.poll(START_TIMEOUT_SECONDS):
            raise RuntimeError(f"the workload model server did not start within {START_TIMEOUT_SECONDS} s")
        yield receive.recv()
    finally:
        process.terminate()
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()
