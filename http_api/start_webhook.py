"""The webhook of the run a start request starts, checked once its `Idempotency-Key` has said what the request is
(`run_lifecycle.claim_start`), one copy for every route that takes one: `POST /api/agents/{agent}/runs` and
`/api/workflows/{name}/runs` (`webhook`), the Responses API (`metadata.webhook`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Protocol

from http_api.problems import ApiProblem
from http_api.run_lifecycle import RunStart, or_undo

log = logging.getLogger(__name__)


class WebhookCheck(Protocol):
    """The request's webhook checked against the settings, and with `resolve` its host's addresses too: the URL
    (None without one), or `ApiProblem` when refused (`webhook_field.checked_webhook`)."""

    def __call__(self, *, resolve: bool) -> Awaitable[str | None]: ...


async def start_webhook(start: RunStart, check: WebhookCheck) -> str | None:
    """The webhook of the run `start` starts:
    - a replay (`start.replay`) starts nothing: no webhook, nothing checked, so the client gets its run back as a
      poll would, whatever the settings or the host's DNS say now;
    - a take-over of a run written but never started (`start.written`): the webhook its first request checked (the
      same key, so the same body) - its host was resolved then and each send resolves it again, so it is not looked
      up now (a look-up failing would leave the run written and never started for good: a take-over happens once);
      if the settings no longer allow it (its host revoked, webhooks switched off), the run starts without it;
    - a new start: checked in full; refused, the key is given up (nothing was written), so a retry may start the run.
      Without a key nothing was claimed: refused before anything is written."""
    if start.replay is not None:
        return None
    if start.written is not None:
        try:
            return await check(resolve=False)
        except ApiProblem:
            log.warning("run %s starts without its webhook: the settings no longer allow it", start.written.run_id)
            return None
    return await or_undo(start.release, check(resolve=True))
