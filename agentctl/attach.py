"""Attaching the terminal to a run: text as it is written, a spinner while a step runs, a line per tool call and
result, approvals asked for (interactive) or reported (exit code 4), usage at the end. Ctrl-C detaches."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.status import Status as Spinner

from agentctl.approve import decide_interactively, show_request
from agentctl.client import AgentsClient
from agentctl.events import Answer, Decision, Done, Status, StepEnded, TextDelta, ToolCall, ToolResult
from agentctl.exit_codes import DETACHED, WAITING_FOR_APPROVAL, for_status
from agentctl.follow import follow
from agentctl.interrupted import forget_interrupted_print

RESULT_PREVIEW = 200


def waiting_hint(run_id: str, pending: list[dict[str, Any]] | None = None) -> str:
    """What a session that cannot prompt says when the run waits for a person (it exits 4): where to decide, unless
    the app says none of its `pending` approvals is the caller's to decide (their inbox would not list them)."""
    if pending and all(approval.get("decidable") is False for approval in pending):
        return f"Waiting for another approver: not yours to decide (run {run_id})"
    return f"Waiting for approval. Decide with: agentctl approvals (run {run_id})"


class Attachment:
    def __init__(
        self, console: Console, client: AgentsClient, *, interactive: bool, live: bool = True, workflow: bool = False
    ) -> None:
        self.console = console
        self.client = client
        self.interactive = interactive
        self.live = live  # False: only the end (--wait / --json)
        self.workflow = workflow  # a workflow run: its own poll and stream routes; its gates are asked like approvals
        self._spinner: Spinner | None = None
        self._shown = ""  # text of the answer being written, as far as printed
        self._asked: set[str] = set()
        self.final: dict[str, Any] | None = None

    def run(self, view: dict[str, Any], *, header: str | None = None) -> int:
        """Follow the run; `header` is printed first, inside the Ctrl-C handling (a Ctrl-C right after it detaches
        with the re-attach hint too)."""
        try:
            if header:
                self.console.print(header)
            return self._follow(view)
        except KeyboardInterrupt:
            forget_interrupted_print(self.console)
            self._stop_spinner()
            self.console.print(f"\nDetached: run {view['run_id']} goes on. "
                               f"Re-attach with: agentctl show {view['run_id']} --follow")
            return DETACHED
        finally:
            self._stop_spinner()

    def _follow(self, view: dict[str, Any]) -> int:
        for event in follow(self.client, view, workflow=self.workflow):
            if isinstance(event, Done):
                self.final = event.view
                self._end_text()
                if self.live:
                    self._print_usage(event.view)
                return for_status(event.view["status"])
            if not self.live:
                if isinstance(event, Status) and event.status == "requires_action" and not self.interactive:
                    self.final = self.client.poll(view["run_id"], workflow=self.workflow)
                    return WAITING_FOR_APPROVAL  # the caller prints the view, with `waiting_hint`
                if isinstance(event, Status) and event.status == "requires_action":
                    self._ask(view["run_id"], event.pending_approvals)
                continue
            self._show(view["run_id"], event)
            if isinstance(event, Status) and event.status == "requires_action":
                if not self.interactive:
                    self.final = self.client.poll(view["run_id"], workflow=self.workflow)
                    for approval in event.pending_approvals:
                        show_request(self.console, approval)
                    self.console.print(waiting_hint(view["run_id"], event.pending_approvals))
                    return WAITING_FOR_APPROVAL
                self._ask(view["run_id"], event.pending_approvals)
        return 1  # the stream ended without its `done` event

    def _show(self, run_id: str, event: object) -> None:
        if isinstance(event, TextDelta):
            self._stop_spinner()
            self.console.print(event.text, end="", markup=False, highlight=False, soft_wrap=True)
            self._shown += event.text
        elif isinstance(event, Answer):
            self._stop_spinner()
            if event.text.startswith(self._shown):
                self.console.print(event.text[len(self._shown):], end="", markup=False, highlight=False, soft_wrap=True)
            else:  # the answer was retried and came out different: show the final one
                self.console.print("\n" + event.text, end="", markup=False, highlight=False, soft_wrap=True)
            self._shown = ""
            self.console.print()
        elif isinstance(event, ToolCall):
            self._end_text()
            arguments = event.arguments if isinstance(event.arguments, str) else json.dumps(event.arguments)
            self.console.print(f"[cyan]→ {event.name}[/cyan]({arguments})", highlight=False)
        elif isinstance(event, ToolResult):
            text = f"error: {event.error}" if event.error else json.dumps(event.result, default=str)
            if len(text) > RESULT_PREVIEW:
                text = text[: RESULT_PREVIEW - 1] + "…"
            style = "red" if event.error else "dim"
            self.console.print(f"[{style}]  ← {text}[/{style}]", highlight=False)
        elif isinstance(event, StepEnded):
            self._end_text()
            style = "red" if event.error else "dim"
            error = f": {event.error}" if event.error else ""
            self.console.print(f"[{style}]step {escape(event.step)} ({escape(event.kind)}) {escape(event.status)}"
                               f"{escape(error)}[/{style}]", highlight=False)
        elif isinstance(event, Decision):
            who = f" by {event.decided_by}" if event.decided_by else ""
            verdict = "[green]approved[/green]" if event.approved else "[red]rejected[/red]"
            reason = f" ({event.reason})" if event.reason else ""
            self.console.print(f"  {verdict}{who}{reason}", highlight=False)
        elif isinstance(event, Status) and event.status in ("queued", "in_progress"):
            self._start_spinner("working…")

    def _ask(self, run_id: str, pending: list[dict[str, Any]]) -> None:
        self._stop_spinner()
        self._end_text()
        for approval in pending:
            # One not the caller's to decide is shown once as waiting, and asked once it becomes theirs (an
            # escalation to a role they hold): the key says which of the two was done.
            key = f"{approval['approval_id']}{'' if approval.get('decidable') is not False else ' (waiting)'}"
            if key not in self._asked:
                self._asked.add(key)
                decide_interactively(self.console, self.client, run_id, approval)

    def _end_text(self) -> None:
        if self._shown:
            self.console.print()
            self._shown = ""

    def _print_usage(self, view: dict[str, Any]) -> None:
        usage = view.get("usage") or {}
        if usage:
            self.console.print(
                f"[dim]{view['status']} · tokens in {usage.get('input_tokens', 0)}, "
                f"out {usage.get('output_tokens', 0)}[/dim]"
            )

    def _start_spinner(self, text: str) -> None:
        if self._spinner is None and self.console.is_terminal:
            self._spinner = self.console.status(text)
            self._spinner.start()

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()
            self._spinner = None
