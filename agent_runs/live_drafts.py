"""Live drafts: every token of a streaming model answer, published in-process to whoever listens for that run.

The stored draft (`agent_runs.drafts`) is throttled (one write per `PARTIAL_OUTPUT_INTERVAL_SECONDS`) and is what
other processes and instances see. A stream served by the same process as the model call listens here as well and
gets each token as it leaves the model, with no store round trip. Publishing costs one dict lookup when nobody
listens. Listeners may live on another event loop or thread: they are called on their own loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass

Listener = Callable[["LiveDraft"], None]


@dataclass(frozen=True)
class LiveDraft:
    run_id: str
    seq: int  # where the draft is stored (the model call's first seq, `RunProgress.model_call_seq`)
    message_id: str
    text: str  # the whole text so far (a retried call starts again from "")


_lock = threading.Lock()
_listeners: dict[str, dict[int, tuple[asyncio.AbstractEventLoop, Listener]]] = {}
_ids = iter(range(1, 1 << 62))


def listen(run_id: str, listener: Listener) -> Callable[[], None]:
    """Call `listener` on the current loop for every draft of `run_id`; returns the function that stops it."""
    loop = asyncio.get_running_loop()
    with _lock:
        key = next(_ids)
        _listeners.setdefault(run_id, {})[key] = (loop, listener)

    def stop() -> None:
        with _lock:
            listeners = _listeners.get(run_id)
            if listeners is not None:
                listeners.pop(key, None)
                if not listeners:
                    _listeners.pop(run_id, None)

    return stop


def listening(run_id: str) -> bool:
    """Whether anything listens for the run's drafts (a draft nobody listens for need not be built)."""
    return run_id in _listeners


def publish(draft: LiveDraft) -> None:
    listeners = _listeners.get(draft.run_id)
    if not listeners:
        return
    with _lock:
        targets = list(listeners.values())
    try:
        current = asyncio.get_running_loop()
    except RuntimeError:
        current = None
    for loop, listener in targets:
        if loop is current:
            listener(draft)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(listener, draft)
