"""CPU accounting for benchmarks (Linux /proc): a process tree's CPU time and the whole machine's busy share.

Together they say what limited a batch: the machine (every core busy) or one process (a single core saturated while
the machine still had room), which is the question "is the runtime the bottleneck?".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """The process and its direct children (devhost and its worker processes)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *(int(child) for child in children)]


def _machine_ticks() -> tuple[int, int]:
    """(all ticks, idle + iowait ticks) summed over every core since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(values), values[3] + values[4]


@dataclass
class CpuWindow:
    """CPU used by a process tree and by the machine between `start()` and `stop()`."""

    pids: list[int]

    def start(self) -> CpuWindow:
        self._before = [cpu_seconds(pid) for pid in self.pids]
        self._machine_before = _machine_ticks()
        return self

    def stop(self) -> CpuWindow:
        self.per_process = [cpu_seconds(pid) - before for pid, before in zip(self.pids, self._before, strict=True)]
        total, idle = (now - before for now, before in zip(_machine_ticks(), self._machine_before, strict=True))
        self.machine_busy = 1 - idle / total if total else 0.0
        return self

    @property
    def total(self) -> float:
        return sum(self.per_process)

    @property
    def busiest(self) -> float:
        return max(self.per_process)
