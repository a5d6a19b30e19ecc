"""Run a Functions app on devhost from tests: in-process (background loop thread, virtual clock) or as a subprocess.

    with InProcessHost("path/to/app") as host:            # fast: no process, virtual time
        r = host.client.post("/api/orchestrators/hello")
        status = host.wait_for_status(r.json()["id"])      # StatusResponsePayload dict
        host.advance(3 * 86400)                            # move durable time by 3 days, run until idle

    with SubprocessHost("path/to/app", state_path=tmp / "s.sqlite3") as host:   # real process, SIGKILL-able
        host.kill(); host.start()                          # same state file: runs resume

Both give `base_url`, `client` (an `httpx.Client` bound to it), `wait_for_status`, `wait_until_idle`, `advance`.
"""

from devhost.testing._common import PACKAGE_ROOT, HostStartError, free_port, loopback_client
from devhost.testing.child_process import SubprocessHost
from devhost.testing.inprocess import ClockMode, InProcessHost

__all__ = [
    "PACKAGE_ROOT",
    "ClockMode",
    "HostStartError",
    "InProcessHost",
    "SubprocessHost",
    "free_port",
    "loopback_client",
]
