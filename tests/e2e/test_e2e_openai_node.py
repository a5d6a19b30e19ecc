"""The npm `openai` client (package.json devDependencies, exact pin) against the app on devhost, on both stores:
create, a stateless input list, stream, background + retrieve, the approval round trip, models, an error in
OpenAI's shape. Node runs `node/openai_client.mjs`, which prints what it saw."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from e2e_harness import InProcessApp
from e2e_settings import E2E_DIR, REPO_ROOT

from scripted_model import Reply, Script, ScriptedModelServer

EMAIL_BOB = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}
SCRIPT = E2E_DIR / "node" / "openai_client.mjs"


def test_the_npm_openai_client(app: InProcessApp, model: ScriptedModelServer) -> None:
    node = shutil.which("node")
    if node is None or not (REPO_ROOT / "node_modules" / "openai").is_dir():
        pytest.fail("node and the npm `openai` package are needed (npm ci)")
    story = " ".join(f"word{i}" for i in range(30))
    model.set_script(
        Script.of(
            Reply.call("lookup", {"key": "a"}), "a is value-of-a.", "b is next.", story,
            Reply.call("send_email", EMAIL_BOB), "Sent.",
        )
    )
    # The app serves requests on its own threads: this process only waits for node.
    done = subprocess.run(
        [node, str(SCRIPT), f"{app.host.base_url}/api/v1"], capture_output=True, text=True, timeout=300,
        cwd=REPO_ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["plain"] == {
        "id": seen["plain"]["id"], "status": "completed", "text": "a is value-of-a.", "types": ["mcp_call", "message"],
        "requestId": seen["plain"]["requestId"],
    }
    assert seen["stateless"]["text"] == "b is next." and seen["stateless"]["previous"] == seen["plain"]["id"]
    assert seen["stream"] == {"first": "response.created", "last": "response.completed", "deltas": story,
                              "text": story}
    approval = seen["approval"]
    assert (approval["request"], approval["text"], approval["previous"], approval["call"]) == (
        "send_email", "Sent.", approval["first"], "ok"
    )
    run_id = approval["first"].removeprefix("resp_")
    assert approval["next"] == f"{approval['first']}_2"
    assert app.effects(app.view(run_id)["session_id"], "email") == [EMAIL_BOB]
    assert "helper" in seen["models"]
    assert seen["error"] == {"status": 400, "param": "temperature", "code": "unsupported_parameter",
                             "type": "invalid_request_error", "requestId": seen["error"]["requestId"]}
    # `x-request-id`, as the client reads it (`withResponse().request_id`, an error's `requestID`).
    request_ids = [seen["plain"]["requestId"], seen["error"]["requestId"]]
    assert all(str(i).startswith("req_") for i in request_ids) and len(set(request_ids)) == 2, request_ids
