"""With no tracer or meter provider installed (the API's defaults record nothing), a step builds no span, parent
context or measurement; once providers are installed - at any time, they are asked on each use - every span and
metric is recorded as before. Run in a fresh process (`late_provider.py`): a process has one global provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_telemetry_costs_nothing_until_a_provider_is_installed_and_records_everything_after() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "APPLICATIONINSIGHTS_"))}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("late_provider.py"))], cwd=REPO_ROOT,
        env={**clean, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=120, check=True,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] == {
        "tracing": False, "metering": False, "run_parent": False, "passed_through": True, "tool_recording": False,
    }
    after = seen["after"]
    assert after.pop("spans") == ["chat m", "chat m", "execute_tool t"]
    assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage", "agent_run.step.duration"} <= set(
        after.pop("metrics")
    )
    assert after == {
        "tracing": True, "metering": True, "run_parent": True, "passed_through": False, "tool_recording": True,
    }
