"""The instruction-count benchmark reads callgrind's dumps (the counting itself needs valgrind: `python -m bench
instructions`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.checks import BenchmarkFailedError
from bench.instructions_bench import instructions_in

REPO_ROOT = Path(__file__).resolve().parents[2]
DUMP_HEAD = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 4242\ncmd: python\npart: 1\n\n"


def test_the_summary_line_gives_the_total() -> None:
    assert instructions_in(DUMP_HEAD + "positions: line\nevents: Ir\nsummary: 345678901\n\nfl=(1) a.c\n") == 345678901


def test_a_dump_without_a_summary_falls_back_to_its_totals() -> None:
    assert instructions_in(DUMP_HEAD + "events: Ir\nfn=(1) main\n1 5\ntotals: 1234\n") == 1234


def test_a_dump_without_either_is_an_error_not_a_zero() -> None:
    with pytest.raises(BenchmarkFailedError, match="summary or totals"):
        instructions_in(DUMP_HEAD + "events: Ir\n")


def test_the_parser_leaves_the_workload_agent_unimported() -> None:
    # The load tests count tool executions on the module each host imports for itself: a test process that imported
    # it beforehand (through this benchmark) would make the hosts share one counter.
    code = "import sys, bench.instructions_bench; print('bench.workload.agents.worker' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"
