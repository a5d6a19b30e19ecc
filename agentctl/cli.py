"""`agentctl`: command line over the HTTP API.

    agentctl run AGENT "text" [--session ID] [--wait]
    agentctl approvals [--watch]        agentctl runs [--status S] [--agent A]     agentctl sessions
    agentctl show RUN [--follow]        agentctl cancel RUN             (RUN: an agent run or a workflow run)
    agentctl rewind RUN [--follow]      agentctl fork RUN ["new input"] [--wait]   (fork: an agent run)
    agentctl export RUN -o case.json    (a transcript to replay as a test: agent_testing.replay)
    agentctl workflows list             agentctl workflows run NAME --input JSON [--wait]

Global: --url / AGENTS_URL, --key (function key) / AGENTS_KEY, --token (bearer) / AGENTS_TOKEN, --json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from agentctl import problems
from agentctl.approve import decide_interactively
from agentctl.attach import Attachment, waiting_hint
from agentctl.client import AgentsClient, ApiError, Connection
from agentctl.events import FINAL
from agentctl.exit_codes import COMPLETED, DETACHED, STDOUT_CLOSED, USAGE, WAITING_FOR_APPROVAL, for_status
from agentctl.interrupted import forget_interrupted_print

WATCH_INTERVAL_SECONDS = 2.0
# The fewest characters a column other than an id shrinks to in a table.
SHRUNK_COLUMN = 4


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentctl", description="Drive durable agents over their HTTP API.")
    parser.add_argument("--url", help="the app's base URL (default: $AGENTS_URL or http://127.0.0.1:7071)")
    parser.add_argument("--key", help="a function key (default: $AGENTS_KEY)")
    parser.add_argument("--token", help="a bearer token (default: $AGENTS_TOKEN)")
    parser.add_argument("--json", action="store_true", help="machine-readable output, no prompts")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="start a run and follow it live")
    run.add_argument("agent")
    run.add_argument("text")
    run.add_argument("--session", help="continue this session")
    run.add_argument("--wait", action="store_true", help="only print the end (no live output)")

    approvals = commands.add_parser("approvals", help="your inbox of pending approvals; decide them")
    approvals.add_argument("--watch", action="store_true", help="keep watching for new ones (Ctrl-C stops)")

    runs = commands.add_parser("runs", help="your runs")
    runs.add_argument("--status")
    runs.add_argument("--agent")
    commands.add_parser("sessions", help="your sessions")

    show = commands.add_parser("show", help="a run's state")
    show.add_argument("run_id")
    show.add_argument("--follow", action="store_true", help="attach to it until it ends")
    cancel = commands.add_parser("cancel", help="cancel a run")
    cancel.add_argument("run_id")
    rewind = commands.add_parser("rewind", help="a failed run goes on from the step that failed")
    rewind.add_argument("run_id")
    rewind.add_argument("--follow", action="store_true", help="attach to it until it ends")
    fork = commands.add_parser("fork", help="a new session with the conversation before a run, and a run there")
    fork.add_argument("run_id")
    fork.add_argument("text", nargs="?", help="a new input (default: the run's own input again)")
    fork.add_argument("--wait", action="store_true", help="only print the end (no live output)")
    export = commands.add_parser("export", help="save what a run did as a transcript (replay it as a test)")
    export.add_argument("run_id")
    export.add_argument("-o", "--output", required=True, help="the file to write ('-': standard output)")

    workflows = commands.add_parser("workflows", help="workflow definitions and runs")
    workflow_commands = workflows.add_subparsers(dest="workflow_command", required=True)
    workflow_commands.add_parser("list", help="the workflows served")
    start = workflow_commands.add_parser("run", help="start a workflow")
    start.add_argument("name")
    start.add_argument("--input", default="{}", help="the workflow input, a JSON object")
    start.add_argument("--wait", action="store_true", help="wait until it ends")
    return parser


class _Console(Console):
    """A closed stdout ends the command as `main` says (rich's own handling exits 1, "the run failed")."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed stdout fails here, not at the interpreter's exit (where it prints a traceback)
        return code
    except BrokenPipeError:
        # The reader has gone (`agentctl runs | head`): quietly, with the shell's SIGPIPE status. Python's "Note on
        # SIGPIPE": stdout to devnull, so the interpreter's last flush has nowhere to fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return STDOUT_CLOSED


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return USAGE if exit_.code else COMPLETED
    console = _Console(stderr=False, highlight=False)
    errors = Console(stderr=True)
    connection = Connection.from_env(args.url, args.key, args.token)
    try:
        client = AgentsClient(connection)
    except httpx.InvalidURL as error:
        return _report(args, errors, problems.of_transport(error, connection.url))
    interactive = not args.json and sys.stdin.isatty() and console.is_terminal
    try:
        return _dispatch(args, client, console, interactive)
    except ApiError as error:
        problem = problems.of_answer(error, client.connection.url)
        if args.json:
            print(json.dumps({"error": {"status": error.status, "code": error.code, "detail": error.detail}}))
        else:
            errors.print(f"agentctl: {problem}", markup=False, highlight=False, soft_wrap=True)
        return problem.exit_code
    except httpx.HTTPError as error:
        return _report(args, errors, problems.of_transport(error, client.connection.url))
    except problems.Problem as problem:
        return _report(args, errors, problem)
    except KeyboardInterrupt:
        forget_interrupted_print(console)
        console.print()  # end the line a prompt or spinner left open
        return DETACHED
    finally:
        client.close()


def _report(args: argparse.Namespace, errors: Console, problem: problems.Problem) -> int:
    if args.json:
        print(json.dumps({"error": {"code": "client", "detail": problem.message}}))
    else:
        errors.print(f"agentctl: {problem}", markup=False, highlight=False, soft_wrap=True)
    return problem.exit_code


def _dispatch(args: argparse.Namespace, client: AgentsClient, console: Console, interactive: bool) -> int:
    if args.command == "run":
        view = client.start_run(args.agent, args.text, args.session)
        return _attach(args, client, console, view, interactive, live=not args.wait)
    if args.command == "show":
        view = client.view(args.run_id)  # an agent run's or a workflow run's
        if args.follow:
            return _attach(args, client, console, view, interactive, live=True, workflow="workflow" in view)
        return _print_view(args, console, view)
    if args.command == "cancel":
        _emit(args, console, client.cancel(args.run_id), lambda body: f"Run {args.run_id}: {body.get('status')}")
        return COMPLETED
    if args.command == "rewind":
        body = client.rewind(args.run_id)
        if args.follow:
            view = client.view(args.run_id)
            return _attach(args, client, console, view, interactive, live=True, workflow="workflow" in view)
        _emit(args, console, body, lambda b: f"Run {b['run_id']} goes on from {b['rewind']['from_step']} "
              f"(iteration {b['rewind']['iteration']}): agentctl show {b['run_id']} --follow")
        return COMPLETED
    if args.command == "fork":
        view = client.fork(args.run_id, args.text)
        return _attach(args, client, console, view, interactive, live=not args.wait)
    if args.command == "export":
        return _export(args, client, console)
    if args.command == "approvals":
        return _approvals(args, client, console, interactive)
    if args.command == "runs":
        _table(args, console, client.runs(args.status, args.agent), ["run_id", "agent", "status", "updated_at"])
        return COMPLETED
    if args.command == "sessions":
        _table(args, console, client.sessions(), ["session_id", "agent", "run_count", "last_activity_at"])
        return COMPLETED
    return _workflows(args, client, console, interactive)


def _attach(
    args: argparse.Namespace, client: AgentsClient, console: Console, view: dict[str, Any], interactive: bool,
    *, live: bool, workflow: bool = False,
) -> int:
    about = f"workflow {view.get('workflow')}" if workflow else f"session {view['session_id']}"
    header = f"[dim]run {view['run_id']} · {about}[/dim]" if not args.json and live else None
    attachment = Attachment(console, client, interactive=interactive, live=live and not args.json, workflow=workflow)
    code = attachment.run(view, header=header)
    final = attachment.final
    ended = final is not None and final["status"] in FINAL
    if final is not None and (args.json or not live or (workflow and ended)):  # a workflow's output is not streamed
        _print_view(args, console, final)
    return code


def _print_view(args: argparse.Namespace, console: Console, view: dict[str, Any]) -> int:
    code = for_status(view["status"]) if view["status"] in FINAL else (
        WAITING_FOR_APPROVAL if view["status"] == "requires_action" else COMPLETED
    )
    if args.json:
        print(json.dumps(view))
        return code
    kind, name = ("Workflow run", view["workflow"]) if "workflow" in view else ("Run", view.get("agent", ""))
    console.print(f"{kind} {view['run_id']} ({name}): [bold]{view['status']}[/bold]")
    output = view.get("output")
    if output:  # an agent's answer as text; a workflow's output (any JSON) as JSON
        console.print(output.get("text") if isinstance(output, dict) and output.get("text") else json.dumps(output),
                      markup=False)
    if view.get("error"):
        console.print(f"[red]{view['error'].get('code')}: {view['error'].get('message')}[/red]")
    for approval in view.get("pending_approvals") or []:
        console.print(f"  waiting for approval {approval['approval_id']}: {approval['tool']}({approval['arguments']})")
    if code == WAITING_FOR_APPROVAL:
        console.print(waiting_hint(view["run_id"], view.get("pending_approvals")))
    return code


def _approvals(args: argparse.Namespace, client: AgentsClient, console: Console, interactive: bool) -> int:
    seen: set[str] = set()
    while True:
        pending = [a for a in client.inbox() if a["approval_id"] not in seen]
        if args.json and args.watch:  # JSON lines: each approval once, as it arrives (nothing for a quiet poll)
            for approval in pending:
                print(json.dumps(approval), flush=True)
        elif args.json:
            print(json.dumps(pending))
        elif not pending and not args.watch:
            console.print("No approvals waiting for you.")
        elif not interactive and pending:  # watching: a poll with nothing new prints nothing
            _table(args, console, pending, ["approval_id", "run_id", "agent", "tool", "expires_at"])
        for approval in pending:
            seen.add(approval["approval_id"])
            if interactive:
                console.print(f"[dim]run {approval['run_id']} · {approval.get('agent', '')}[/dim]")
                decide_interactively(console, client, approval["run_id"], approval)
        if not args.watch:
            return COMPLETED
        time.sleep(WATCH_INTERVAL_SECONDS)  # a person's inbox: a poll every few seconds is plenty


def _workflows(args: argparse.Namespace, client: AgentsClient, console: Console, interactive: bool) -> int:
    if args.workflow_command == "list":
        _table(args, console, client.workflows(), ["name", "description"])
        return COMPLETED
    try:
        workflow_input = json.loads(args.input)
    except json.JSONDecodeError as error:
        console.print(f"[red]--input is not JSON: {error}[/red]")
        return USAGE
    view = client.start_workflow(args.name, workflow_input)
    if args.wait:  # as `run --wait`: a sign-off gate is asked at a terminal, else reported (exit 4)
        return _attach(args, client, console, view, interactive, live=False, workflow=True)
    return _print_view(args, console, view)


def _export(args: argparse.Namespace, client: AgentsClient, console: Console) -> int:
    text = json.dumps(client.transcript(args.run_id), indent=2, ensure_ascii=False) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
        return COMPLETED
    Path(args.output).write_text(text, encoding="utf-8")
    if not args.json:
        console.print(f"Saved the transcript of run {args.run_id} to {args.output} (replay it: agent_testing.replay)")
    return COMPLETED


def _table(args: argparse.Namespace, console: Console, rows: list[dict[str, Any]], columns: list[str]) -> None:
    if args.json:
        print(json.dumps(rows))
        return
    if not _ids_fit(console.width, rows, columns):
        label = max(len(column) for column in columns)
        for row in rows:  # as fields, one a line: an approval's id and its run's need more than 80 columns together
            for column in columns:  # on its name's line, however long: the terminal wraps it, a pipe keeps it whole
                console.print(Text.assemble((column.ljust(label), "bold"), "  ", str(row.get(column, ""))),
                              soft_wrap=True)
            console.print()
        return
    table = Table(*[_column(column, rows) for column in columns])
    for row in rows:
        table.add_row(*[str(row.get(column, "")) for column in columns])
    console.print(table)


def _column(name: str, rows: list[dict[str, Any]]) -> Column:
    """An id prints whole on one line, however narrow the terminal (`agentctl show` takes it as printed): the other
    columns shrink instead."""
    if not name.endswith("_id"):
        return Column(name)
    return Column(name, no_wrap=True, min_width=_widest(name, rows), overflow="fold")


def _ids_fit(width: int, rows: list[dict[str, Any]], columns: list[str]) -> bool:
    """Whether the ids fit whole next to the other columns shrunk to a few characters (each column takes its text,
    a space either side and a border; the table one more border)."""
    return 1 + sum(3 + (_widest(name, rows) if name.endswith("_id") else SHRUNK_COLUMN) for name in columns) <= width


def _widest(name: str, rows: list[dict[str, Any]]) -> int:
    return max([len(name), *(len(str(row.get(name, ""))) for row in rows)])


def _emit(args: argparse.Namespace, console: Console, body: dict[str, Any], text: Any) -> None:
    if args.json:
        print(json.dumps(body))
    else:
        console.print(text(body))
