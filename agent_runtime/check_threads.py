"""Where checks of outside input run: a small thread pool of their own, off the event loop.

A check of something from outside - a client's output schema, an MCP server's schemas, a model's or a person's
arguments against them - is bounded (`schema_costs`, `schema_patterns`) but can take a second or more. On asyncio's
default executor, a burst of them (one client sending many costly schemas) took every thread that the process's own
work needs there too: DNS for a new model connection (`loop.getaddrinfo`), a Python tool's call, a JWKS fetch,
a managed identity's token. Here they queue behind each other instead, `CHECK_THREADS` at a time (pure Python
shares one GIL, so more threads would only interleave them), and the default executor stays free.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_T = TypeVar("_T")
CHECK_THREADS = 4
CHECK_THREAD_PREFIX = "outside-input-check"

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _checks_pool() -> ThreadPoolExecutor:
    """Made on first use, in the process that uses it."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=CHECK_THREADS, thread_name_prefix=CHECK_THREAD_PREFIX)
        return _pool


def _forget_pool_in_child() -> None:
    """A forked child has none of the parent's threads: it makes a pool of its own on first use."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)


async def check_off_loop(check: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """`check(*args, **kwargs)` on the checks' own threads, with the caller's context (its span, its settings), as
    `asyncio.to_thread` would run it on the default executor."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, check, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_checks_pool(), call)
