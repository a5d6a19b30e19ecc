"""Standard Webhooks signatures, by the maintained `standardwebhooks` library (sans-IO)."""

from __future__ import annotations

from datetime import datetime
from math import floor

from standardwebhooks import Webhook


def signed_headers(secret: str, message_id: str, sent_at: datetime, body: str) -> dict[str, str]:
    """`webhook-id`, `webhook-timestamp` (seconds), `webhook-signature` (`v1,<base64 HMAC-SHA256>` over
    `{id}.{timestamp}.{body}`) for a `whsec_` secret."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(floor(sent_at.timestamp())),
        "webhook-signature": Webhook(secret).sign(message_id, sent_at, body),
    }
