"""Instructions per turn under callgrind: the durable turn on devhost and the in-process runner's turn.

Wall-clock time on a shared VM drifts by tens of percent from minute to minute; the number of instructions a turn
executes does not (within ~0.5 %), so a change of a few percent shows here when `bench overhead` cannot see it.
Each side runs in a process of its own under `valgrind --tool=callgrind`, its counters zeroed after a warm-up and
dumped after TURNS turns (`callgrind_control`); the model server and the durable side's HTTP client run in
processes of their own that valgrind does not follow, so neither is counted. Needs valgrind (Debian: `apt install
valgrind`); about a minute per side for 6 turns.

Each side collects its garbage in full right before its counters are zeroed (`_zero_counters`). Otherwise where the
process's cyclic collections fall depends on everything it allocated before, imports included: one module more moved
a collection of the older generations (~3.7 M instructions) into a 6-turn window, and a change that costs nothing
per turn read as +6 %. The collector's share of a turn is in `bench overhead`'s CPU breakdown.

    python -m bench instructions [--turns 6] [--no-record]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.checks import BenchmarkFailedError, expect
from bench.report import command_line, publish, section, table

SIDES = ("durable", "in-process")
TURNS_PER_CONVERSATION = 3  # as `bench overhead`: new sessions, and turns that continue them
REPO_ROOT = Path(__file__).resolve().parents[1]


def instructions_in(dump: str) -> int:
    """The instruction total of a callgrind dump (its `summary:` line; `totals:` in dumps without one)."""
    for key in ("summary:", "totals:"):
        for line in dump.splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    raise BenchmarkFailedError("a callgrind dump without a summary or totals line")


def _callgrind(command: str) -> None:
    """Zero (`-z`) or dump (`-d`) this process's counters; callgrind_control ships with valgrind."""
    subprocess.run(["callgrind_control", command, str(os.getpid())], check=True, stdout=subprocess.DEVNULL)


# The sides import the app and devhost in their own processes only: imported here, the benchmark's parser would
# bring the workload agent's module (and its execution counters) into every process that reads a dump, a test run
# included, where hosts then share it instead of importing their own.


def _zero_counters() -> None:
    """Start counting at the same point of the garbage collector's cycle on every commit (see the module's doc)."""
    gc.collect()
    _callgrind("-z")


def _count_durable(turns: int) -> None:
    from bench.overhead_bench import _durable_turn
    from bench.workload.client_process import client_process
    from bench.workload.host import workload_host
    from bench.workload.model_process import model_server_process

    with model_server_process(0.0) as url, tempfile.TemporaryDirectory() as workdir:
        store, state = f"{workdir}/sessions.sqlite3", f"{workdir}/engine.sqlite3"
        with workload_host(url, store_path=store, state_path=state) as host, client_process(host.base_url) as client:
            for _ in range(TURNS_PER_CONVERSATION):  # warm-up: imports, store, model clients, caches
                _durable_turn(host, None, client)
            _zero_counters()
            session_id = None
            for turn in range(turns):
                session_id = _durable_turn(host, session_id if turn % TURNS_PER_CONVERSATION else None, client)
            _callgrind("-d")


def _count_in_process(turns: int) -> None:
    from agent_runtime.gc_policy import tune_garbage_collector
    from bench.overhead_bench import InProcessSide
    from bench.workload.model_process import model_server_process

    with model_server_process(0.0) as url:
        tune_garbage_collector()  # the app's policy, which `bench overhead`'s shared process gives both sides
        side = InProcessSide(url)
        try:
            side.conversation(0)  # warm-up
            _zero_counters()
            for index in range(turns // TURNS_PER_CONVERSATION):
                side.conversation(index + 1)
            _callgrind("-d")
        finally:
            side.close()


def count_side(side: str, turns: int) -> float:
    """Instructions per turn of `side`, in millions, from a child process under callgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None or shutil.which("callgrind_control") is None:
        raise BenchmarkFailedError("valgrind is not installed (Debian: apt install valgrind)")
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [valgrind, "--tool=callgrind", "--collect-systime=no", f"--callgrind-out-file={out}/callgrind.out.%p",
             sys.executable, "-m", "bench.instructions_bench", "--side", side, "--turns", str(turns)],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=3600,
        )
        expect(done.returncode == 0, f"the {side} side failed:\n{done.stderr[-4000:]}")
        dumps = sorted(Path(out).glob("callgrind.out.*.1"))  # `-d`'s dump; the exit's dump has no suffix
        expect(len(dumps) == 1, f"expected one dump of the {side} side's turns, found {[d.name for d in dumps]}")
        return instructions_in(dumps[0].read_text(errors="replace")) / turns / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=6, help=f"a multiple of {TURNS_PER_CONVERSATION}")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--side", choices=SIDES, help="count one side in this process (run under callgrind)")
    args = parser.parse_args()
    if args.turns <= 0 or args.turns % TURNS_PER_CONVERSATION:
        parser.error(f"--turns must be a positive multiple of {TURNS_PER_CONVERSATION}")
    if args.side:
        (_count_durable if args.side == "durable" else _count_in_process)(args.turns)
        return
    durable, in_process = (count_side(side, args.turns) for side in SIDES)
    body = table(
        ["turns", "durable turn, M instructions", "in-process turn, M instructions", "added by durability, M"],
        [[args.turns, durable, in_process, durable - in_process]],
    )
    notes = (
        "One turn = `blobs 2 size 200` (3 model calls, 2 tool calls), 0 ms model, sessions of "
        f"{TURNS_PER_CONVERSATION} turns, as `bench overhead`; both sides stream the model's answers (the durable "
        "side's default). Counted under valgrind's callgrind, after a warm-up; "
        "the model server and the durable side's HTTP client run in processes callgrind does not follow. "
        "Deterministic within ~0.5 %: compare commits with it, not with wall-clock time."
    )
    publish(section("Instructions per turn (callgrind)", command_line("bench.instructions_bench"), body, notes),
            record=not args.no_record)


if __name__ == "__main__":
    main()
