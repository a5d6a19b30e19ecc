"""The exit codes of `agentctl` (scripts rely on them)."""

COMPLETED = 0
FAILED = 1
USAGE = 2
CANCELLED = 3
WAITING_FOR_APPROVAL = 4
DETACHED = 130  # Ctrl-C: the run goes on (the shell's convention for an interrupted command)


def for_status(status: str) -> int:
    return {"completed": COMPLETED, "cancelled": CANCELLED}.get(status, FAILED)
