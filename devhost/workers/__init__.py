"""Worker processes for activity and HTTP functions (`python -m devhost --workers N`, FUNCTIONS_WORKER_PROCESS_COUNT).

The host process keeps the HTTP server, the Durable engine and orchestrator/entity execution; activities and HTTP
functions run in N worker processes, each with its own copy of the app, so one devhost uses more than one core.
"""

from devhost.workers.pool import WorkerLostError, WorkerPool, WorkerStartError

__all__ = ["WorkerLostError", "WorkerPool", "WorkerStartError"]
