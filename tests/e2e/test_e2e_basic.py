"""A simple answer and a tool call, end to end: HTTP in, the real `openai` client out to the scripted model, the
conversation in the store, on both stores."""

from __future__ import annotations

from e2e_harness import InProcessApp, contents_of

from scripted_model import Fault, Reply, Script, ScriptedModelServer


def test_simple_answer(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("Hello there."))
    started = app.start(input="Say hello")
    assert started["status"] in ("queued", "in_progress")
    assert started["continuation_token"]

    app.settle()
    response = app.poll(started["run_id"])

    assert response.status_code == 200
    view = response.json()
    assert view["status"] == "completed"
    assert view["output"]["text"] == "Hello there."
    assert view["continuation_token"] is None  # finished: nothing more to fetch
    assert view["usage"]["total_tokens"] > 0
    # The model saw the agent's instructions and the user's input, through the real openai client.
    request = model.log.last
    assert request.roles == ["system", "user"]
    assert request.messages[-1]["content"] == "Say hello"
    stored = app.session_messages(started["session_id"])
    assert [(m["role"], contents_of(m)) for m in stored] == [("user", ["text"]), ("assistant", ["text"])]


def test_wait_seconds_returns_the_answer_with_200(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("Quick answer."))
    response = app.http.post("/api/agents/helper/runs", json={"input": "Be quick", "wait_seconds": 20})

    assert response.status_code == 200
    assert response.json()["status"] == "completed"
    assert response.json()["output"]["text"] == "Quick answer."


def test_tool_call(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.call("lookup", {"key": "k1"}), "The value is value-of-k1."))
    started = app.start(input="Look up k1")
    app.settle()
    view = app.view(started["run_id"])

    assert view["status"] == "completed"
    assert view["output"]["text"] == "The value is value-of-k1."
    # The tool ran in an activity and its result went back to the model as a tool message.
    second = model.log.requests[1]
    assert second.roles == ["system", "user", "assistant", "tool"]
    assert "value-of-k1" in second.messages[-1]["content"]
    kinds = [contents_of(update["message"]) for update in view["updates"]]
    assert kinds == [["text"], ["function_call"], ["function_result"], ["text"]]
    result = view["updates"][2]["message"]["contents"][0]
    assert result["result"] == {"key": "k1", "value": "value-of-k1"}


def test_second_run_in_the_same_session_sees_the_first(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("First answer.", "Second answer."))
    first = app.start(input="one")
    app.settle()
    second = app.start(input="two", session_id=first["session_id"])
    app.settle()

    assert app.view(second["run_id"])["output"]["text"] == "Second answer."
    assert model.log.last.roles == ["system", "user", "assistant", "user"]
    session = app.http.get(f"/api/sessions/{first['session_id']}").json()
    assert session["run_count"] == 2 and session["message_count"] == 4 and session["active_run_id"] is None


def test_a_throttled_model_call_is_retried(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of("Recovered."))
    model.fail_next(Fault.rate_limited(retry_after=0.05))
    started = app.start(input="hi")
    app.settle()

    assert app.view(started["run_id"])["output"]["text"] == "Recovered."
    assert [r.status for r in model.log.requests] == [429, 200]
    assert len(app.session_messages(started["session_id"])) == 2  # the retry stored one answer, not two


def test_a_model_that_refuses_the_request_fails_the_run(app: InProcessApp, model: ScriptedModelServer) -> None:
    model.set_script(Script.of(Reply.fail(Fault.bad_request("the prompt is not allowed"))))
    started = app.start(input="hi")
    app.settle()

    response = app.poll(started["run_id"])
    assert response.status_code == 500  # never 200 for a failed run; the body says why
    view = response.json()
    assert view["status"] == "failed" and view["output"] is None and view["continuation_token"] is None
    assert view["error"]["code"] and "not allowed" in view["error"]["message"]
    assert model.log.total == 1  # a 400 is not retried
    session = app.http.get(f"/api/sessions/{started['session_id']}").json()
    assert session["active_run_id"] is None  # the session is free for the next run


def test_messages_input_and_unicode_round_trip(app: InProcessApp, model: ScriptedModelServer) -> None:
    answer = "Grüße aus Köln 🌧️ — 東京は晴れ"
    question = "Wie ist das Wetter? 天気はどう"
    model.set_script(Script.of(answer))
    started = app.start(
        input=[
            {"role": "system", "content": "Antworte auf Deutsch."},
            {"role": "user", "content": question},
        ]
    )
    app.settle()

    assert app.view(started["run_id"])["output"]["text"] == answer
    assert [(m["role"], m["content"]) for m in model.log.last.messages[-2:]] == [
        ("system", "Antworte auf Deutsch."),
        ("user", question),
    ]
    stored = app.session_messages(started["session_id"])
    assert [m["contents"][0]["text"] for m in stored] == ["Antworte auf Deutsch.", question, answer]
