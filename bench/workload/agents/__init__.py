"""Agents served by the benchmark/load devhost (`AGENTS_PACKAGE=bench.workload.agents`)."""
