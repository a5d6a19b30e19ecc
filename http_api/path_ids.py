"""Path parameters are ids, checked like body ids before any handler runs: an id that cannot exist (empty, too
long, a character outside `A-Za-z0-9._:-`) is a 404 problem naming `path.<param>`, never a store error (500)."""

from __future__ import annotations

import re

import azure.functions as func

from http_api.models import ID_PATTERN
from http_api.problems import ApiProblem

_ID = re.compile(ID_PATTERN)
_SHOWN_CHARS = 64


def _not_found_code(param: str, path: str) -> tuple[str, str]:
    """The code and noun an unknown id of this parameter gets on this route (as the handler's own 404 would)."""
    if param == "run_id":
        return ("workflow_run_not_found", "Workflow run") if "/workflows/" in path else ("run_not_found", "Run")
    if param == "name":
        return ("signal_not_found", "Signal") if "/signals/" in path else ("workflow_not_found", "Workflow")
    known = {"approval_id": "Approval", "session_id": "Session", "agent": "Agent"}
    noun = known.get(param, "Resource")
    return (f"{param.removesuffix('_id')}_not_found" if param in known else "not_found"), noun


def check_path_ids(req: func.HttpRequest, path: str) -> None:
    for param, value in (req.route_params or {}).items():
        if isinstance(value, str) and _ID.fullmatch(value):
            continue
        code, noun = _not_found_code(param, path)
        shown = value if len(value or "") <= _SHOWN_CHARS else f"{value[:_SHOWN_CHARS]}..."
        raise ApiProblem(
            404,
            code,
            f"{noun} not found",
            f"{shown!r} is not a valid id: 1-128 characters of A-Z a-z 0-9 . _ : - (starting with a letter or digit).",
            field=f"path.{param}",
        )
