"""Live streams (SSE) of agent runs over real HTTP, read with a real SSE client (`httpx-sse`): replay of a finished
run, resume after a disconnect in the middle of an answer (the union equals an uninterrupted stream, nothing twice),
approvals as `status` events with the stream going on after the decision, streams and polls agreeing, one shared
watcher per run, pings, and the poll routes' problems before any stream starts.

Timing is controlled with the scripted model's holds (`hold_answers`, `hold_mid_stream`, `release_answers`): a test
acts while an answer is certainly not yet started or certainly half-written. No sleeps.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import PROBLEM_JSON, PROGRESS_TIMEOUT_S, InProcessApp
from e2e_settings import app_settings, running_app
from httpx_sse import EventSource, ServerSentEvent, connect_sse

from scripted_model import Reply, Script, ScriptedModelServer

ANSWER = " ".join(f"word{i}" for i in range(80))
EMAIL_BOB = {"to": "bob@example.com", "subject": "Hi", "body": "Hello Bob"}


@pytest.fixture
def stream_app(model: ScriptedModelServer, marker_dir) -> Iterator[InProcessApp]:
    """The app on the SQLite store (the store-specific reads are the polls' own; the resume test runs on both)."""
    env = app_settings(model.base_url, SESSION_STORE_PATH=":memory:", E2E_MARKER_DIR=str(marker_dir),
                       STREAM_PING_SECONDS="0.2")
    with running_app(env, "sqlite") as app:
        yield app


@contextmanager
def sse(app: InProcessApp, run_id: str, *, path: str = "/api/runs/{}/stream", headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None) -> Iterator[EventSource]:
    with connect_sse(app.http, "GET", path.format(run_id), headers=dict(headers or {}), params=params,
                     timeout=PROGRESS_TIMEOUT_S) as source:
        assert source.response.status_code == 200, source.response.read()
        assert source.response.headers["content-type"].startswith("text/event-stream")
        yield source


def read_until(events: Iterator[ServerSentEvent], stop: Callable[[ServerSentEvent], bool]) -> list[ServerSentEvent]:
    seen = []
    for event in events:
        seen.append(event)
        if stop(event):
            return seen
    raise AssertionError(f"the stream ended before the expected event: {[e.event for e in seen]}")


def read_lines_until(lines: Iterator[str], last: str) -> list[str]:
    """The raw lines of a stream up to and including the first that equals `last` (`""`: the end of an event)."""
    seen = []
    for line in lines:
        seen.append(line)
        if line == last:
            return seen
    raise AssertionError(f"the stream ended before a line {last!r}: {seen}")


def is_done(event: ServerSentEvent) -> bool:
    return event.event == "done"


def of(events: list[ServerSentEvent], name: str) -> list[Any]:
    return [e.json() for e in events if e.event == name]


def delta_text(events: list[ServerSentEvent]) -> str:
    return "".join(d["text"] for d in of(events, "delta"))


def wait_for_model_calls(model: ScriptedModelServer, count: int) -> None:
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    while len(model.log.requests) < count:
        assert time.monotonic() < deadline, "the model was not called"
        time.sleep(0.01)


def test_a_finished_run_replays_from_the_beginning_and_ends(stream_app: InProcessApp, model) -> None:
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), "The answer."))
    started = stream_app.start(input="look it up", wait_seconds=30)
    assert started["status"] == "completed"
    with sse(stream_app, started["run_id"]) as source:
        events = list(source.iter_sse())
    assert [e.event for e in events][-2:] == ["status", "done"]
    assert of(events, "update") == stream_app.poll(started["run_id"]).json()["updates"]  # all of them, as polls
    assert of(events, "status") == [{"status": "completed", "pending_approvals": []}]
    done = of(events, "done")[0]
    assert done["output"] == {"text": "The answer.", "finish_reason": "stop"} and done["continuation_token"] is None
    assert all(e.id for e in events)
    # From the cursor of the last update: only the status and done again; from the final status's: only `done`.
    last_update = [e for e in events if e.event == "update"][-1]
    with sse(stream_app, started["run_id"], headers={"Last-Event-ID": last_update.id}) as source:
        assert [e.event for e in source.iter_sse()] == ["status", "done"]
    with sse(stream_app, started["run_id"], params={"after": events[-2].id}) as source:
        assert [e.event for e in source.iter_sse()] == ["done"]
    assert_had_everything(stream_app, started["run_id"], events[-1].id)


def assert_had_everything(app: InProcessApp, run_id: str, done_id: str, headers: dict[str, str] | None = None) -> None:
    """A client back after `done` (an `EventSource` reconnects by itself) has had everything: 204 No Content, which
    tells an `EventSource` to stop reconnecting; by `Last-Event-ID` as by `after`."""
    for options in ({"headers": {**(headers or {}), "Last-Event-ID": done_id}},
                    {"headers": headers or {}, "params": {"after": done_id}}):
        again = app.http.get(f"/api/runs/{run_id}/stream", **options)
        assert (again.status_code, again.content) == (204, b""), options


def finished_run(app: InProcessApp, model: ScriptedModelServer) -> tuple[str, list[ServerSentEvent]]:
    """A completed run and its whole stream."""
    model.set_script(Script.of("The answer."))
    run_id = app.start(input="hi", wait_seconds=30)["run_id"]
    with sse(app, run_id) as source:
        return run_id, list(source.iter_sse())


def test_done_is_had_whatever_host_name_the_client_comes_back_through(stream_app: InProcessApp, model) -> None:
    # `done`'s links are built from the request's host; whether a client has had `done` is not: back through another
    # host name (a custom domain and the default one, a proxy) with done's id, it is told 204, not sent `done` again.
    run_id, first = finished_run(stream_app, model)
    other_host = {"Host": "agents.example.com"}
    with sse(stream_app, run_id, headers=other_host) as source:
        through_other = list(source.iter_sse())
    done, done_elsewhere = of(first, "done")[0], of(through_other, "done")[0]
    assert done_elsewhere["links"]["self"] == f"http://agents.example.com/api/runs/{run_id}" != done["links"]["self"]
    assert through_other[-1].id == first[-1].id  # the same end: the same id, whichever host sent it
    assert_had_everything(stream_app, run_id, first[-1].id, other_host)
    assert_had_everything(stream_app, run_id, through_other[-1].id)


def test_a_done_id_from_before_its_fingerprint_is_answered_as_it_was(stream_app: InProcessApp, model) -> None:
    # `done`'s id once ended in a plain `.done` (no fingerprint): an `EventSource` reconnecting with one across the
    # deploy that added the fingerprint is told 204 as it was then, never 400, which it would retry for ever.
    run_id, events = finished_run(stream_app, model)
    old_done_id = events[-1].id.rsplit(".", 1)[0]
    assert old_done_id.endswith(".done") and old_done_id.split(".")[:4] == events[-1].id.split(".")[:4]
    assert_had_everything(stream_app, run_id, old_done_id)
    # One sent before the last update (the run went on after it, so not everything was had) resumes from its cursor.
    first_update = next(e for e in events if e.event == "update")
    with sse(stream_app, run_id, headers={"Last-Event-ID": f"{first_update.id}.done"}) as source:
        resumed = list(source.iter_sse())
    assert of(resumed, "update") == of(events, "update")[1:] and resumed[-1].event == "done"


@pytest.mark.parametrize("store_backend", ["sqlite", pytest.param("cosmos", marks=pytest.mark.cosmos)])
def test_resume_after_a_disconnect_mid_answer_equals_an_uninterrupted_stream(
    app_with: Callable[..., AbstractContextManager[InProcessApp]], model: ScriptedModelServer
) -> None:
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), ANSWER))
    with app_with() as app:
        model.hold_mid_stream(after_chunks=12)  # the answer stops half-written until released
        run_id = app.start(input="a long story")["run_id"]
        # Both clients connect once the answer is being written: a stream's first `status` is the run's status when
        # it connects (a snapshot, not a logged event), so connecting while the run moves from queued would differ.
        wait_for_model_calls(model, 2)
        with sse(app, run_id) as whole_source:
            whole = whole_source.iter_sse()
            with sse(app, run_id) as first_source:
                # Leave at the first delta: the answer is held half-written, so this is certainly mid-answer.
                first = read_until(first_source.iter_sse(), lambda e: e.event == "delta")
            # `whole` stays connected; the first client has gone. Resume from the last id, then finish the answer.
            with sse(app, run_id, headers={"Last-Event-ID": first[-1].id}) as second_source:
                model.release_answers()
                second = read_until(second_source.iter_sse(), is_done)
            uninterrupted = read_until(whole, is_done)

    resumed = first + second
    assert of(resumed, "update") == of(uninterrupted, "update")  # nothing missed, nothing twice
    seqs = [u["seq"] for u in of(resumed, "update")]
    assert seqs == sorted(set(seqs))
    assert of(resumed, "status") == of(uninterrupted, "status")
    assert of(resumed, "done") == of(uninterrupted, "done")
    # The answer's text: the first connection got a part, the second went on from exactly there (or the finished
    # answer arrived as an update and covered the rest); no character twice.
    assert delta_text(first) and ANSWER.startswith(delta_text(first))
    assert ANSWER.startswith(delta_text(first) + delta_text(second))
    assert len({d["message_id"] for d in of(resumed, "delta")}) == 1
    answers = [u for u in of(resumed, "update") if u["message"]["role"] == "assistant" and
               u["message"]["contents"][0]["type"] == "text"]
    assert [a["message"]["contents"][0]["text"] for a in answers] == [ANSWER]
    assert of(resumed, "done")[0]["output"] == {"text": ANSWER, "finish_reason": "stop"}
    assert len({e.id for e in resumed if e.event == "update"}) == len(of(resumed, "update"))
    # The answer's text never runs ahead of what it follows: the tool's result is out before the first delta.
    kinds = [(e.event, e.json()) for e in uninterrupted]
    first_delta = next(i for i, (name, _) in enumerate(kinds) if name == "delta")
    result_at = next(i for i, (name, data) in enumerate(kinds)
                     if name == "update" and data["message"]["role"] == "tool")
    assert result_at < first_delta


def test_an_approval_is_a_status_event_and_the_stream_goes_on_after_the_decision(
    stream_app: InProcessApp, model: ScriptedModelServer
) -> None:
    model.set_script(Script.of(Reply.call("send_email", EMAIL_BOB), "Sent."))
    run_id = stream_app.start(input="email bob")["run_id"]
    with sse(stream_app, run_id) as source:
        events = source.iter_sse()
        waiting = read_until(events, lambda e: e.event == "status" and e.json()["status"] == "requires_action")
        [pending] = waiting[-1].json()["pending_approvals"]
        assert pending["tool"] == "send_email" and pending["arguments"] == EMAIL_BOB
        assert any(u["message"]["contents"][0]["type"] == "function_call" for u in of(waiting, "update"))
        assert stream_app.decide(run_id, pending["approval_id"], "approve").status_code == 202
        rest = read_until(events, is_done)
    statuses = [s["status"] for s in of(waiting + rest, "status")]
    assert statuses[-1] == "completed" and statuses.index("requires_action") < len(statuses) - 1
    assert of(rest, "status")[0]["pending_approvals"] == []  # the decision cleared it
    assert of(rest, "done")[0]["output"] == {"text": "Sent.", "finish_reason": "stop"}


def test_a_poll_client_and_a_stream_client_agree(stream_app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("lookup", {"key": "a"}), Reply.call("lookup", {"key": "b"}), "Both."))
    model.hold_answers()
    started = stream_app.start(input="two lookups")
    run_id = started["run_id"]
    with sse(stream_app, run_id) as source:
        events = source.iter_sse()
        model.release_answers()
        polled = list(started["updates"])
        token = started["continuation_token"]
        while token:  # the poll client, side by side with the open stream
            view = stream_app.poll(run_id, token=token, wait_seconds=1).json()
            polled += view["updates"]
            token = view["continuation_token"]
        streamed = read_until(events, is_done)
    assert of(streamed, "update") == polled
    done = of(streamed, "done")[0]
    final = stream_app.poll(run_id).json()
    for field in ("status", "output", "usage", "error", "pending_approvals", "session_id"):
        assert done[field] == final[field], field


def test_two_streams_on_one_run_share_one_watcher(stream_app: InProcessApp, model: ScriptedModelServer) -> None:
    before = stream_app.live_streams()
    model.set_script(Script.of("Shared."))
    model.hold_answers()
    run_id = stream_app.start(input="hi")["run_id"]
    wait_for_model_calls(model, 1)
    with sse(stream_app, run_id) as a, sse(stream_app, run_id) as b:
        events_a, events_b = a.iter_sse(), b.iter_sse()
        first_a, first_b = next(events_a), next(events_b)
        assert (first_a.event, first_a.data) == (first_b.event, first_b.data)
        assert stream_app.live_streams(since=before) == {"watchers": 1, "subscribers": 2}
        model.release_answers()
        done_a, done_b = read_until(events_a, is_done), read_until(events_b, is_done)
    assert of(done_a, "done") == of(done_b, "done")
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    # The last connection's end stops the watcher (after the client has left).
    while stream_app.live_streams(since=before)["watchers"] > 0:
        assert time.monotonic() < deadline, "the watcher outlived its streams"
        time.sleep(0.01)


def test_streams_through_two_host_names_at_once_each_get_their_own_links(
    stream_app: InProcessApp, model: ScriptedModelServer
) -> None:
    """Locally links are built from the request's host: two clients of one run through two host names at once (a
    proxy and the direct address) each get `done` with links to their own host, whichever connected first; streams
    through one host name still share one watcher."""
    before = stream_app.live_streams()
    model.set_script(Script.of("Two hosts."))
    model.hold_answers()
    run_id = stream_app.start(input="hi")["run_id"]
    wait_for_model_calls(model, 1)
    other_host = {"Host": "agents.example.com"}
    try:
        with (sse(stream_app, run_id) as a, sse(stream_app, run_id) as a2,
              sse(stream_app, run_id, headers=other_host) as b):
            events_a, events_a2, events_b = a.iter_sse(), a2.iter_sse(), b.iter_sse()
            for events in (events_a, events_a2, events_b):
                next(events)
            assert stream_app.live_streams(since=before) == {"watchers": 2, "subscribers": 3}
            model.release_answers()
            done_a, done_a2, done_b = (of(read_until(events, is_done), "done")[0]
                                       for events in (events_a, events_a2, events_b))
    finally:
        model.release_answers()  # a failure above must not leave the run held for the host's stop
    assert done_b["links"]["self"] == f"http://agents.example.com/api/runs/{run_id}"
    assert done_a["links"]["self"] == done_a2["links"]["self"] != done_b["links"]["self"]
    assert {**done_a, "links": None} == {**done_b, "links": None}


def test_a_run_is_streamed_through_a_few_host_names_at_once_not_one_watcher_per_forged_host(
    stream_app: InProcessApp, model: ScriptedModelServer
) -> None:
    """A local client sending a new `Host` header on each request started one watcher for each, every one polling
    the run. A run is watched through at most `MAX_LINK_ROOTS_PER_RUN` host names at once: a stream through one more
    is a 429 problem naming the header; one through a host name already watched shares its watcher."""
    from http_api.streams.watchers import MAX_LINK_ROOTS_PER_RUN

    before = stream_app.live_streams()
    model.set_script(Script.of("Many hosts."))
    model.hold_answers()
    run_id = stream_app.start(input="hi")["run_id"]
    wait_for_model_calls(model, 1)
    hosts = [f"forged-{n}.example.com" for n in range(MAX_LINK_ROOTS_PER_RUN + 1)]
    try:
        with ExitStack() as streams:
            for host in hosts[:-1]:
                streams.enter_context(sse(stream_app, run_id, headers={"Host": host}))
            refused = streams.enter_context(stream_app.http.stream(
                "GET", f"/api/runs/{run_id}/stream", headers={"Host": hosts[-1]}, timeout=PROGRESS_TIMEOUT_S))
            assert (refused.status_code, refused.headers["content-type"]) == (429, PROBLEM_JSON)
            problem = json.loads(refused.read())
            again = streams.enter_context(sse(stream_app, run_id, headers={"Host": hosts[0]}))
            assert stream_app.live_streams(since=before) == {
                "watchers": MAX_LINK_ROOTS_PER_RUN, "subscribers": MAX_LINK_ROOTS_PER_RUN + 1}
            model.release_answers()
            [done] = of(read_until(again.iter_sse(), is_done), "done")
    finally:
        model.release_answers()
    assert (problem["code"], problem["field"]) == ("too_many_stream_hosts", "header.host")
    assert done["links"]["self"] == f"http://{hosts[0]}/api/runs/{run_id}"


def test_an_idle_stream_sends_pings(stream_app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("Eventually."))
    model.hold_answers()
    run_id = stream_app.start(input="hi")["run_id"]
    wait_for_model_calls(model, 1)
    with stream_app.http.stream("GET", f"/api/runs/{run_id}/stream", timeout=PROGRESS_TIMEOUT_S) as response:
        lines = response.iter_lines()
        seen = []
        for line in lines:  # the run is held at its model call: nothing but pings arrives after the first events
            seen.append(line)
            if line == ": ping" and seen.count(": ping") == 2:
                break
        model.release_answers()
        rest = [line for line in lines]
    assert "event: done" in rest


def test_problems_come_before_the_stream(stream_app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("ok", "ok again"))
    run_id = stream_app.start(input="hi", wait_seconds=30)["run_id"]
    cases: list[tuple[str, dict[str, Any], int, str, str | None]] = [
        ("/api/runs/no-such-run/stream", {}, 404, "run_not_found", "path.run_id"),
        (f"/api/runs/{run_id}/stream", {"params": {"continuation_token": "forged"}}, 401, "token_invalid",
         "query.continuation_token"),
        (f"/api/runs/{run_id}/stream", {"params": {"after": "nope"}}, 400, "invalid_cursor", "query.after"),
        (f"/api/runs/{run_id}/stream", {"headers": {"Last-Event-ID": "1.2"}}, 400, "invalid_cursor",
         "header.last-event-id"),
        *[(f"/api/runs/{run_id}/stream", {"headers": {"Last-Event-ID": forged}}, 400, "invalid_cursor",
           "header.last-event-id")  # `done`'s mark with a bad fingerprint, an empty one, twice, a long one
          for forged in ("3.0.0.-.done.XYZ", "3.0.0.-.done.", "3.0.0.-.done.0a1b2c3d.done.0a1b2c3d",
                         "3.0.0.-.done." + "0" * 4_000)],
        # Sent twice, it arrives comma-joined (as the Functions host passes a repeated header): neither cursor.
        (f"/api/runs/{run_id}/stream", {"headers": [("Last-Event-ID", "3.0.0.-"), ("Last-Event-ID", "3.0.0.-")]},
         400, "invalid_cursor", "header.last-event-id"),
        ("/api/workflows/runs/no-such-run/stream", {}, 404, "workflow_run_not_found", "path.run_id"),
        (f"/api/workflows/runs/{run_id}/stream", {}, 404, "workflow_run_not_found", "path.run_id"),
    ]
    for path, options, status, code, field in cases:
        response = stream_app.http.get(path, **options)
        assert response.status_code == status, (path, response.text)
        assert response.headers["content-type"] == PROBLEM_JSON
        assert (response.json()["code"], response.json()["field"]) == (code, field)
    # A poll's continuation token is a valid start: the stream goes on from that poll.
    session_id = stream_app.poll(run_id).json()["session_id"]
    second = stream_app.start(input="again", session_id=session_id)
    with sse(stream_app, second["run_id"], params={"continuation_token": second["continuation_token"]}) as source:
        events = read_until(source.iter_sse(), is_done)
    assert of(events, "update")  # the answer, which the start's view did not have
    assert all(u["seq"] > second["updates"][-1]["seq"] for u in of(events, "update"))


def test_with_worker_processes_deltas_come_from_the_stored_draft(model: ScriptedModelServer, tmp_path) -> None:
    """The model call runs in a worker process, the stream in the host: the host's watcher follows the draft the
    worker stores (no in-process token feed crosses the process boundary)."""
    from e2e_settings import E2E_DIR, REPO_ROOT

    from devhost.testing import InProcessHost

    model.set_script(Script.of(ANSWER))
    model.hold_mid_stream(after_chunks=12)
    env = app_settings(model.base_url, SESSION_STORE_PATH=str(tmp_path / "sessions.sqlite3"),
                       PARTIAL_OUTPUT_INTERVAL_SECONDS="0", STREAM_WATCH_MAX_INTERVAL_SECONDS="0.2",
                       PYTHONPATH=str(E2E_DIR))  # the workers import `fixture_agents` too
    with InProcessHost(REPO_ROOT, clock="virtual", env=env, workers=1) as host:
        app = InProcessApp(host, "sqlite")
        run_id = app.start(input="a long story")["run_id"]
        with sse(app, run_id) as source:
            events = source.iter_sse()
            first = read_until(events, lambda e: e.event == "delta")
            model.release_answers()
            rest = read_until(events, is_done)
    assert ANSWER.startswith(delta_text(first + rest)) and delta_text(first)
    assert of(rest, "done")[0]["output"] == {"text": ANSWER, "finish_reason": "stop"}


def test_a_stream_ends_at_its_time_limit_and_the_client_resumes(
    model: ScriptedModelServer, marker_dir: Path
) -> None:
    """`STREAM_MAX_SECONDS` (a stream must end before the function timeout): the stream closes without `done`; the
    client reconnects with its last event id and gets the rest, nothing twice."""
    model.set_script(Script.of("After the limit."))
    model.hold_answers()
    env = app_settings(model.base_url, SESSION_STORE_PATH=":memory:", E2E_MARKER_DIR=str(marker_dir),
                       STREAM_MAX_SECONDS="0.3")
    with running_app(env, "sqlite") as app:
        run_id = app.start(input="hi")["run_id"]
        wait_for_model_calls(model, 1)
        with sse(app, run_id) as source:
            first = list(source.iter_sse())  # the run is held: the stream ends at its limit, not at `done`
        assert first and "done" not in [e.event for e in first]
        with sse(app, run_id, headers={"Last-Event-ID": first[-1].id}) as source:
            model.release_answers()
            second = read_until(source.iter_sse(), is_done)
    updates = of(first + second, "update")
    assert [u["seq"] for u in updates] == sorted({u["seq"] for u in updates})
    assert of(second, "done")[0]["output"] == {"text": "After the limit.", "finish_reason": "stop"}


def test_a_client_that_leaves_releases_the_watcher(stream_app: InProcessApp, model: ScriptedModelServer) -> None:
    """A client still connected keeps its run's watcher, also once the host has written to it again (pings); one that
    leaves releases it.

    The client reads one iterator of the response throughout. An iterator it drops half-read (`next(source.iter_sse())`
    on a temporary) is finalized at once, and closing it closes the response and its connection: the client would
    have left after the first event, and its watcher would go at the host's next write (a ping), not stay."""
    before = stream_app.live_streams()
    model.set_script(Script.of("Later."))
    model.hold_answers()
    run_id = stream_app.start(input="hi")["run_id"]
    wait_for_model_calls(model, 1)
    try:
        with sse(stream_app, run_id) as source:
            lines = source.response.iter_lines()
            assert read_lines_until(lines, "")[0].startswith("event: ")  # the first event: the client is connected
            assert stream_app.live_streams(since=before) == {"watchers": 1, "subscribers": 1}
            read_lines_until(lines, ": ping")
            read_lines_until(lines, ": ping")  # the host wrote to this client twice more (the run is held)
            assert stream_app.live_streams(since=before) == {"watchers": 1, "subscribers": 1}
        # The client has gone while the run waits: the host notices, the stream's generator ends, the watcher stops.
        deadline = time.monotonic() + PROGRESS_TIMEOUT_S
        while stream_app.live_streams(since=before)["watchers"] > 0:
            assert time.monotonic() < deadline, "the watcher outlived its only stream"
            time.sleep(0.01)
    finally:
        model.release_answers()  # a failure above must not leave the run held for the host's stop


def test_a_lone_surrogate_in_a_streamed_answer_goes_out_as_a_replacement_character(
    stream_app: InProcessApp, model: ScriptedModelServer
) -> None:
    """A model may stream a lone UTF-16 surrogate (a JSON `\\ud800` escape with no pair), which UTF-8 cannot carry:
    the delta carries U+FFFD instead, as UTF-8 JSON encoders write it, and the run stores and answers its text with
    U+FFFD there too (storing it failed the model call on every retry, so the run failed)."""
    model.set_script(Script.of("Sixteen chars ok" + "then \ud800 and the rest"))
    model.hold_answers()
    run_id = stream_app.start(input="hi")["run_id"]
    wait_for_model_calls(model, 1)
    with sse(stream_app, run_id) as source:
        events = source.iter_sse()
        read_until(events, lambda e: e.event == "status")  # connected: the run's tokens come to this stream live
        model.release_answers()
        deltas = read_until(events, lambda e: e.event == "delta" and "\ufffd" in delta_text([e]))
        rest = read_until(events, is_done)
    assert delta_text(deltas) == "Sixteen chars okthen \ufffd and the rest"[:len(delta_text(deltas))]
    assert of(rest, "done")[0]["status"] == "completed"
    view = stream_app.http.get(f"/api/runs/{run_id}").json()
    assert view["status"] == "completed" and view["output"]["text"] == "Sixteen chars okthen \ufffd and the rest"


def easyauth(person: str, *roles: str) -> dict[str, str]:
    """What App Service Authentication passes for `person` holding `roles` (their token of the moment)."""
    import base64

    claims = [{"typ": "oid", "val": person}, {"typ": "name", "val": person},
              *({"typ": "roles", "val": role} for role in roles)]
    principal = {"auth_typ": "aad", "name_typ": "name", "role_typ": "roles", "claims": claims}
    return {"X-MS-CLIENT-PRINCIPAL": base64.b64encode(json.dumps(principal).encode()).decode(),
            "X-MS-CLIENT-PRINCIPAL-ID": person, "X-MS-CLIENT-PRINCIPAL-NAME": person}


def test_what_a_stream_says_its_caller_may_do_is_said_for_that_caller_not_for_whoever_opened_the_watcher(
    model: ScriptedModelServer, marker_dir
) -> None:
    """The run's watcher is shared, and its `status` events say what the caller may do with each approval
    (`decidable`): computed for whoever started the watcher, a second client of the owner's whose token holds other
    roles (a role revoked since, another app's token) was told it may decide what the decide route refuses it."""
    model.set_script(Script.of(Reply.call("publish", {"text": "hello"}), "Published."))
    env = app_settings(model.base_url, SESSION_STORE_PATH=":memory:", E2E_MARKER_DIR=str(marker_dir),
                       AUTH_MODE="easyauth", AGENTS_PACKAGE="rights_agents")
    reviewer, plain = easyauth("alice", "Reviewers"), easyauth("alice")
    with running_app(env, "sqlite") as app:
        started = app.http.post("/api/agents/reviewed/runs", json={"input": "publish it"}, headers=reviewer)
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        app.settle()

        def waiting(events: Iterator[ServerSentEvent]) -> dict[str, Any]:
            [pending] = read_until(events, lambda e: e.event == "status")[-1].json()["pending_approvals"]
            return pending

        with sse(app, run_id, headers=reviewer) as first, sse(app, run_id, headers=plain) as second:
            assert waiting(first.iter_sse())["decidable"] is True
            pending = waiting(second.iter_sse())
            refused = app.http.post(f"/api/runs/{run_id}/approvals/{pending['approval_id']}",
                                    json={"decision": "approve"}, headers=plain)
            assert refused.status_code == 403 and refused.json()["code"] == "not_an_approver", refused.text
            assert (pending["decidable"], pending["editable"]) == (False, False)


def wait_for_streams(app: InProcessApp, before: dict[str, int], **expected: int) -> None:
    """Until the app's streams since `before` are counted as `expected` (watchers, subscribers: those given): the count
    moves after the client sees a stream open or close (a stream subscribes once its body starts; a client that left
    is noticed at the host's next write)."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    while True:
        counted = app.live_streams(since=before)
        if {key: counted[key] for key in expected} == expected:
            return
        assert time.monotonic() < deadline, f"the streams did not come to {expected}: {counted}"
        time.sleep(0.01)


def test_a_run_is_streamed_by_a_few_viewers_at_once_not_one_watcher_per_role_set(
    model: ScriptedModelServer, marker_dir
) -> None:
    """Each viewer (caller, auth mode, roles) gets a watcher of its own, polling the run; roles come from the identity
    provider's token, so an owner whose tokens carry ever-new role sets started a watcher for each. A run is watched
    by at most `MAX_VIEWERS_PER_RUN` viewers at once: one more is a 429 problem naming its credential; a viewer
    already watching joins its watcher at the cap; a viewer whose streams end frees its slot; nothing is left."""
    from http_api.streams.watchers import MAX_VIEWERS_PER_RUN

    model.set_script(Script.of("Many viewers."))
    env = app_settings(model.base_url, SESSION_STORE_PATH=":memory:", E2E_MARKER_DIR=str(marker_dir),
                       AUTH_MODE="easyauth", STREAM_PING_SECONDS="0.2")
    viewers = [easyauth("alice", f"role-{n}") for n in range(MAX_VIEWERS_PER_RUN + 1)]
    with running_app(env, "sqlite") as app:
        before = app.live_streams()
        model.hold_answers()
        try:
            started = app.http.post("/api/agents/helper/runs", json={"input": "hi"}, headers=viewers[0])
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
            wait_for_model_calls(model, 1)
            with ExitStack() as streams:
                for viewer in viewers[2:MAX_VIEWERS_PER_RUN]:
                    streams.enter_context(sse(app, run_id, headers=viewer))
                with sse(app, run_id, headers=viewers[1]) as leaving:
                    # One iterator, held while viewer 1 stays: a dropped one closes its stream at once (see
                    # `test_a_client_that_leaves_releases_the_watcher`), and the cap below would count one viewer short.
                    leaving_events = leaving.iter_sse()
                    next(leaving_events)
                    streams.enter_context(sse(app, run_id, headers=viewers[0]))
                    refused = streams.enter_context(app.http.stream(
                        "GET", f"/api/runs/{run_id}/stream", headers=viewers[-1], timeout=PROGRESS_TIMEOUT_S))
                    assert (refused.status_code, refused.headers["content-type"]) == (429, PROBLEM_JSON)
                    problem = json.loads(refused.read())
                    streams.enter_context(sse(app, run_id, headers=viewers[0]))  # a viewer watching joins
                    wait_for_streams(app, before, watchers=MAX_VIEWERS_PER_RUN, subscribers=MAX_VIEWERS_PER_RUN + 1)
                wait_for_streams(app, before, watchers=MAX_VIEWERS_PER_RUN - 1)  # viewer 1's only stream ended
                newcomer = streams.enter_context(sse(app, run_id, headers=viewers[-1]))
                wait_for_streams(app, before, watchers=MAX_VIEWERS_PER_RUN, subscribers=MAX_VIEWERS_PER_RUN + 1)
                model.release_answers()
                [done] = of(read_until(newcomer.iter_sse(), is_done), "done")
        finally:
            model.release_answers()  # a failure above must not leave the run held for the host's stop
        wait_for_streams(app, before, watchers=0)
        assert app.live_streams(since=before) == {"watchers": 0, "subscribers": 0}
    assert (problem["code"], problem["field"]) == ("too_many_stream_viewers", "header.x-ms-client-principal")
    assert f"GET /api/runs/{run_id}" in problem["detail"], problem
    assert done["status"] == "completed" and done["output"]["text"] == "Many viewers."
