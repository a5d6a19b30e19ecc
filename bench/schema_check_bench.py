"""The cost of checking a value against a JSON Schema from outside: the app's bounded validator vs plain jsonschema.

Ours is what the app runs: `json_schemas.safe_validator` (jsonschema's class for the dialect with the branching
keywords under the check's deadline, `schema_costs`; patterns on `regex` within a budget, `schema_patterns`;
`uniqueItems` in one pass) and `best_error` for a client's output format (`RunOverrides.parse_output`) or
`schema_errors_of` for an MCP tool's arguments (`McpTool.validate_arguments`). Plain is the dialect's own validator
class (`validators.validator_for(schema)(schema)`) with `best_match(iter_errors(...))` / `iter_errors`. Each
validator is built once, outside the timing; building one is timed on its own (`safe_validator` checks the schema
against its meta-schema and walks it; plain: `check_schema` and the constructor). The sides alternate round after
round in one process (a shared VM's speed drifts within minutes); figures are p50 per check.

Cases: (a) a small structured answer (~1 KB), (b) a large legitimate answer (~2 MB: 40,000 objects whose names match
a pattern; `bench/workload/schemas.py`, which the tests of bounded checks share), (c) an MCP tool's arguments. Then
the time the app takes to refuse hostile schemas (plain jsonschema is not run on them: exponential, hours), against
the bound the app sets.

    python -m bench schema_check [--rounds 15] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Callable
from itertools import islice
from typing import Any

from jsonschema import exceptions as schema_errors
from jsonschema import validators

from agent_runtime import schema_costs, schema_patterns
from agent_runtime.json_schemas import SchemaRefusedError, best_error, safe_validator, schema_errors_of
from agent_runtime.mcp import McpTool, McpToolSpec
from bench.checks import expect
from bench.report import command_line, median, publish, section, table
from bench.workload.schemas import ROWS_SCHEMA, nested, rows

EVIL_PATTERN = "^(a|aa)+$"
HOSTILE_STRING = "a" * 80 + "!"
REFUSAL_SLACK = 1.5
"""Target: a hostile check is refused within this many times its bound (the deadline is checked between keywords)."""

# (a) a small structured answer: a client's output format.
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["approve", "reject", "escalate"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "summary": {"type": "string", "maxLength": 500},
        "findings": {
            "type": "array",
            "maxItems": 20,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                    "severity": {"type": "string", "enum": ["low", "medium", "high"]},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                },
                "required": ["id", "severity"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["verdict", "confidence", "summary", "findings"],
    "additionalProperties": False,
}
ANSWER: dict[str, Any] = {
    "verdict": "escalate",
    "confidence": 0.82,
    "summary": "The invoice totals disagree with the purchase order on three lines; the supplier is new.",
    "findings": [
        {"id": f"INV-{index:04d}", "severity": ("low", "medium", "high")[index % 3],
         "note": None if index % 2 else "Quantity on the invoice exceeds the order by two units."}
        for index in range(9)
    ],
}

# (b) a large legitimate answer: 40,000 rows, each name matched by a pattern through anyOf and a $ref.
ROWS: dict[str, Any] = {"rows": rows(40_000)}

# (c) an MCP tool's input schema and a model's arguments.
TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "array", "minItems": 1, "maxItems": 10,
               "items": {"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$"}},
        "subject": {"type": "string", "minLength": 1, "maxLength": 200},
        "body": {"type": "string", "maxLength": 10_000},
        "priority": {"type": "string", "enum": ["low", "normal", "high"], "default": "normal"},
        "attachments": {"type": "array", "items": {"$ref": "#/$defs/attachment"}},
        "send_at": {"anyOf": [{"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}"}, {"type": "null"}]},
    },
    "required": ["to", "subject", "body"],
    "additionalProperties": False,
    "$defs": {"attachment": {
        "type": "object",
        "properties": {"path": {"type": "string", "pattern": "^/[A-Za-z0-9._/-]+$"}, "inline": {"type": "boolean"}},
        "required": ["path"],
    }},
    "title": "send_emailArguments",
}
ARGUMENTS: dict[str, Any] = {
    "to": ["ann@example.com", "bob.smith@example.org"],
    "subject": "Quarterly report",
    "body": "Hello both, the quarterly report is ready. " * 8,
    "priority": "high",
    "attachments": [{"path": "/reports/2026/q3.pdf", "inline": False}, {"path": "/reports/2026/q3-notes.txt"}],
    "send_at": None,
}


def as_text(value: Any) -> str:
    """The value's JSON as a model would write it (json.dumps' separators): its length sets the app's deadline."""
    return json.dumps(value)


def cell(text: str) -> str:
    return text.replace("|", "\\|")  # a markdown table's cell


def plain_validator(schema: dict[str, Any]) -> Any:
    cls = validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _per_call_ms(check: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        check()
    return (time.perf_counter() - started) / calls * 1000


def comparison(label: str, chars: str, ours_ms: float, plain_ms: float) -> list[object]:
    """A row of the legitimate checks' table."""
    return [label, chars, f"{ours_ms:.3f}", f"{plain_ms:.3f}", f"{ours_ms / plain_ms:.2f}"]


def compare(ours: Callable[[], object], plain: Callable[[], object], rounds: int, calls: int) -> tuple[float, float]:
    """p50 ms per call of each side: `rounds` rounds, the sides alternating (and swapping who goes first)."""
    ours(), plain()  # warm: compiled patterns, jsonschema's caches
    samples: dict[str, list[float]] = {"ours": [], "plain": []}
    sides = [("ours", ours), ("plain", plain)]
    for index in range(rounds):
        for name, check in sides if index % 2 == 0 else reversed(sides):
            samples[name].append(_per_call_ms(check, calls))
    return median(samples["ours"]), median(samples["plain"])


def legitimate_checks(rounds: int) -> list[list[object]]:
    rows = []
    cases: list[tuple[str, dict[str, Any], Any, str, int]] = [
        ("(a) small answer (output format)", ANSWER_SCHEMA, ANSWER, "best", 200),
        ("(b) large answer, 40,000 rows", ROWS_SCHEMA, ROWS, "best", 1),
        ("(c) MCP tool arguments", TOOL_SCHEMA, ARGUMENTS, "all", 200),
    ]
    for label, schema, value, kind, calls in cases:
        text = as_text(value)
        ours_v, plain_v = safe_validator(schema), plain_validator(schema)
        if kind == "best":
            def ours(v: Any = ours_v, value: Any = value, size: int = len(text)) -> object:
                return best_error(v, value, value_chars=size)

            def plain(v: Any = plain_v, value: Any = value) -> object:
                return schema_errors.best_match(v.iter_errors(value))
        else:
            def ours(v: Any = ours_v, value: Any = value, size: int = len(text)) -> object:
                return schema_errors_of(v, value, value_chars=size)

            def plain(v: Any = plain_v, value: Any = value) -> object:
                return list(islice(v.iter_errors(value), 10))
        expect(ours() in (None, []) and plain() in (None, []), f"{label}: the value does not fit its schema")
        rows.append(comparison(label, f"{len(text):,}", *compare(ours, plain, rounds, calls)))
    # (c) as the tool step runs it: JSON text in, parsed, checked, the arguments model out.
    tool = McpTool(McpToolSpec(server="mail", remote_name="send_email", name="send_email", input_schema=TOOL_SCHEMA),
                   None)
    text, plain_v = as_text(ARGUMENTS), plain_validator(TOOL_SCHEMA)
    rows.append(comparison(
        "(c) as the step runs it: `McpTool.validate_arguments(text)` vs json.loads + plain", f"{len(text):,}",
        *compare(lambda: tool.validate_arguments(text),
                 lambda: list(islice(plain_v.iter_errors(json.loads(text)), 10)), rounds, 200)))
    for label, schema in (("building the validator: (a)'s schema", ANSWER_SCHEMA),
                          ("building the validator: (c)'s schema", TOOL_SCHEMA)):
        rows.append(comparison(label, f"{len(as_text(schema)):,} (schema)",
                               *compare(lambda s=schema: safe_validator(s), lambda s=schema: plain_validator(s),
                                        rounds, 50)))
    return rows


def hostile_checks(repeat: int) -> tuple[list[list[object]], bool]:
    """Seconds until each hostile check is refused (median of `repeat`: the thread's CPU time, and the wall clock's),
    against the app's bound for it (CPU time: `schema_costs`, `schema_patterns`)."""
    verdict = {"type": "object", "properties": {"verdict": {"type": "string", "pattern": EVIL_PATTERN}}}
    cases: list[tuple[str, dict[str, Any], Any, Callable[..., object], str]] = [
        (f"pattern {EVIL_PATTERN!r} vs 80 a's and '!' (output format)", verdict, {"verdict": HOSTILE_STRING},
         best_error, "patterns"),
        ("the same pattern in an MCP tool's schema, 20 such arguments", {
            "type": "object", "additionalProperties": {"type": "string", "pattern": EVIL_PATTERN}},
         {f"a{index}": HOSTILE_STRING for index in range(20)}, schema_errors_of, "patterns"),
        ("anyOf nested 40 deep through $refs, a wrong value", nested("anyOf"), {"x": "not a number"}, best_error,
         "deadline"),
        ("oneOf nested 40 deep through $refs, a right value", nested("oneOf"), {"x": 1}, schema_errors_of,
         "deadline"),
    ]
    rows, all_met = [], True
    for label, schema, value, check, bounded_by in cases:
        validator, size = safe_validator(schema), len(as_text(value))
        seconds, cpu_seconds = [], []
        for _ in range(repeat):
            started, cpu_started = time.perf_counter(), time.thread_time()
            try:
                check(validator, value, value_chars=size)
            except SchemaRefusedError:
                seconds.append(time.perf_counter() - started)
                cpu_seconds.append(time.thread_time() - cpu_started)
            else:
                expect(False, f"{label}: not refused")
        if bounded_by == "patterns":  # the matches made before the budget ran out each add their allowance: few
            bound = schema_patterns.MATCH_BUDGET_SECONDS
        else:
            bound = schema_costs.CHECK_SECONDS + schema_costs.CHECK_SECONDS_PER_CHAR * size
        took = median(cpu_seconds)  # the bounds are the checking thread's CPU time (a busy VM stretches the wall's)
        met = took <= REFUSAL_SLACK * bound
        all_met = all_met and met
        rows.append([cell(label), f"{size:,}", f"{bound:.2f} ({bounded_by})", f"{took:.3f}", f"{median(seconds):.3f}",
                     "yes" if met else "NO"])
    return rows, all_met


def thread_hop_ms(calls: int = 2_000) -> float:
    """p50 ms of `await asyncio.to_thread(<nothing>)`: what running a check on a worker thread adds."""

    async def hops() -> list[float]:
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            await asyncio.to_thread(int)
            samples.append((time.perf_counter() - started) * 1000)
        return samples

    return median(asyncio.run(hops()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15, help="rounds of each legitimate case, sides alternating")
    parser.add_argument("--repeat", type=int, default=3, help="refusals timed per hostile case")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    legitimate = legitimate_checks(args.rounds)
    hostile, met = hostile_checks(args.repeat)
    hop = thread_hop_ms()
    body = table(["check", "value chars", "ours ms (p50)", "plain jsonschema ms (p50)", "ours / plain"], legitimate)
    body += "\n\nHostile schemas: time until the app refuses the check (plain jsonschema: not run, hours):\n\n"
    body += table(["hostile check", "value chars", "bound s (CPU)", "refused after CPU s (median)",
                   "refused after wall s (median)", f"within {REFUSAL_SLACK}x the bound"], hostile)
    body += (f"\n\nTarget: every hostile check refused within {REFUSAL_SLACK}x its bound: "
             f"{'met' if met else 'NOT met'}. A thread hop (`asyncio.to_thread`, what an MCP tool's argument check "
             f"pays to run off the event loop) costs {hop:.3f} ms p50.")
    notes = (f"Legitimate checks: {args.rounds} rounds, ours and plain alternating (swapping who goes first), 200 "
             "checks a round for (a) and (c), 1 for (b), 50 validator builds; the p50 is over the rounds' per-check "
             "means. Value sizes are of `json.dumps` text (they set the app's deadline); (b) is past what the app "
             "checks of a run's answer (`MAX_INSTANCE_CHARS`, 2,000,000: `parse_output` refuses a larger one "
             "unchecked), the validator's cost measured all the same. Hostile: "
             f"{args.repeat} refusals each; the pattern budget is {schema_patterns.MATCH_BUDGET_SECONDS} s of "
             f"matching per check plus {schema_patterns.MATCH_ALLOWANCE_SECONDS * 1e6:.0f} µs a match; the deadline "
             f"{schema_costs.CHECK_SECONDS} s plus {schema_costs.CHECK_SECONDS_PER_CHAR * 1e6:.0f} µs per character; "
             "both are the checking thread's CPU time (the wall clock's time is longer when the machine is busy).")
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores / 2:
        notes += (f" The machine was shared while this ran (load average {load:.1f} on {cores} cores: other work, such"
                  " as another engineer's tests): absolute times are inflated; the ratios come from sides alternating"
                  " in the same rounds.")
    publish(section("Schema checks: bounded validator vs plain jsonschema", command_line("bench.schema_check_bench"),
                    body, notes), record=not args.no_record)


if __name__ == "__main__":
    main()
