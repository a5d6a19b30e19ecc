"""The exit codes of `agentctl` (scripts rely on them): how the run ended, or which problem stopped the command."""

COMPLETED = 0
FAILED = 1  # the run failed
USAGE = 2  # the command line, or a request the app refused as invalid (400, 422)
CANCELLED = 3
WAITING_FOR_APPROVAL = 4  # in a non-interactive session
UNREACHABLE = 5  # no answer from the app (not started, wrong URL or port, timed out) or an answer that is not the API
NOT_ALLOWED = 6  # 401, 403: missing or wrong --key / --token, or not yours to see or decide
NOT_FOUND = 7  # 404, 410: no such run, approval, session or agent (or expired)
CONFLICT = 8  # 409: already decided, already finished, the session is busy
APP_ERROR = 9  # 5xx: the app failed to answer
DETACHED = 130  # Ctrl-C: the run goes on (the shell's convention for an interrupted command)
STDOUT_CLOSED = 141  # stdout's reader went away (`| head`): the shell's status for SIGPIPE, said quietly


def for_status(status: str) -> int:
    return {"completed": COMPLETED, "cancelled": CANCELLED}.get(status, FAILED)


def for_http_status(status: int) -> int:
    if status in (401, 403):
        return NOT_ALLOWED
    if status in (404, 410):
        return NOT_FOUND
    if status == 409:
        return CONFLICT
    if 400 <= status < 500:
        return USAGE
    return APP_ERROR if status >= 500 else UNREACHABLE
