"""Record `golden/notify_histories.jsonl.gz`: `agent_run` histories of runs with notifications, as the code checked
out wrote them (the committed file was recorded at 0294b95, before a failing recording raced cancel and gave up):

    cd tests/durable_format && TASKHUB_NAME=tests PYTHONPATH=../..:../e2e:.. \
        python record_notify_histories.py golden/notify_histories.jsonl.gz

Case: a run whose approval's events the store refused (the recording failed through its activity's retries and
waited on its durable timer to record them again) was cancelled during that wait; the store came back, the
recording held, and the run then took the cancel and ended `cancelled`. With it, `decisions`: the actions the
recording code takes when it replays the whole history (`notify_replay.decisions`), which today's must repeat.
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from typing import Any

from e2e_settings import app_settings, running_app
from event_outage import events_refused
from notify_replay import decisions
from webhook_receiver import SECRET, WebhookReceiver

from scripted_model import Reply, Script, ScriptedModelServer


def main(out: str) -> None:
    receiver = WebhookReceiver().start()
    script = Script.of(Reply.call("send_email", {"to": "bob@example.com", "subject": "Hi", "body": "Hello"}), "Sent.")
    with tempfile.TemporaryDirectory() as markers, ScriptedModelServer(script) as model:
        env = app_settings(model.base_url, SESSION_STORE_PATH=":memory:", E2E_MARKER_DIR=markers,
                           WEBHOOK_URLS=receiver.url, WEBHOOK_SECRET=SECRET)
        with running_app(env, "sqlite") as app:
            with events_refused(app.host):
                run_id = app.start(input="Email Bob")["run_id"]
                for _ in range(6):
                    app.advance(600)
                assert app.cancel(run_id).status_code == 202
                app.settle()
            for _ in range(3):
                app.advance(3600)
            status = app.host.wait_for_status(run_id, timeout=60)
            assert status["runtimeStatus"] == "Completed", status
            runtime = app.host.engine._rt  # the engine's own record of the instance: the history exactly as stored
            instance = runtime.instances[run_id]
            runtime.episodes.ensure_history(instance)
            case: dict[str, Any] = {"case": "notify_failing_cancelled_meanwhile", "instance_id": run_id,
                                    "session_id": app.view(run_id)["session_id"], "input": instance.row.input,
                                    "history": instance.history}
    receiver.stop()
    case["decisions"] = decisions(case)
    with gzip.open(out, "wt", encoding="utf-8") as lines:
        lines.write(json.dumps(case) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
