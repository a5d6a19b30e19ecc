"""`python -m bench` lists the benchmarks; `python -m bench NAME [args]` runs one; `python -m bench all` runs the
durable-runtime suite (each appends its section to bench/RESULTS.md)."""

from __future__ import annotations

import runpy
import sys

BENCHMARKS: dict[str, tuple[str, str]] = {
    "overhead": ("bench.overhead_bench", "durable run on devhost vs the in-process runner, per turn and per step"),
    "instructions": ("bench.instructions_bench", "instructions per turn under callgrind: durable vs in-process"),
    "lines": ("bench.lines_bench", "Python lines run per turn by owner (devhost, Durable SDK, app): deterministic"),
    "scale": ("bench.scale_bench", "10/50/200-step runs with large tool results: history bytes, payloads, replay"),
    "concurrency": ("bench.concurrency_bench", "10/100/500 concurrent runs over HTTP: throughput, p50/p95/p99"),
    "anchor": ("bench.anchor.anchor_bench", "Microsoft's AgentFunctionApp vs this app on the same devhost/model"),
    "store": ("bench.store_bench", "session store append/read as a session grows (SQLite, local Cosmos)"),
    "store_threading": ("bench.store_threading_bench", "SQLite store point operations inline vs on its worker thread"),
    "devhost": ("bench.devhost_bench", "devhost engine: activity chains, fan-out, concurrent chains"),
    "tracing": ("bench.tracing_bench", "durable turns with OpenTelemetry off vs on (in-memory exporter), per step"),
    "stream": ("bench.stream_bench", "SSE streams: model token to delta latency p50/p95, 200 concurrent streams"),
    "worker": ("bench.worker_bench", "devhost in-process vs the real worker (Python 3.13+): added time per invocation"),
    "capacity": ("bench.capacity_bench", "Durable actions and Cosmos operations/RU per agent turn (docs/capacity.md)"),
    "memory": ("bench.memory_bench", "Python heap kept of completed runs and of runs waiting for approval, by owner"),
    "cold_start": ("bench.cold_start_bench", "import function_app: this app vs Microsoft's sample, CPU and wall"),
    "schema_check": ("bench.schema_check_bench", "JSON Schema checks: the app's bounded validator vs plain jsonschema"),
}
SUITE = ("overhead", "scale", "concurrency")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(__doc__)
        for name, (module, what) in BENCHMARKS.items():
            print(f"  {name:<12} {what}  (python -m {module})")
        return 0
    name, rest = argv[0], argv[1:]
    names = SUITE if name == "all" else (name,)
    for one in names:
        if one not in BENCHMARKS:
            print(f"unknown benchmark {one!r}; choose from: {', '.join(BENCHMARKS)}", file=sys.stderr)
            return 2
        module = BENCHMARKS[one][0]
        sys.argv = [module, *rest]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
