"""Record `cases/demo_email.json` from a real demo run: `python tests/replay/record_demo_case.py`.

The app on an in-process devhost with the offline demo model (the `assistant` agent as shipped): a weather question,
then in the same session an email that a person approves; the email run's transcript is what is saved.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CASE = Path(__file__).resolve().parent / "cases" / "demo_email.json"


def record() -> dict:
    sys.path.insert(0, str(REPO))
    from devhost.testing import InProcessHost

    env = {"SESSION_STORE_PATH": ":memory:", "TASKHUB_NAME": "replay", "MODEL_PROVIDER": "auto"}
    with InProcessHost(REPO, clock="virtual", env=env) as host:
        http = host.client
        first = http.post("/api/agents/assistant/runs",
                          json={"input": "What is the weather in Paris?", "wait_seconds": 10}).json()
        assert first["status"] == "completed", first
        email = http.post("/api/agents/assistant/runs", json={
            "input": "Email bob@example.com that the report is ready", "session_id": first["session_id"],
            "wait_seconds": 10,
        }).json()
        assert email["status"] == "requires_action", email
        approval = email["pending_approvals"][0]["approval_id"]
        decided = http.post(f"/api/runs/{email['run_id']}/approvals/{approval}", json={"decision": "approve"})
        assert decided.status_code == 202, decided.text
        host.wait_until_idle()
        done = http.get(f"/api/runs/{email['run_id']}").json()
        assert done["status"] == "completed", done
        return http.get(f"/api/runs/{email['run_id']}/transcript").json()


if __name__ == "__main__":
    CASE.parent.mkdir(parents=True, exist_ok=True)
    CASE.write_text(json.dumps(record(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {CASE}")
