"""The benchmark's CPU sampler counts a waiting thread as idle, whatever pool it belongs to: an idle pool thread
counted as busy would take a share of the host's CPU from every owner that really used it."""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from bench.cpu_breakdown import owner_of
from devhost.sync_pool import SyncThreadPool


def _idle_frame(thread_name_prefix: str) -> object:
    """The innermost frame of the first thread with that name prefix, once it waits (polled: it starts waiting soon)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        frames = sys._current_frames()
        for thread in threading.enumerate():
            if thread.name.startswith(thread_name_prefix) and thread.ident in frames:
                frame = frames[thread.ident]
                if frame.f_code.co_name in ("_work", "_worker", "get"):
                    return frame
        time.sleep(0.01)
    raise AssertionError(f"no waiting thread named {thread_name_prefix}*")


def test_an_idle_sync_pool_thread_is_not_counted_as_busy() -> None:
    pool = SyncThreadPool(1, "sampler-test-sync")
    try:
        assert pool.submit(lambda: 1).result(timeout=10) == 1  # the thread exists and now waits for the next call
        assert owner_of(_idle_frame("sampler-test-sync")) is None
    finally:
        pool.shutdown()


def test_an_idle_thread_pool_executor_thread_is_not_counted_as_busy() -> None:
    pool = ThreadPoolExecutor(1, thread_name_prefix="sampler-test-tpe")
    try:
        assert pool.submit(lambda: 1).result(timeout=10) == 1
        assert owner_of(_idle_frame("sampler-test-tpe")) is None
    finally:
        pool.shutdown()
