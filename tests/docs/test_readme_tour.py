"""The README's five-minute tour, run as written: its bash block is read from README.md (so the text and this test
cannot drift apart), pointed at the app on a real devhost (a child process, the offline demo model, real time, as
`make run` serves it) and run step by step with bash, curl and python3. Each step must show what its comment says."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devhost.testing import SubprocessHost

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
TOUR_URL = "http://127.0.0.1:7071"
STEP = re.compile(r"^# (\d+)\. (.*)$", re.MULTILINE)
MARK = "@@tour step {}@@"


def tour_block() -> str:
    """The first bash block after the "A five-minute tour" heading."""
    text = README.read_text(encoding="utf-8")
    heading = re.search(r"^## A five-minute tour\s*$", text, re.MULTILINE)
    assert heading, "README.md has no '## A five-minute tour' section"
    block = re.search(r"^```bash\n(.*?)^```", text[heading.end():], re.MULTILINE | re.DOTALL)
    assert block, "the tour has no ```bash block"
    return block.group(1)


def steps(block: str) -> dict[int, str]:
    """Step number -> its comment (the first line of it)."""
    return {int(number): title for number, title in STEP.findall(block)}


def runnable(block: str, base_url: str) -> str:
    """The block as a script that marks where each step's output starts, against `base_url`."""
    assert TOUR_URL in block, f"the tour no longer talks to {TOUR_URL}: update this test"
    marked = STEP.sub(lambda m: f'echo; echo "{MARK.format(m.group(1))}"\n{m.group(0)}', block)
    return "set -euo pipefail\n" + marked.replace(TOUR_URL, base_url)


def outputs(stdout: str) -> dict[int, list[str]]:
    """Step number -> the non-empty lines it printed."""
    parts = re.split(MARK.format(r"(\d+)"), stdout)
    return {int(parts[i]): [line for line in parts[i + 1].splitlines() if line.strip()]
            for i in range(1, len(parts) - 1, 2)}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SubprocessHost]:
    """The app as `make run` serves it (no model configured: the offline demo model)."""
    state = tmp_path_factory.mktemp("tour") / "state.sqlite3"
    with SubprocessHost(REPO_ROOT, state_path=state, startup_timeout=120) as host:
        yield host


# What each step's comment says it shows, checked against what it printed.
def shows_what_is_served(lines: list[str]) -> None:
    health, agent = (json.loads(line) for line in lines)
    assert health["status"] == "ok" and "assistant" in health["agents"]
    tools = {tool["name"]: tool for tool in agent["tools"]}
    assert tools["send_email"]["approval"] == "always" and "parameters" in tools["get_weather"]


def shows_an_answer_about(city: str) -> Callable[[list[str]], None]:
    def check(lines: list[str]) -> None:
        [answer] = lines
        assert re.fullmatch(rf"In {city} it is \w+, -?\d+ °C\.", answer), answer
    return check


def shows_the_email_to_approve(lines: list[str]) -> None:
    assert lines == ["The report is ready", "Hi Bob,", "The report is ready.", "Best regards"]


def shows_the_approval(lines: list[str]) -> None:
    assert lines == ["approved"]


def shows_polls_until_completed(lines: list[str]) -> None:
    *statuses, final, answer = lines
    assert set(statuses) <= {"in_progress"} and final == "completed", lines
    assert answer == 'Done: I emailed bob@example.com with the subject "The report is ready".'


def shows_the_cancel(lines: list[str]) -> None:
    assert lines == ["cancelling", "cancelled"]


def shows_the_conversation_then_deletes_it(lines: list[str]) -> None:
    conversation, deleted = lines
    texts = [c.get("text") for m in json.loads(conversation)["messages"] for c in m["contents"] if c.get("text")]
    assert texts[0] == "What is the weather in Paris?" and "And in Rome?" in texts
    assert texts[-1].startswith("In Rome it is ")
    assert deleted == "204"


EXPECTED = {
    1: ("What is served", shows_what_is_served),
    2: ("finishes within wait_seconds", shows_an_answer_about("Paris")),
    3: ("remembers it was asked about the weather", shows_an_answer_about("Rome")),
    4: ("needs approval", shows_the_email_to_approve),
    5: ("Approve it", shows_the_approval),
    6: ("Poll with the token", shows_polls_until_completed),
    7: ("Cancel a run while it waits for a person", shows_the_cancel),
    8: ("The whole conversation of the first session, then delete it", shows_the_conversation_then_deletes_it),
}


def test_the_tour_has_the_steps_this_test_knows() -> None:
    titles = steps(tour_block())
    assert sorted(titles) == sorted(EXPECTED), "the tour's steps changed: update EXPECTED in this test"
    for number, (words, _) in EXPECTED.items():
        assert words in titles[number], f"step {number} now says {titles[number]!r}: update EXPECTED"


@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("python3") is None, reason="needs curl and python3")
def test_the_tour_shows_what_it_says(app: SubprocessHost) -> None:
    done = subprocess.run(["bash", "-c", runnable(tour_block(), app.base_url)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"the tour stopped:\n{done.stdout}\n{done.stderr}"
    printed = outputs(done.stdout)
    assert sorted(printed) == sorted(EXPECTED), done.stdout
    for number, (_, check) in EXPECTED.items():
        try:
            check(printed[number])
        except (AssertionError, ValueError) as error:
            raise AssertionError(f"tour step {number} printed {printed[number]!r}: {error}") from error


def python_snippet() -> str:
    """The README's ```python block (the official `openai` client against the app's Responses API)."""
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, "README.md has one python block: update this test if that changed"
    return blocks[0]


RUN_SNIPPET = re.compile(r"save it as `(\w+\.py)` and run `(\.venv/bin/python) \1`")


def test_the_readme_python_snippet_answers_as_written(app: SubprocessHost, tmp_path: Path) -> None:
    """Saved and run as the README says, with the project's interpreter (the tour's `python3` has no `openai`), the
    real `openai` client, in a fresh interpreter; only the address is this test's."""
    snippet = python_snippet()
    base = f"{TOUR_URL}/api/v1"
    assert f'base_url="{base}"' in snippet, f"the snippet no longer talks to {base}: update this test"
    how = RUN_SNIPPET.search(README.read_text(encoding="utf-8").split("```python")[0].rstrip().rsplit("\n\n", 1)[-1])
    assert how, "the paragraph before the python block must say how to run it with .venv/bin/python"
    script = tmp_path / how.group(1)
    script.write_text(snippet.replace(TOUR_URL, app.base_url))
    venv_python = REPO_ROOT / how.group(2)
    python = str(venv_python) if venv_python.exists() else sys.executable  # a test run from another environment
    done = subprocess.run([python, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shows_an_answer_about("Paris")([line for line in done.stdout.splitlines() if line.strip()])


def test_the_openai_responses_page_says_which_python_has_the_client() -> None:
    page = (REPO_ROOT / "docs" / "openai-responses.md").read_text(encoding="utf-8")
    before = page.split("from openai import")[0]
    assert "`.venv/bin/python`" in before, "say before the first openai example which interpreter has `openai`"


def test_the_readme_points_at_addresses_that_answer(app: SubprocessHost) -> None:
    """Every local address in the README is under /api (GET / is a 404 with an empty body), and the page it names
    answers with the page."""
    text = README.read_text(encoding="utf-8")
    bare = re.findall(rf"{re.escape(TOUR_URL)}(?!/api)\S*", text)
    assert bare == [], f"the README names addresses outside /api: {bare}"
    pages = set(re.findall(rf"{re.escape(TOUR_URL)}(/api/ui)\b", text))
    assert pages == {"/api/ui"}
    page = app.client.get("/api/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
