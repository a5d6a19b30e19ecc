"""`agentctl`'s prompt for a workflow's sign-off gate: approve or reject only. A gate has no arguments to edit (the
app refuses an edit with 422 `arguments_not_editable`), so the prompt does not offer one and answers "e" by asking
again."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from agentctl.approve import decide_interactively


class RecordingClient:
    def __init__(self) -> None:
        self.decisions: list[tuple[Any, ...]] = []

    def decide(self, run_id: str, approval_id: str, decision: str, **options: Any) -> dict[str, Any]:
        self.decisions.append((run_id, approval_id, decision, options))
        return {}


def test_a_gate_is_approved_or_rejected_never_edited(monkeypatch) -> None:
    monkeypatch.setenv("EDITOR", "false")  # were an editor opened, the edit would fail loudly
    console = Console(file=io.StringIO(), width=120)
    answers = iter(["e", "a"])
    monkeypatch.setattr(console, "input", lambda prompt="", **_: (console.print(prompt, end=""), next(answers))[1])
    gate = {
        "approval_id": "wf-1.sign_off.approval",
        "tool": "workflow_gate:sign_off",
        "arguments": {"step": "sign_off", "message": "Publish this draft?", "approver": "editor", "escalated": False},
    }
    client = RecordingClient()

    assert decide_interactively(console, client, "wf-1", gate) == "approved"  # type: ignore[arg-type]

    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Approve (a) or reject (r)?" in shown and "edit the arguments" not in shown
    assert client.decisions == [("wf-1", "wf-1.sign_off.approval", "approve", {})]
