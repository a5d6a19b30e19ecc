"""Decision page links (sans-IO): signed (HMAC-SHA256), expiring and bound to one approval of one run.

The link only opens the page; the page still asks for the approver's sign-in and decides through the API, so a
leaked or prefetched link decides nothing."""

from __future__ import annotations

import hashlib
from datetime import datetime

from itsdangerous import BadSignature, URLSafeSerializer

SALT = "decision-page"


class LinkError(ValueError):
    """The link is forged, expired or for another approval."""


def _serializer(secrets: list[str]) -> URLSafeSerializer:
    """`secrets` as configured (`CONTINUATION_TOKEN_SECRET`: the current first, then those being retired): the first
    signs, every one verifies. itsdangerous signs with the LAST key it is given, hence the reversal: given them in
    order, it signed new links with the secret being retired, which broke them as soon as it was removed."""
    return URLSafeSerializer(list(reversed(secrets)), salt=SALT, signer_kwargs={"digest_method": hashlib.sha256})


def sign_link(secrets: list[str], *, run_id: str, approval_id: str, expires_at: datetime) -> str:
    return str(_serializer(secrets).dumps({"r": run_id, "a": approval_id, "exp": int(expires_at.timestamp())}))


def verify_link(secrets: list[str], token: str, *, approval_id: str, now: datetime) -> str:
    """The run id the link is bound to; raises `LinkError`."""
    try:
        claims = _serializer(secrets).loads(token)
    except BadSignature as error:
        raise LinkError("the link's signature does not match") from error
    if not isinstance(claims, dict) or claims.get("a") != approval_id or not isinstance(claims.get("r"), str):
        raise LinkError("the link is for another approval")
    if not isinstance(claims.get("exp"), int) or claims["exp"] < now.timestamp():
        raise LinkError("the link has expired")
    return str(claims["r"])


def page_path(approval_id: str, token: str) -> str:
    return f"/api/ui/approvals/{approval_id}?link={token}"
