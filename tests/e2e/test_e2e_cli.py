"""`agentctl`, the terminal client, as a person and a script use it: a real `python -m agentctl` process against
the app on devhost. The interactive path runs under a pseudo-terminal (pexpect): approve, reject with a reason, edit
the arguments in $EDITOR (an edit the tool's schema refuses first), Ctrl-C to detach. Without a terminal the exit
codes say how the run ended: 0 completed, 1 failed, 3 cancelled, 4 waiting for approval, 2 usage."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest
from aiohttp import web
from e2e_harness import InProcessApp, pending_ids
from e2e_settings import watches_the_app_in_process
from loopback_proxy import LoopbackProxy

from scripted_model import Reply, Script, ScriptedModelServer
from scripted_model.script import Fault

REPO_ROOT = Path(__file__).resolve().parents[2]
EXPECT_TIMEOUT_S = 60


@pytest.fixture
def store_backend() -> str:
    return "sqlite"  # the client does not see the store: once is enough


@pytest.fixture
def editor(tmp_path: Path) -> Path:
    """A stand-in for $EDITOR: each call replaces the file with the next queued text (queue/0, queue/1, ...)."""
    queue = tmp_path / "queue"
    queue.mkdir()
    script = tmp_path / "editor.py"
    script.write_text(
        "import pathlib, sys\n"
        f"queue = sorted(pathlib.Path({str(queue)!r}).iterdir(), key=lambda p: int(p.name))\n"
        "pathlib.Path(sys.argv[1]).write_text(queue[0].read_text())\n"
        "queue[0].unlink()\n"
    )
    return script


def queue_edits(editor: Path, *texts: str) -> None:
    for index, text in enumerate(texts):
        (editor.parent / "queue" / str(index)).write_text(text)


def cli_env(app: InProcessApp, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTS_")}
    return {**env, "AGENTS_URL": app.host.base_url, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "200", **extra}


def spawn(app: InProcessApp, *args: str, **env: str) -> pexpect.spawn:
    """agentctl in a terminal, as a user's shell starts it: Ctrl-C interrupts it. (A test run started as a background
    job of a non-interactive shell ignores SIGINT, and a child inherits that: Python then never raises
    KeyboardInterrupt, and every Ctrl-C test would time out.)"""
    child = pexpect.spawn(
        sys.executable, ["-m", "agentctl", *args], env=cli_env(app, **env), cwd=str(REPO_ROOT),
        encoding="utf-8", timeout=EXPECT_TIMEOUT_S, dimensions=(50, 200),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    return child


def run_cli(app: InProcessApp, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """No terminal: stdin is not a tty, so nothing is asked."""
    return subprocess.run(
        [sys.executable, "-m", "agentctl", *args], env=cli_env(app, **env), cwd=str(REPO_ROOT), capture_output=True,
        text=True, timeout=EXPECT_TIMEOUT_S, stdin=subprocess.DEVNULL,
    )


def ended(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return int(child.exitstatus if child.exitstatus is not None else 128 + (child.signalstatus or 0))


def test_a_run_that_needs_no_approval(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("lookup", {"key": "paris"}), "Paris is lovely."))
    child = spawn(app, "run", "helper", "tell me about paris")
    child.expect("lookup")
    child.expect("value-of-paris")
    child.expect("Paris is lovely.")
    child.expect("completed")
    assert ended(child) == 0


def test_approve_at_the_prompt(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Transferred."))
    child = spawn(app, "run", "helper", "pay")
    child.expect("Approval needed")
    child.expect(r"Approve \(a\)")
    child.sendline("a")
    child.expect("Approved transfer")
    child.expect("Transferred.")
    assert ended(child) == 0
    [run] = [r for r in app.snapshot().sessions.values()]
    assert [a["status"] for a in run["approvals"]] == ["approved"]
    assert run["effects"] == 1


def test_reject_with_a_reason(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Understood."))
    child = spawn(app, "run", "helper", "pay")
    child.expect(r"Approve \(a\)")
    child.sendline("r")
    child.expect(r"Reason for the agent \S*\(Enter for none\)\S*: ")
    assert "()" not in child.after
    child.sendline("not this month")
    child.expect("Rejected transfer: not this month")  # confirmed at once
    child.expect("rejected")
    child.expect("Understood.")
    assert ended(child) == 0
    [session] = app.snapshot().sessions.values()
    [approval] = session["approvals"]
    assert (approval["status"], approval["reason"], session["effects"]) == ("rejected", "not this month", 0)


def test_edit_the_arguments_the_schema_refuses_then_accepts(
    app: InProcessApp, model: ScriptedModelServer, editor: Path
) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Done."))
    queue_edits(editor, '{"account": "nope", "amount": 10}', '{"account": "FR5678", "amount": 12}')
    child = spawn(app, "run", "helper", "pay", EDITOR=f"{sys.executable} {editor}")
    child.expect(r"Approve \(a\)")
    child.sendline("e")
    child.expect("refuses these arguments")  # the schema error is shown and the editor opens again
    child.expect("Done.")
    assert ended(child) == 0
    [session] = app.snapshot().sessions.values()
    [approval] = session["approvals"]
    assert approval["edited_arguments"] == {"account": "FR5678", "amount": 12}
    assert app.effects(session["session"]["session_id"], "transfer") == [{"account": "FR5678", "amount": 12}]


def test_ctrl_c_detaches_and_the_run_goes_on(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("Finished later."))
    model.hold_answers()
    try:
        child = spawn(app, "run", "helper", "take your time")
        child.expect(r"run (\w+)")
        run_id = child.match.group(1)
        child.sendintr()
        child.expect("Detached")
        child.expect(f"agentctl show {run_id} --follow")
        assert ended(child) == 130
    finally:
        model.release_answers()
    app.settle()
    assert app.view(run_id)["status"] == "completed"
    attached = run_cli(app, "show", run_id, "--follow")
    assert attached.returncode == 0 and "Finished later." in attached.stdout


def test_exit_codes_without_a_terminal(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Done."))
    waiting = run_cli(app, "--json", "run", "helper", "pay")
    assert waiting.returncode == 4, waiting.stderr
    view: dict[str, Any] = json.loads(waiting.stdout)
    assert view["status"] == "requires_action" and pending_ids(view)

    cancelled = run_cli(app, "cancel", view["run_id"])
    assert cancelled.returncode == 0, cancelled.stderr
    app.settle()
    shown = run_cli(app, "--json", "show", view["run_id"])
    assert (shown.returncode, json.loads(shown.stdout)["status"]) == (3, "cancelled")

    model.fail_next(Fault.bad_request("the model refuses"))
    failed = run_cli(app, "--json", "run", "helper", "anything", "--wait")
    assert failed.returncode == 1, failed.stdout
    assert json.loads(failed.stdout)["status"] == "failed"

    model.set_script(Script.of("Hello."))
    done = run_cli(app, "run", "helper", "hi", "--wait")
    assert (done.returncode, "Hello." in done.stdout) == (0, True)

    assert run_cli(app, "run").returncode == 2  # usage
    unknown = run_cli(app, "--json", "show", "no-such-run")
    assert unknown.returncode == 7 and json.loads(unknown.stdout)["error"]["code"] == "run_not_found"


def hub_refuses_the_first_event(app: InProcessApp, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The task hub refuses the next event the app raises (as Azure's sometimes does; loopback never would), then
    takes them again; returns the names of those it refused."""
    refused: list[str] = []
    raise_event = app.host.engine.raise_event

    async def once_unreachable(instance_id: str, name: str, input_json: str | None) -> None:
        if not refused:
            refused.append(name)
            raise RuntimeError("the task hub is unreachable")
        await raise_event(instance_id, name, input_json)

    monkeypatch.setattr(app.host.engine, "raise_event", once_unreachable)
    return refused


@watches_the_app_in_process
def test_a_decision_the_app_could_not_deliver_at_once_is_sent_again_for_the_person(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app stores the decision, then answers 503 `decision_not_delivered` (Retry-After: 1) when the hub refuses
    its event: the client sends it again itself, and the person sees it approved, once."""
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Transferred."))
    child = spawn(app, "run", "helper", "pay")
    child.expect(r"Approve \(a\)")
    refused = hub_refuses_the_first_event(app, monkeypatch)
    child.sendline("a")
    child.expect("Approved transfer")
    child.expect("Transferred.")
    assert ended(child) == 0
    [session] = app.snapshot().sessions.values()
    assert len(refused) == 1 and [a["status"] for a in session["approvals"]] == ["approved"]
    assert session["effects"] == 1


@watches_the_app_in_process
def test_a_cancel_the_app_could_not_deliver_at_once_is_sent_again(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """503 `cancel_not_delivered` (flagged, its event refused): `agentctl cancel` sends it again and succeeds."""
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Done."))
    waiting = json.loads(run_cli(app, "--json", "run", "helper", "pay").stdout)
    refused = hub_refuses_the_first_event(app, monkeypatch)
    cancelled = run_cli(app, "cancel", waiting["run_id"])
    assert (cancelled.returncode, len(refused)) == (0, 1), cancelled.stderr
    app.settle()
    shown = run_cli(app, "--json", "show", waiting["run_id"])
    assert (shown.returncode, json.loads(shown.stdout)["status"]) == (3, "cancelled")


class AnswerLosingProxy(LoopbackProxy):
    """In front of the app: the first request matching `method` and `path` (a regex) reaches the app, which answers
    it, and then the connection breaks before any of the answer is sent back - the client cannot tell whether the
    request arrived. Every other request passes through (streams flow as they come)."""

    def __init__(self, upstream: str, method: str, path: str) -> None:
        super().__init__(upstream)
        self._method, self._path = method, re.compile(path)
        self.lost: list[int] = []  # the statuses of the answers lost

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.lost or request.method != self._method or not self._path.fullmatch(request.path):
            return await self.forward(request)
        async with self.upstream_response(request, await request.read()) as upstream:
            await upstream.read()
            self.lost.append(upstream.status)
        assert request.transport is not None
        request.transport.abort()  # reset: the client gets no answer at all
        return web.Response()  # (never written: the connection is gone)


def test_a_decision_whose_answer_was_lost_is_sent_again_and_applied_once(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """The decision reaches the app and its answer is lost on the way back (the connection reset): agentctl sends it
    again, as the same person's same decision, and gets the first one's answer - also once the run it let go on has
    finished meanwhile. The person sees it approved, once; the transfer runs once."""
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Transferred."))
    with AnswerLosingProxy(app.host.base_url, "POST", r"/api/runs/[^/]+/approvals/[^/]+") as proxy:
        child = spawn(app, "run", "helper", "pay", AGENTS_URL=proxy.endpoint.rstrip("/"))
        child.expect(r"Approve \(a\)")
        child.sendline("a")
        child.expect("Approved transfer")
        child.expect("Transferred.")
        assert ended(child) == 0
        assert proxy.lost == [202]
    [session] = app.snapshot().sessions.values()
    assert [a["status"] for a in session["approvals"]] == ["approved"]
    assert session["effects"] == 1


def test_the_inbox_lists_and_decides(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Paid."))
    waiting = run_cli(app, "--json", "run", "helper", "pay")
    assert waiting.returncode == 4, waiting.stderr
    run_id = json.loads(waiting.stdout)["run_id"]
    listed = run_cli(app, "--json", "approvals")
    assert listed.returncode == 0, listed.stderr
    [approval] = [a for a in json.loads(listed.stdout) if a["run_id"] == run_id]
    assert approval["tool"] == "transfer"

    child = spawn(app, "approvals")
    child.expect("transfer")
    child.expect(r"Approve \(a\)")
    child.sendline("a")
    assert ended(child) == 0
    app.settle()
    assert app.view(run_id)["status"] == "completed"
    assert json.loads(run_cli(app, "--json", "approvals").stdout) == []


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The problem a command reported: exactly one line on stderr, no traceback, nothing on stdout."""
    assert "Traceback" not in result.stderr and result.stdout == "", result.stderr
    [line] = result.stderr.splitlines()
    return line


def test_every_connection_or_http_problem_is_one_line_with_its_exit_code(
    app: InProcessApp, model: ScriptedModelServer, unused_tcp_port: int
) -> None:
    nothing_there = run_cli(app, "runs", AGENTS_URL=f"http://127.0.0.1:{unused_tcp_port}")
    assert nothing_there.returncode == 5
    assert one_line(nothing_there) == (
        f"agentctl: cannot reach the app at http://127.0.0.1:{unused_tcp_port} (nothing answers there): start it "
        "with `make run`, or point --url / AGENTS_URL at the running app"
    )
    with_api = run_cli(app, "runs", AGENTS_URL=f"{app.host.base_url}/api")
    assert with_api.returncode == 7 and "(without /api)" in one_line(with_api)
    not_a_url = run_cli(app, "--url", "localhost:7071", "runs")
    assert not_a_url.returncode == 2 and "is not an http(s) URL" in one_line(not_a_url)

    assert one_line(missing := run_cli(app, "show", "no-such-run")) == (
        "agentctl: No run with id 'no-such-run' (404 run_not_found)") and missing.returncode == 7
    model.set_script(Script.of("Done."))
    finished = json.loads(run_cli(app, "--json", "run", "helper", "hi", "--wait").stdout)
    again = run_cli(app, "cancel", finished["run_id"])
    assert again.returncode == 8 and "409 run_finished" in one_line(again)


def test_ctrl_c_at_the_prompt_ends_its_line(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Paid."))
    child = spawn(app, "run", "helper", "pay")
    child.expect(r"\[a/r/e\]\S*: ")
    child.sendintr()
    child.expect("Detached")
    assert child.before.removeprefix("^C").startswith("\r\n")  # on a line of its own, not after the prompt
    assert ended(child) == 130

    inbox = spawn(app, "approvals")
    inbox.expect(r"\[a/r/e\]\S*: ")
    inbox.sendintr()
    inbox.expect(pexpect.EOF)
    assert inbox.before.removeprefix("^C").startswith("\r\n")  # the shell's prompt will start on a new line
    inbox.close()
    assert inbox.exitstatus == 130


class _CtrlCAsItIsWritten(io.StringIO):
    """A terminal where Ctrl-C lands once `text` has been written, before rich has cleared it from its buffer (the
    process descheduled there: the person sees it and presses Ctrl-C)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def flush(self) -> None:
        super().flush()
        if self.getvalue().endswith(self.text) and "^C" not in self.getvalue():
            self.write("^C")  # the terminal's echo
            raise KeyboardInterrupt

    def isatty(self) -> bool:
        return False


def test_ctrl_c_as_the_prompt_is_written_ends_its_line_without_writing_it_again() -> None:
    from rich.console import Console

    from agentctl.approve import decide_interactively

    terminal = _CtrlCAsItIsWritten("[a/r/e]: ")
    approval = {"approval_id": "a1", "tool": "transfer", "arguments": {"account": "GB1234"}, "editable": True}
    with pytest.raises(KeyboardInterrupt):
        decide_interactively(Console(file=terminal, width=80), None, "run-1", approval)  # type: ignore[arg-type]
    shown = terminal.getvalue()
    assert shown.count("[a/r/e]") == 1 and shown.endswith("[a/r/e]: ^C\n"), shown  # before, the prompt came twice


def test_ctrl_c_as_an_answer_or_a_line_is_written_detaches_without_writing_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rich.console import Console

    from agentctl import attach, cli
    from agentctl.events import TextDelta

    terminal = _CtrlCAsItIsWritten("Hello")
    monkeypatch.setattr(attach, "follow", lambda client, view, workflow=False: iter([TextDelta("Hello")]))
    attachment = attach.Attachment(Console(file=terminal, width=200), None, interactive=True)  # type: ignore[arg-type]
    assert attachment.run({"run_id": "r1"}) == 130
    assert terminal.getvalue().startswith("Hello^C\nDetached: run r1 goes on."), terminal.getvalue()

    terminal = _CtrlCAsItIsWritten("3 runs\n")  # any other command's output: the command's own handler
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setattr(cli, "_dispatch", lambda args, client, console, interactive: console.print("3 runs"))
    assert cli.main(["--url", "http://127.0.0.1:9", "runs"]) == 130
    assert terminal.getvalue() == "3 runs\n^C\n"


def test_with_no_editor_set_the_first_installed_one_opens_and_is_named(
    app: InProcessApp, model: ScriptedModelServer, editor: Path, tmp_path: Path
) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Done."))
    queue_edits(editor, '{"account": "FR5678", "amount": 12}')
    tools = tmp_path / "bin"
    tools.mkdir()
    nano = tools / "nano"  # the only editor on this PATH
    nano.write_text(f"#!{sys.executable}\n" + editor.read_text())
    nano.chmod(0o755)
    child = spawn(app, "run", "helper", "pay", EDITOR="", VISUAL="", PATH=str(tools))
    child.expect(r"Approve \(a\)")
    child.sendline("e")
    child.expect(f"No \\$EDITOR set: opening nano \\({nano}\\). Set EDITOR to use another.")
    child.expect("Approved transfer with your edits")
    child.expect("Done.")
    assert ended(child) == 0
    [session] = app.snapshot().sessions.values()
    assert session["approvals"][0]["edited_arguments"] == {"account": "FR5678", "amount": 12}


def test_the_request_shows_an_emails_body_as_text() -> None:
    from rich.console import Console

    from agentctl.approve import show_request

    console = Console(width=80, record=True, file=open(os.devnull, "w"))  # noqa: SIM115 - closed with the console
    email = {"to": "bob@example.com", "subject": "Hi", "body": "Hi Bob,\n\nThe report is ready.\n\nBest regards"}
    show_request(console, {"tool": "send_email", "arguments": email})
    shown = console.export_text()
    console.file.close()
    assert "\\n" not in shown
    assert [line.strip(" │") for line in shown.splitlines()[1:6]] == [
        "to       bob@example.com", "subject  Hi", "body     Hi Bob,", "", "The report is ready."]
