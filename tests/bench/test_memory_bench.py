"""The memory benchmark, on a few runs: what the host keeps of a run in flight is there while the run waits for a
person and gone once it completed (the app's conversation cache entry and carried episode, devhost's history), and
its readings split the heap by owner. (The figures themselves are the benchmark's: `python -m bench memory`.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.memory_bench import OWNER_NAMES, measure, report

pytestmark = pytest.mark.slow


def test_a_run_waiting_for_a_person_is_kept_until_it_completes(tmp_path: Path) -> None:
    readings = measure(warmup=1, completed=2, waiting=3, workdir=tmp_path)

    waiting, decided = readings["waiting"].running, readings["decided"].running
    assert waiting["app: conversation cache, runs"] == 3
    assert waiting["devhost: histories held (running instances)"] == 3
    assert waiting["devhost: instances indexed"] == 1 + 2 + 3
    for kept in ("app: carried episodes", "app: conversation cache, runs", "app: conversation cache, messages",
                 "devhost: histories held (running instances)"):
        assert decided[kept] == 0, kept
    assert set(readings["warm"].heap) == set(OWNER_NAMES)
    assert readings["waiting"].heap_bytes > readings["completed"].heap_bytes  # three runs' worth, held
    body, figures = report(readings, completed=2, waiting=3)
    assert set(figures) == {"app_completed", "app_waiting", "app_decided"} and "| 3 runs waiting" in body
