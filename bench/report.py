"""Recording benchmark results: the machine line and a markdown section appended to `bench/RESULTS.md`."""

from __future__ import annotations

import os
import platform
import statistics
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def machine() -> str:
    # The load average says whether other work shared the machine while the benchmark ran.
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at the end"
    )


def command_line(module: str) -> str:
    return " ".join(["python -m", module, *sys.argv[1:]])


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (no interpolation: a reported p99 is a latency that was observed)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def section(title: str, command: str, body: str, notes: str = "") -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [f"\n## {title} ({stamp})\n", f"Machine: {machine()}. Command: `{command}`\n", body]
    if notes:
        parts += ["", notes]
    return "\n".join(parts) + "\n"


def publish(text: str, *, record: bool) -> None:
    """Print the section and, unless `record` is False, append it to bench/RESULTS.md."""
    print(text)
    if record:
        with RESULTS.open("a", encoding="utf-8") as out:
            out.write(text)
