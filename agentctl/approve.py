"""Deciding an approval at the terminal: approve, reject with a reason, or edit the arguments in $EDITOR (an edit the
tool's schema refuses is shown with the error and opened again; with no $EDITOR, the first editor installed, named)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from typing import Any

from rich.console import Console, RenderableType
from rich.json import JSON
from rich.markup import escape
from rich.panel import Panel
from rich.prompt import Prompt
from rich.table import Table
from rich.text import Text

from agentctl import problems
from agentctl.client import AgentsClient, ApiError
from agentctl.interrupted import forget_interrupted_print

CHOICES = {"a": "approve", "r": "reject", "e": "edit"}
# How a server that does not say `editable` names a workflow's sign-off gate (approve or reject only): its fallback.
OLDER_SERVERS_GATE_PREFIX = "workflow_gate:"


def may_edit(approval: dict[str, Any]) -> bool:
    """Whether to offer an edit of the arguments: as the server says (`editable`: not a workflow's gate, not under
    separation of duties, a caller who may decide); a server that does not say refuses an edit of a gate only."""
    if "editable" in approval:
        return bool(approval["editable"])
    return not str(approval.get("tool", "")).startswith(OLDER_SERVERS_GATE_PREFIX)


def arguments_view(arguments: Any) -> RenderableType:
    """One row per argument: strings as text (an email's body reads as an email), anything else as JSON."""
    if not isinstance(arguments, dict) or not arguments:
        return JSON.from_data(arguments)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for name, value in arguments.items():
        grid.add_row(name, Text(value) if isinstance(value, str) else JSON.from_data(value))
    return grid


def show_request(console: Console, approval: dict[str, Any]) -> None:
    title = f"Approval needed: [bold]{escape(str(approval.get('tool', '?')))}[/bold]"
    subtitle = f"expires {approval['expires_at']}" if approval.get("expires_at") else None
    console.print(Panel(arguments_view(approval.get("arguments") or {}), title=title, subtitle=subtitle))


def decide_interactively(console: Console, client: AgentsClient, run_id: str, approval: dict[str, Any]) -> str:
    """Ask, send the decision, confirm it; returns what happened (`approved`, `rejected`, or why nothing was
    decided). Ctrl-C at a prompt ends its line before it goes on up (the run keeps waiting for a decision)."""
    show_request(console, approval)
    tool = approval.get("tool", "the call")
    approval_id = approval["approval_id"]
    if approval.get("decidable") is False:  # e.g. its requester, under separation of duties (absent: ask, as before)
        console.print("[yellow]Not yours to decide now (another approver's, or past its deadline).[/yellow]")
        return "not_decidable"
    try:
        if may_edit(approval):
            choice = Prompt.ask("Approve (a), reject (r) or edit the arguments (e)?", choices=list(CHOICES),
                                console=console)
        else:
            choice = Prompt.ask("Approve (a) or reject (r)?", choices=["a", "r"], console=console)
        if choice == "r":
            reason = Prompt.ask("Reason for the agent [dim](Enter for none)[/dim]", default="", show_default=False,
                                console=console).strip() or None
            client.decide(run_id, approval_id, "reject", reason=reason)
            console.print(f"[red]✗ Rejected {escape(tool)}{escape(f': {reason}') if reason else ''}[/red]",
                          highlight=False)
            return "rejected"
        if choice == "a":
            client.decide(run_id, approval_id, "approve")
            console.print(f"[green]✓ Approved {escape(tool)}[/green]", highlight=False)
            return "approved"
        return _edit_and_approve(console, client, run_id, approval)
    except KeyboardInterrupt:
        forget_interrupted_print(console)
        console.print()
        raise
    except ApiError as error:
        if error.code in ("approval_already_decided", "approval_expired", "run_finished"):
            console.print(f"[yellow]Not decided: {error.detail}[/yellow]")
            return error.code
        raise


def _edit_and_approve(console: Console, client: AgentsClient, run_id: str, approval: dict[str, Any]) -> str:
    text = json.dumps(approval.get("arguments") or {}, indent=2)
    while True:
        text = edit_text(text, console)
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
            console.print(f"[green]✓ Approved {escape(approval.get('tool', 'the call'))} with your edits[/green]",
                          highlight=False)
            return "approved"
        except ApiError as error:
            if error.code != "invalid_arguments":
                raise
            console.print(f"[red]The tool refuses these arguments: {error.detail}[/red] - opening the editor again.")


EDITORS = ("editor", "nano", "vi")  # Debian's `editor` alternative first, then the usual ones


def pick_editor(console: Console) -> list[str]:
    """$VISUAL / $EDITOR, else the first editor installed (saying which, and how to choose another)."""
    chosen = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if chosen:
        return shlex.split(chosen)
    for name in EDITORS:
        path = shutil.which(name)
        if path:
            console.print(f"[dim]No $EDITOR set: opening {name} ({path}). Set EDITOR to use another.[/dim]")
            return [path]
    raise problems.of_missing_editor(EDITORS)


def edit_text(text: str, console: Console) -> str:
    """Open `text` in the editor and return what was saved (the text unchanged if the editor fails)."""
    editor = pick_editor(console)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as handle:
        handle.write(text)
        path = handle.name
    try:
        try:
            code = subprocess.run([*editor, path], check=False).returncode
        except OSError as error:
            raise problems.Problem(f"cannot start the editor {editor[0]!r} ({error.strerror}): check $EDITOR",
                                   problems.NOT_FOUND) from None
        if code != 0:
            console.print(f"[yellow]The editor exited with status {code}: the arguments were not changed.[/yellow]")
            return text
        with open(path, encoding="utf-8") as saved:
            return saved.read()
    finally:
        os.unlink(path)
