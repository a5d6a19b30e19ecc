"""Continuation tokens are bound to the principal they were issued to: another caller presenting one gets 401
`token_foreign` on any route that verifies tokens (`http_api.request_context.verify_token`), even where an ownership
check would not stop them first."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agent_runtime.continuation import ContinuationTokens
from http_api import caller
from http_api.identity import Principal
from http_api.problems import ApiProblem
from http_api.request_context import verify_token
from http_api.token_binding import bound_to

SERVICES = SimpleNamespace(tokens=ContinuationTokens(["s3cret"]))


def _as(principal_id: str):
    return caller._current.set(Principal(id=principal_id, auth_type="easyauth"))


def test_the_issuee_may_use_the_token_and_nobody_else() -> None:
    token = SERVICES.tokens.issue("run", "run-1", {"seq": 7, **bound_to("oid-alice")})
    reset = _as("oid-alice")
    try:
        assert verify_token(SERVICES, token, "run", "run-1") == {"seq": 7, "p": "oid-alice"}
    finally:
        caller._current.reset(reset)
    reset = _as("oid-bob")
    try:
        with pytest.raises(ApiProblem) as problem:
            verify_token(SERVICES, token, "run", "run-1")
        assert (problem.value.status, problem.value.code) == (401, "token_foreign")
    finally:
        caller._current.reset(reset)


def test_records_without_an_owner_issue_tokens_for_the_anonymous_principal() -> None:
    token = SERVICES.tokens.issue("run", "run-1", {"seq": 1, **bound_to(None)})
    reset = _as("anonymous")
    try:
        assert verify_token(SERVICES, token, "run", "run-1")["seq"] == 1
    finally:
        caller._current.reset(reset)


def test_outside_an_authenticated_request_verification_fails_closed() -> None:
    token = SERVICES.tokens.issue("run", "run-1", {"seq": 1, **bound_to("oid-alice")})
    with pytest.raises(RuntimeError):
        verify_token(SERVICES, token, "run", "run-1")
