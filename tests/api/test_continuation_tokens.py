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


def test_a_token_is_what_the_serializer_itself_makes_and_carries_the_time_it_was_issued() -> None:
    """`issue` keeps one signer: the token stays the one `URLSafeTimedSerializer.dumps` makes, stamped with the
    clock at each issue (tokens issued before and after this change, and by other instances, read alike)."""
    clock = FakeClock()
    tokens = ContinuationTokens(["new", "old"], now=clock)
    payload = {"scope": "run", "subject": "run-1", "cursor": {"seq": 7, "p": "alice"}}
    first = tokens.issue("run", "run-1", {"seq": 7, "p": "alice"})
    assert first == tokens._serializer.dumps(payload)
    clock.t += 30
    later = tokens.issue("run", "run-1", {"seq": 7, "p": "alice"})
    assert later == tokens._serializer.dumps(payload) and later != first
    assert tokens._serializer.loads(later, return_timestamp=True)[1].timestamp() == clock.t


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


def _legacy_sha1_tokens(secret: str, clock: FakeClock):
    """How tokens were signed before SHA-256: itsdangerous' defaults (HMAC-SHA1), the same salt and clock."""
    from itsdangerous import TimestampSigner, URLSafeTimedSerializer

    class Clocked(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(clock())

    return URLSafeTimedSerializer([secret], salt="continuation-token", signer=Clocked)


def test_tokens_are_signed_with_hmac_sha256() -> None:
    import hashlib

    from itsdangerous import BadSignature, URLSafeTimedSerializer

    token = ContinuationTokens(["s3cret"]).issue("run", "run-1", {"seq": 7})
    sha256 = URLSafeTimedSerializer(["s3cret"], salt="continuation-token",
                                    signer_kwargs={"digest_method": hashlib.sha256}, fallback_signers=[])
    assert sha256.loads(token)["cursor"] == {"seq": 7}
    with pytest.raises(BadSignature):  # not SHA-1
        _legacy_sha1_tokens("s3cret", FakeClock()).loads(token)
    assert len(token.rsplit(".", 1)[1]) == 43  # a 32-byte MAC, base64url without padding (SHA-1's is 27 chars)


def test_a_sha1_token_from_before_is_honoured_until_it_expires() -> None:
    clock = FakeClock()
    legacy = _legacy_sha1_tokens("s3cret", clock).dumps({"scope": "run", "subject": "run-1", "cursor": {"seq": 3}})
    tokens = ContinuationTokens(["s3cret"], ttl_seconds=60, now=clock)
    clock.t += 59
    assert tokens.verify(legacy, "run", "run-1") == {"seq": 3}
    with pytest.raises(TokenError) as foreign:
        tokens.verify(legacy, "run", "run-2")
    assert foreign.value.code == "token_foreign"
    with pytest.raises(TokenError) as other_secret:
        ContinuationTokens(["other"], ttl_seconds=60, now=clock).verify(legacy, "run", "run-1")
    assert other_secret.value.code == "token_invalid"
    clock.t += 2
    with pytest.raises(TokenError) as expired:
        tokens.verify(legacy, "run", "run-1")
    assert expired.value.code == "token_expired"
