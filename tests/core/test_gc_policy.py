"""The app raises the young generation's GC threshold at import, and never lowers one set higher."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime.gc_policy import YOUNG_GENERATION_THRESHOLD, tune_garbage_collector

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def restored_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_importing_the_app_raises_the_young_threshold_and_keeps_the_older_ones() -> None:
    script = (
        "import gc, json; before = gc.get_threshold(); import function_app; "
        "print(json.dumps([before, gc.get_threshold()]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    before, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert after == [YOUNG_GENERATION_THRESHOLD, *before[1:]]


@pytest.mark.usefixtures("restored_thresholds")
def test_a_higher_threshold_set_by_the_host_is_left_alone() -> None:
    gc.set_threshold(50_000, 7, 3)
    tune_garbage_collector()
    assert gc.get_threshold() == (50_000, 7, 3)


@pytest.mark.usefixtures("restored_thresholds")
def test_a_lower_threshold_is_raised() -> None:
    gc.set_threshold(700, 10, 10)
    tune_garbage_collector()
    assert gc.get_threshold() == (YOUNG_GENERATION_THRESHOLD, 10, 10)
