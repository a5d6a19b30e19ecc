"""Session store: sessions, messages, runs, approvals and tool effects behind one protocol.

``open_store(settings)`` returns a Cosmos DB store when ``COSMOS_ENDPOINT`` is set, else the embedded SQLite store.
See ``protocol.py`` for the contract and ``README.md`` for the data model.
"""

from .clock import Clock, ManualClock, system_clock
from .errors import (
    AlreadyDecidedError,
    ConflictError,
    InvalidContinuationError,
    ItemTooLargeError,
    NotFoundError,
    RunNotReopenableError,
    SessionBusyError,
    SessionMovedOnError,
    StoreError,
    StoreUnavailableError,
)
from .factory import open_store
from .limits import MAX_ITEM_BYTES, MAX_RECORD_BYTES
from .protocol import SessionStore
from .records import (
    CLIENT_CANCEL_REASON,
    REOPENABLE_RUN_STATUS,
    TERMINAL_RUN_STATUSES,
    WORKFLOW_CANCEL_REASON,
    WORKFLOW_GATE_TOOL_PREFIX,
    ApprovalRecord,
    ApprovalStatus,
    EffectRecord,
    MessageRecord,
    Page,
    RunRecord,
    RunStatus,
    SessionRecord,
    SignalRecord,
)
from .settings import StoreSettings
from .sqlite_store import SqliteSessionStore

__all__ = [
    "CLIENT_CANCEL_REASON",
    "MAX_ITEM_BYTES",
    "MAX_RECORD_BYTES",
    "REOPENABLE_RUN_STATUS",
    "TERMINAL_RUN_STATUSES",
    "WORKFLOW_CANCEL_REASON",
    "WORKFLOW_GATE_TOOL_PREFIX",
    "AlreadyDecidedError",
    "ApprovalRecord",
    "ApprovalStatus",
    "Clock",
    "ConflictError",
    "EffectRecord",
    "InvalidContinuationError",
    "ItemTooLargeError",
    "ManualClock",
    "MessageRecord",
    "NotFoundError",
    "Page",
    "RunNotReopenableError",
    "RunRecord",
    "RunStatus",
    "SessionBusyError",
    "SessionMovedOnError",
    "SessionRecord",
    "SessionStore",
    "SignalRecord",
    "SqliteSessionStore",
    "StoreError",
    "StoreSettings",
    "StoreUnavailableError",
    "open_store",
    "system_clock",
]
