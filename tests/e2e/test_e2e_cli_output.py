"""`agentctl`'s output as a script and a narrow terminal meet it: a real `python -m agentctl` process against the app
on devhost. A workflow waiting at a person's sign-off ends `--wait` like a run waiting for approval (exit 4, how to
decide); ids print in full at 80 columns; sessions show their last activity; a closed stdout (`| head`) ends the
command quietly."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from e2e_harness import InProcessApp
from test_e2e_cli import EXPECT_TIMEOUT_S, REPO_ROOT, cli_env, ended, run_cli, spawn

from scripted_model import Match, Reply, Rule, Script, ScriptedModelServer

REVIEW_PIPELINE = ("workflows", "run", "review_pipeline", "--input", '{"topic": "durable agents"}', "--wait")


@pytest.fixture
def store_backend() -> str:
    return "sqlite"  # the client does not see the store: once is enough


def review_script() -> Script:
    """The shipped writer and reviewer: a draft, approved as it is (the workflow goes on to the sign-off gate)."""
    return Script(rules=[
        Rule(match=Match(system="You are a writer"), reply=Reply(text="A draft about durable agents.")),
        Rule(match=Match(system="demanding reviewer"),
             reply=Reply(json_output={"verdict": "approve", "score": 9, "comments": "Good as it is."})),
    ])


def test_a_workflow_waiting_at_its_sign_off_ends_wait_like_a_run_waiting_for_approval(
    app_with, model: ScriptedModelServer
) -> None:
    model.set_script(review_script())
    with app_with(AGENTS_PACKAGE="served_agents") as app:
        waiting = run_cli(app, *REVIEW_PIPELINE)
        assert waiting.returncode == 4, waiting.stdout + waiting.stderr
        assert "requires_action" in waiting.stdout and "workflow_gate:sign_off" in waiting.stdout
        assert "Waiting for approval. Decide with: agentctl approvals (run " in waiting.stdout

        as_json = run_cli(app, "--json", *REVIEW_PIPELINE)
        assert as_json.returncode == 4, as_json.stderr
        view = json.loads(as_json.stdout)
        assert view["status"] == "requires_action" and view["workflow"] == "review_pipeline"
        [gate] = view["pending_approvals"]
        assert gate["tool"] == "workflow_gate:sign_off"
        assert (gate["decidable"], gate["editable"]) == (True, False)  # a sign-off: approve or reject only

        # In a terminal the gate is asked for at once, as a run's approval is (no edit offered); the workflow ends.
        child = spawn(app, *REVIEW_PIPELINE)
        child.expect("workflow_gate:sign_off")
        child.expect(r"Approve \(a\)(.*)\?")
        assert child.match.group(1) == " or reject (r)", child.match.group(0)
        child.sendline("a")
        child.expect("Approved workflow_gate:sign_off")
        child.expect("completed")
        assert ended(child) == 0


def test_show_takes_a_workflow_run_id_and_ctrl_c_during_its_wait_says_how_to_re_attach(
    app_with, model: ScriptedModelServer
) -> None:
    """`agentctl runs` lists workflow runs: `show` takes their ids (the app serves them on the workflow routes), and
    `workflows run --wait` detached with Ctrl-C names `agentctl show ID --follow`, which asks for the gate."""
    model.set_script(review_script())
    with app_with(AGENTS_PACKAGE="served_agents") as app:
        child = spawn(app, *REVIEW_PIPELINE)
        child.expect(r"Approve \(a\)")
        child.sendintr()
        child.expect(r"Detached: run (\S+) goes on\.")
        run_id = child.match.group(1)
        child.expect(f"agentctl show {run_id} --follow")
        assert ended(child) == 130
        assert run_id in [run["run_id"] for run in json.loads(run_cli(app, "--json", "runs").stdout)]

        shown = run_cli(app, "show", run_id)
        assert shown.returncode == 4, shown.stdout + shown.stderr
        assert f"Workflow run {run_id} (review_pipeline): requires_action" in shown.stdout
        assert "workflow_gate:sign_off" in shown.stdout
        as_json = run_cli(app, "--json", "show", run_id)
        assert json.loads(as_json.stdout)["workflow"] == "review_pipeline", as_json.stderr
        followed = run_cli(app, "show", run_id, "--follow")  # no terminal: reported, as a run's approval is
        assert followed.returncode == 4, followed.stdout + followed.stderr
        assert "Waiting for approval. Decide with: agentctl approvals (run " in followed.stdout
        assert "step write (agent) ok" in followed.stdout and "step final (function) ok" in followed.stdout

        child = spawn(app, "show", run_id, "--follow")
        child.expect(f"run {run_id} · workflow review_pipeline")
        child.expect_exact("step final (function) ok")  # the steps done so far, then the gate asked for
        child.expect(r"Approve \(a\)")
        child.sendline("a")
        child.expect("Approved workflow_gate:sign_off")
        child.expect_exact(f"Workflow run {run_id} (review_pipeline): ")  # then its output
        child.expect("completed")
        assert ended(child) == 0


def test_ids_print_in_full_at_80_columns_and_work_with_show(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Paid."))
    run_id = json.loads(run_cli(app, "--json", "run", "helper", "pay").stdout)["run_id"]
    [approval] = json.loads(run_cli(app, "--json", "approvals").stdout)

    runs = run_cli(app, "runs", COLUMNS="80")
    assert runs.returncode == 0, runs.stderr
    assert run_id in runs.stdout and max(len(line) for line in runs.stdout.splitlines()) <= 80
    approvals = run_cli(app, "approvals", COLUMNS="80")
    assert approvals.returncode == 0, approvals.stderr
    assert approval["approval_id"] in approvals.stdout and run_id in approvals.stdout
    assert max(len(line) for line in approvals.stdout.splitlines()) <= 80
    [line] = [line for line in runs.stdout.splitlines() if run_id[:8] in line]
    shown_id = line.split("│")[1].strip()
    assert run_cli(app, "show", shown_id).returncode == 4  # the id as printed is the run's


def test_ids_wider_together_than_the_terminal_print_in_full_one_field_a_line(
    app: InProcessApp, model: ScriptedModelServer
) -> None:
    """An approval of a call with an OpenAI-length id: its approval id (run id, colon, call id) and its run id need
    more than 80 columns together, so the approvals print as fields, one a line, every id whole."""
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10},
                                          id="call_" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7"), "Paid."))
    run_id = json.loads(run_cli(app, "--json", "run", "helper", "pay").stdout)["run_id"]
    [approval] = json.loads(run_cli(app, "--json", "approvals").stdout)
    assert len(approval["approval_id"]) + len(run_id) > 80

    approvals = run_cli(app, "approvals", COLUMNS="80")
    assert approvals.returncode == 0, approvals.stderr
    lines = approvals.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    fields = dict(parts for parts in (line.split(None, 1) for line in lines) if len(parts) == 2)
    assert [fields.get(name) for name in ("approval_id", "run_id", "tool")] == [approval["approval_id"], run_id,
                                                                                 "transfer"], approvals.stdout
    assert run_cli(app, "show", fields["run_id"]).returncode == 4  # the id as printed is the run's


def test_watching_the_inbox_without_a_terminal_prints_only_what_arrives(
    app: InProcessApp, model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`agentctl approvals --watch > inbox.log`: the approvals waiting, then each one as it arrives; a poll that
    finds nothing new prints nothing (not an empty table every two seconds). Three polls, then Ctrl-C."""
    from agentctl import cli

    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}), "Paid."))
    assert run_cli(app, "run", "helper", "pay").returncode == 4
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli, "time", SimpleNamespace(sleep=sleep))
    monkeypatch.setattr(sys, "stdin", io.StringIO())  # not a terminal: nothing is asked
    assert cli.main(["--url", app.host.base_url, "approvals", "--watch"]) == 130
    printed = capsys.readouterr().out
    assert printed.count("approval_id") == 1 and "transfer" in printed, printed
    # --json: JSON lines, each approval once (it printed `[]` at every poll).
    polls.clear()
    assert cli.main(["--url", app.host.base_url, "--json", "approvals", "--watch"]) == 130
    [line] = [line for line in capsys.readouterr().out.splitlines() if line]  # Ctrl-C ends the last line
    assert json.loads(line)["tool"] == "transfer"


@pytest.mark.parametrize("call_id_length", [40, 60], ids=["beside its name over 80", "over 80 alone"])
def test_an_id_wider_than_the_terminal_beside_its_name_prints_whole_on_its_line(
    app: InProcessApp, model: ScriptedModelServer, call_id_length: int
) -> None:
    """A provider's longer call id (or a workflow gate's, which holds its step's id): the approval id does not fit
    beside its name at 80 columns, and at 60 not even alone. It stays on its name's line, whole (the terminal wraps
    it; copied or piped, it is one line), as every other field does."""
    call_id = "call_" + "x" * (call_id_length - 5)
    model.set_script(Script.of(Reply.call("transfer", {"account": "GB1234", "amount": 10}, id=call_id), "Paid."))
    run_id = json.loads(run_cli(app, "--json", "run", "helper", "pay").stdout)["run_id"]
    [approval] = json.loads(run_cli(app, "--json", "approvals").stdout)
    assert len("approval_id  " + approval["approval_id"]) > 80

    approvals = run_cli(app, "approvals", COLUMNS="80")
    assert approvals.returncode == 0, approvals.stderr
    lines = approvals.stdout.splitlines()
    fields = dict(parts for parts in (line.split(None, 1) for line in lines) if len(parts) == 2)
    assert [fields.get(name) for name in ("approval_id", "run_id", "tool")] == [approval["approval_id"], run_id,
                                                                                 "transfer"], approvals.stdout
    assert all(len(line) <= 80 for line in lines if approval["approval_id"] not in line), approvals.stdout


def test_sessions_show_their_last_activity(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("Hello."))
    assert run_cli(app, "run", "helper", "hi", "--wait").returncode == 0
    [session] = json.loads(run_cli(app, "--json", "sessions").stdout)
    listed = run_cli(app, "sessions")
    assert listed.returncode == 0, listed.stderr
    assert "last_activity_at" in listed.stdout and session["last_activity_at"][:19] in listed.stdout


@pytest.mark.parametrize("args", [("--json", "sessions"), ("sessions",), ("runs",), ("workflows", "list")])
def test_a_closed_stdout_ends_the_command_quietly(
    app: InProcessApp, model: ScriptedModelServer, args: tuple[str, ...]
) -> None:
    """`agentctl ... | head -c 600` where head has gone before agentctl writes: no traceback, the shell's SIGPIPE
    status (141)."""
    model.set_script(Script.of("Hello."))
    assert run_cli(app, "run", "helper", "hi", "--wait").returncode == 0
    process = subprocess.Popen(
        [sys.executable, "-m", "agentctl", *args], env=cli_env(app), cwd=str(REPO_ROOT), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    process.stdout.close()  # the reader is gone before the first write
    _, errors = process.communicate(timeout=EXPECT_TIMEOUT_S)
    assert (process.returncode, errors) == (141, "")
