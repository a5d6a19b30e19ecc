"""Python lines executed per turn, by owner: the durable turn on devhost and the in-process runner's turn.

`bench overhead`'s CPU breakdown samples stacks, and a thread waiting for the GIL after a call that let go of it (a
SQLite statement, a socket write) is sampled in that call: its shares move with the machine's load. Counting the
lines the interpreter executes (a trace function, `sys.settrace`) is deterministic instead: the same turn executes the
same lines on any machine, so a change to devhost, the Durable SDK's use or the app's own code shows here by owner,
exactly, where the instruction count (`bench instructions`) gives only the total. It counts Python only: work in C
(SQLite, json's scanner, pydantic-core) is not in it (callgrind puts ~85 % of a durable turn's instructions in the
interpreter itself). Owners are `bench/cpu_breakdown.py`'s: each call is charged to the innermost frame of its stack
that has an owner, so library code (pydantic, json, asyncio) counts for the app code, devhost or SDK that called it.

The durable side counts the host's threads (event loop, the orchestrators' sync pool, the store's thread) over
turns started over HTTP by a client in a process of its own; the in-process side counts the runner's thread. The model
server runs in a process of its own on both sides. About 10 s for 6 turns a side (tracing slows them ~20x).

    python -m bench lines [--turns 6] [--no-record]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from bench.cpu_breakdown import stack_owner
from bench.report import command_line, publish, section, table

TURNS_PER_CONVERSATION = 3  # as `bench overhead`
Tracer = Callable[[FrameType, str, Any], Any]


class LineCounter:
    """Counts the lines executed by the threads it traces, by owner, while `counting` is on. Tracing costs a call per
    line, so nothing is traced until a frame starts while counting is on (a frame that started before is not)."""

    def __init__(self) -> None:
        self.lines: Counter[str] = Counter()
        self.counting = False
        self._local: dict[str, Tracer] = {}

    def _on_call(self, frame: FrameType, event: str, arg: Any) -> Tracer | None:
        if not self.counting:
            return None
        owner = stack_owner(frame)
        self.lines[owner] += 1  # the call (or a generator's resumption) itself
        return self._local.get(owner) or self._local.setdefault(owner, self._line_tracer(owner))

    def _line_tracer(self, owner: str) -> Tracer:
        lines = self.lines

        def on_line(frame: FrameType, event: str, arg: Any) -> Tracer:
            if event == "line":
                lines[owner] += 1
            return on_line

        return on_line

    @contextmanager
    def tracing_new_threads(self) -> Iterator[LineCounter]:
        """Threads started inside the block are traced (for their whole life)."""
        threading.settrace(self._on_call)
        try:
            yield self
        finally:
            threading.settrace(None)  # type: ignore[arg-type]

    @contextmanager
    def tracing_this_thread(self) -> Iterator[LineCounter]:
        sys.settrace(self._on_call)
        try:
            yield self
        finally:
            sys.settrace(None)

    @contextmanager
    def counted(self) -> Iterator[LineCounter]:
        self.counting = True
        try:
            yield self
        finally:
            self.counting = False


def count_durable(turns: int) -> Counter[str]:
    from bench.overhead_bench import _durable_turn
    from bench.workload.client_process import client_process
    from bench.workload.host import workload_host
    from bench.workload.model_process import model_server_process

    counter = LineCounter()
    with model_server_process(0.0) as url, tempfile.TemporaryDirectory() as workdir:
        store, state = f"{workdir}/sessions.sqlite3", f"{workdir}/engine.sqlite3"
        with counter.tracing_new_threads(), workload_host(url, store_path=store, state_path=state) as host, \
                client_process(host.base_url) as client:
            for _ in range(TURNS_PER_CONVERSATION):  # warm-up: imports, store, model clients, caches
                _durable_turn(host, None, client)
            session_id = None
            with counter.counted():  # this thread only waits for the engine: it starts no traced frame
                for turn in range(turns):
                    session_id = _durable_turn(host, session_id if turn % TURNS_PER_CONVERSATION else None, client)
    return counter.lines


def count_in_process(turns: int) -> Counter[str]:
    from bench.overhead_bench import InProcessSide
    from bench.workload.model_process import model_server_process

    counter = LineCounter()
    with model_server_process(0.0) as url:
        side = InProcessSide(url)
        try:
            side.conversation(0)  # warm-up
            with counter.tracing_this_thread(), counter.counted():
                for index in range(turns // TURNS_PER_CONVERSATION):
                    side.conversation(index + 1)
        finally:
            side.close()
    return counter.lines


def rows(durable: Counter[str], in_process: Counter[str], turns: int) -> list[list[object]]:
    """Lines per turn by owner (durable's largest first), and the totals."""
    owners = [owner for owner, _ in durable.most_common()] + [o for o in in_process if o not in durable]
    found: list[list[object]] = [
        [owner, round(durable[owner] / turns), round(in_process[owner] / turns)] for owner in owners
    ]
    total_d, total_i = sum(durable.values()) / turns, sum(in_process.values()) / turns
    return [*found, ["all", round(total_d), round(total_i)], ["added by durability", round(total_d - total_i), ""]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=6, help=f"a multiple of {TURNS_PER_CONVERSATION}")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if args.turns <= 0 or args.turns % TURNS_PER_CONVERSATION:
        parser.error(f"--turns must be a positive multiple of {TURNS_PER_CONVERSATION}")
    durable, in_process = count_durable(args.turns), count_in_process(args.turns)
    body = table(["owner", "durable turn, lines", "in-process turn, lines"], rows(durable, in_process, args.turns))
    notes = (
        "One turn = `blobs 2 size 200` (3 model calls, 2 tool calls), 0 ms model, sessions of "
        f"{TURNS_PER_CONVERSATION} turns, as `bench overhead`. Python lines executed (`sys.settrace` line events and "
        "calls), charged to the owner of the innermost frame with one (`bench/cpu_breakdown.py`); C work (SQLite, "
        "json, pydantic-core) is not counted. The same within ~0.5 % from run to run (the event loop's count moves "
        "a few percent with how I/O arrives): compare commits with it, by owner."
    )
    publish(section("Python lines per turn, by owner", command_line("bench.lines_bench"), body, notes),
            record=not args.no_record)


if __name__ == "__main__":
    main()
