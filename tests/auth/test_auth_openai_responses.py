"""The OpenAI Responses routes follow the same identity rules as every route (jwt mode: the official client sends
its `api_key` as the bearer token): a response belongs to who created it (others get 404 and change nothing), an
answer to an approval request obeys the tool's approvers, and a request without a valid token is a 401 in OpenAI's
error shape."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from auth_people import ALICE, BOB, CAROL
from openai import OpenAI

from scripted_model import Reply, Script
from scripted_model.script import Match, Rule


def script() -> Script:
    return Script(
        rules=[
            Rule(
                match=Match(last_user="pay", after_tool_results=False),
                reply=Reply.call("pay", {"to": "bob@example.com", "amount": 42}),
            ),
            Rule(match=Match(last_user="note", after_tool_results=False), reply=Reply.call("note", {"text": "x"})),
            Rule(match=Match(after_tool_results=True), reply=Reply(text="Done.")),
        ],
        default=Reply(text="Hi."),
    )


def client_of(app, api_key: str) -> OpenAI:
    http = httpx.Client(timeout=120, trust_env=False)
    return OpenAI(base_url=f"{app.host.base_url}/api/v1", api_key=api_key, http_client=http, max_retries=0)


def answer(approval_id: str) -> list[dict[str, object]]:
    return [{"type": "mcp_approval_response", "approval_request_id": approval_id, "approve": True}]


def test_responses_belong_to_their_creator(app_in, model, issuer) -> None:
    model.set_script(script())
    with app_in("jwt") as (app, _):
        alice = client_of(app, issuer.token(ALICE.id, name=ALICE.name))
        bob = client_of(app, issuer.token(BOB.id, name=BOB.name))
        first = alice.responses.create(model="payer", input="note this")
        [request] = first.output
        assert request.type == "mcp_approval_request" and json.loads(request.arguments) == {"text": "x"}

        for attempt in (
            lambda: bob.responses.retrieve(first.id),
            lambda: bob.responses.input_items.list(first.id),
            lambda: bob.responses.cancel(first.id),
            lambda: bob.responses.delete(first.id),
            lambda: bob.responses.create(model="payer", previous_response_id=first.id, input=answer(request.id)),
            lambda: bob.responses.create(model="payer", previous_response_id=first.id, input="hello"),
        ):
            with pytest.raises(openai.NotFoundError):
                attempt()
        assert alice.responses.retrieve(first.id).output[0].id == request.id  # nothing changed

        rest = alice.responses.create(model="payer", previous_response_id=first.id, input=answer(request.id))
        assert (rest.status, rest.output_text) == ("completed", "Done.")

        anonymous = client_of(app, "not-a-token")
        with pytest.raises(openai.AuthenticationError) as refused:
            anonymous.responses.retrieve(first.id)
        assert set(refused.value.body) == {"message", "type", "param", "code"}  # type: ignore[arg-type]


@pytest.mark.parametrize("store", ["sqlite", pytest.param("cosmos", marks=pytest.mark.cosmos)])
def test_only_the_owner_branches_from_an_earlier_response(app_in, model, issuer, store: str) -> None:
    """Continuing an earlier response branches the conversation (a copy of it): someone else's response is a 404,
    as if missing, and copies nothing into their sessions; its owner's branch is hers."""
    model.set_script(script())
    with app_in("jwt", store=store) as (app, callers):
        alice = client_of(app, issuer.token(ALICE.id, name=ALICE.name))
        bob = client_of(app, issuer.token(BOB.id, name=BOB.name))
        first = alice.responses.create(model="payer", input="hello")
        alice.responses.create(model="payer", previous_response_id=first.id, input="hello again")
        with pytest.raises(openai.NotFoundError) as refused:
            bob.responses.create(model="payer", previous_response_id=first.id, input="hello from bob")
        assert refused.value.body["param"] == "previous_response_id"  # type: ignore[index]
        assert app.http.get("/api/sessions", headers=callers.headers(BOB)).json()["sessions"] == []
        branch = alice.responses.create(model="payer", previous_response_id=first.id, input="hello, branch")
        assert (branch.status, branch.previous_response_id) == ("completed", first.id)
        with pytest.raises(openai.NotFoundError):
            bob.responses.retrieve(branch.id)
        sessions = app.http.get("/api/sessions", headers=callers.headers(ALICE)).json()["sessions"]
        assert len(sessions) == 2


def test_an_answer_obeys_the_tools_approvers(app_in, model, issuer) -> None:
    """`pay` is decided by a payments approver other than the requester: the requester's own answer is a 403 naming
    the item; an approver who does not own the run decides on the approvals route, and the run goes on."""
    model.set_script(script())
    with app_in("jwt") as (app, callers):
        alice = client_of(app, issuer.token(ALICE.id, name=ALICE.name))
        first = alice.responses.create(model="payer", input="pay bob")
        [request] = first.output
        with pytest.raises(openai.PermissionDeniedError) as denied:
            alice.responses.create(model="payer", previous_response_id=first.id, input=answer(request.id))
        assert denied.value.body["param"] == "input[0]" and denied.value.body["code"] == "not_an_approver"  # type: ignore[index]

        carol = client_of(app, issuer.token(CAROL.id, name=CAROL.name, roles=list(CAROL.roles)))
        with pytest.raises(openai.NotFoundError):  # not her response
            carol.responses.create(model="payer", previous_response_id=first.id, input=answer(request.id))
        run_id = first.id.removeprefix("resp_")
        decided = app.http.post(
            f"/api/runs/{run_id}/approvals/{request.id}", json={"decision": "approve"}, headers=callers.headers(CAROL)
        )
        assert decided.status_code == 202, decided.text
        app.settle()
        rest = alice.responses.retrieve(f"{first.id}_2")
        assert (rest.status, rest.output_text) == ("completed", "Done.")
        [item] = alice.responses.input_items.list(rest.id).data
        assert (item.type, item.approve) == ("mcp_approval_response", True)
