"""Continuation tokens: round trip, tamper, expiry, foreign resource, key rotation."""

import pytest

from agent_runtime.continuation import ContinuationTokens, TokenError


class FakeClock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


def test_round_trip_returns_the_cursor() -> None:
    tokens = ContinuationTokens(["s3cret"])
    token = tokens.issue("run", "run-1", {"seq": 42})
    assert tokens.verify(token, "run", "run-1") == {"seq": 42}


@pytest.mark.parametrize("position", [0, 10, -5])
def test_tampered_token_is_refused(position: int) -> None:
    tokens = ContinuationTokens(["s3cret"])
    token = tokens.issue("run", "run-1", {"seq": 1})
    flipped = "A" if token[position] != "A" else "B"
    tampered = token[:position] + flipped + token[position + 1 :] if position >= 0 else token[:position] + flipped
    with pytest.raises(TokenError) as err:
        tokens.verify(tampered, "run", "run-1")
    assert err.value.code == "token_invalid"


def test_token_from_another_secret_is_invalid() -> None:
    token = ContinuationTokens(["other"]).issue("run", "run-1", {"seq": 1})
    with pytest.raises(TokenError) as err:
        ContinuationTokens(["s3cret"]).verify(token, "run", "run-1")
    assert err.value.code == "token_invalid"


def test_expired_token_is_refused() -> None:
    clock = FakeClock()
    tokens = ContinuationTokens(["s3cret"], ttl_seconds=60, now=clock)
    token = tokens.issue("run", "run-1", {"seq": 1})
    clock.t += 59
    assert tokens.verify(token, "run", "run-1") == {"seq": 1}
    clock.t += 2
    with pytest.raises(TokenError) as err:
        tokens.verify(token, "run", "run-1")
    assert err.value.code == "token_expired"


@pytest.mark.parametrize(("scope", "subject"), [("run", "run-2"), ("workflow", "run-1")])
def test_token_for_another_resource_is_foreign(scope: str, subject: str) -> None:
    tokens = ContinuationTokens(["s3cret"])
    token = tokens.issue("run", "run-1", {"seq": 1})
    with pytest.raises(TokenError) as err:
        tokens.verify(token, scope, subject)
    assert err.value.code == "token_foreign"


def test_rotation_old_tokens_still_verify_new_ones_use_the_first_secret() -> None:
    old = ContinuationTokens(["old"])
    rotated = ContinuationTokens(["new", "old"])
    assert rotated.verify(old.issue("run", "r", {"seq": 3}), "run", "r") == {"seq": 3}
    fresh = rotated.issue("run", "r", {"seq": 4})
    assert ContinuationTokens(["new"]).verify(fresh, "run", "r") == {"seq": 4}
    with pytest.raises(TokenError):
        old.verify(fresh, "run", "r")


def test_empty_secret_list_is_a_configuration_error() -> None:
    with pytest.raises(ValueError):
        ContinuationTokens(["", ""])
