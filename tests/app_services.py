"""The app's process-wide `RunServices` across the hosts one test process starts.

A host forgets the app modules it imported when it stops, so the next host imports its own under its own settings.
But where this process imported the app's packages before any host did (unit tests do, and test modules that import
`agent_runs`), every host shares those modules and their one `RunServices`: the next app would use whatever the last
one built, or a request that reached it while it stopped, under that app's settings (CI saw a page offer the local
principal picker "on Azure"). Each app host therefore starts and ends with none.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Protocol

from devhost.testing import InProcessHost


class _Stoppable(Protocol):
    def stop(self) -> None: ...


def drop_shared_services() -> None:
    """Close and drop the services of the app modules this process shares with its hosts (if it imported them)."""
    shared = sys.modules.get("agent_runs.services")
    if shared is not None:
        shared.RunServices.reset()


def start_app_host(app_dir: Path, **options: Any) -> InProcessHost:
    """The app on an in-process devhost (`options`: `InProcessHost`'s), building its own services under its own
    settings; stop it with `stop_app_host`."""
    drop_shared_services()
    return InProcessHost(app_dir, **options).start()


def stop_app_host(host: _Stoppable) -> None:
    """Close the app's services (their store thread), stop the host even when closing fails (it restores the
    environment it changed), then drop what a request built between the two."""
    try:
        drop_shared_services()
    finally:
        try:
            host.stop()
        finally:
            drop_shared_services()
