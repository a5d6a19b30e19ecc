"""Deciding an approval at the terminal: approve, reject with a reason, or edit the arguments in $EDITOR (an edit the
tool's schema refuses is shown with the error and opened again)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from typing import Any

from rich.console import Console
from rich.json import JSON
from rich.panel import Panel
from rich.prompt import Prompt

from agentctl.client import AgentsClient, ApiError

CHOICES = {"a": "approve", "r": "reject", "e": "edit"}


def show_request(console: Console, approval: dict[str, Any]) -> None:
    title = f"Approval needed: [bold]{approval.get('tool', '?')}[/bold]"
    subtitle = f"expires {approval['expires_at']}" if approval.get("expires_at") else None
    console.print(Panel(JSON.from_data(approval.get("arguments") or {}), title=title, subtitle=subtitle))


def decide_interactively(console: Console, client: AgentsClient, run_id: str, approval: dict[str, Any]) -> str:
    """Ask, send the decision; returns what happened (`approved`, `rejected`, or why nothing was decided)."""
    show_request(console, approval)
    choice = Prompt.ask("Approve (a), reject (r) or edit the arguments (e)?", choices=list(CHOICES), console=console)
    approval_id = approval["approval_id"]
    try:
        if choice == "r":
            reason = Prompt.ask("Reason (optional)", default="", console=console) or None
            client.decide(run_id, approval_id, "reject", reason=reason)
            return "rejected"
        if choice == "a":
            client.decide(run_id, approval_id, "approve")
            return "approved"
        return _edit_and_approve(console, client, run_id, approval)
    except ApiError as error:
        if error.code in ("approval_already_decided", "approval_expired", "run_finished"):
            console.print(f"[yellow]Not decided: {error.detail}[/yellow]")
            return error.code
        raise


def _edit_and_approve(console: Console, client: AgentsClient, run_id: str, approval: dict[str, Any]) -> str:
    text = json.dumps(approval.get("arguments") or {}, indent=2)
    while True:
        text = edit_text(text)
        try:
            edited = json.loads(text)
        except json.JSONDecodeError as error:
            console.print(f"[red]Not valid JSON: {error}[/red] - opening the editor again.")
            continue
        if not isinstance(edited, dict):
            console.print("[red]The arguments must be a JSON object[/red] - opening the editor again.")
            continue
        try:
            client.decide(run_id, approval["approval_id"], "approve", arguments=edited)
            return "approved"
        except ApiError as error:
            if error.code != "invalid_arguments":
                raise
            console.print(f"[red]The tool refuses these arguments: {error.detail}[/red] - opening the editor again.")


def edit_text(text: str) -> str:
    """Open `text` in $VISUAL / $EDITOR (default `vi`) and return what was saved."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as handle:
        handle.write(text)
        path = handle.name
    try:
        subprocess.run([*shlex.split(editor), path], check=True)
        with open(path, encoding="utf-8") as saved:
            return saved.read()
    finally:
        os.unlink(path)
