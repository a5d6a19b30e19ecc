"""The session store as the tools' effect ledger (exactly-once side effects the app keeps itself)."""

from __future__ import annotations

from typing import Any

from agent_runtime.tools import EffectLedgerUnavailableError
from session_store import SessionStore
from session_store.errors import StoreUnavailableError


class StoreEffectLedger:
    def __init__(self, store: SessionStore, session_id: str) -> None:
        self._store = store
        self._session_id = session_id

    async def record_once(self, key: str, kind: str, payload: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        try:
            record, created = await self._store.record_effect(self._session_id, key, kind, payload)
        except StoreUnavailableError as error:
            raise EffectLedgerUnavailableError(str(error)) from error
        return record.payload, created
