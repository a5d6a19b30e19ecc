"""The sans-IO core of notifications: Standard Webhooks signatures (verified by the library receivers use), backoff
and Retry-After, decision links (forged, expired, other approval), per-run webhook destinations (allow list, private
addresses), event filters, and what never appears in an event (arguments unless allowed)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook

from notifications.backoff import MAX_DELAY_SECONDS, STEP_GIVE_UP_AFTER, gives_up, next_delay, parse_retry_after
from notifications.destinations import DestinationError, check_resolved, check_run_webhook, is_public_address
from notifications.events import approval_event, approval_transitions, event_id, run_event, wanted
from notifications.links import LinkError, sign_link, verify_link
from notifications.payloads import arguments_text, webhook_body
from notifications.settings import NotificationSettings
from notifications.signing import signed_headers
from session_store import ApprovalRecord, RunRecord

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def record(**changes: object) -> ApprovalRecord:
    base = ApprovalRecord(approval_id="ap1", run_id="run1", session_id="s1", call_id="c1", tool="send_email",
                          arguments={"to": "bob@example.com", "body": "a\nb"}, created_at=NOW,
                          expires_at=NOW + timedelta(hours=1))
    return base.model_copy(update=changes)


def test_signatures_verify_with_the_standard_webhooks_library() -> None:
    event = approval_event("approval.requested", "", NOW, record(), agent="helper", base_url="", page=None,
                           include_arguments=False)
    body = webhook_body(event)
    now = datetime.now(UTC)
    headers = signed_headers([SECRET], event.id, now, body)
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(SECRET).verify(body, headers)["type"] == "approval.requested"
    with pytest.raises(Exception, match="signature"):
        Webhook(SECRET).verify(body.replace("send_email", "transfer"), headers)


def test_event_ids_are_deterministic_and_arguments_only_when_allowed() -> None:
    first = approval_event("approval.requested", "", NOW, record(), agent="a", base_url="", page=None,
                           include_arguments=False)
    again = approval_event("approval.requested", "", NOW, record(), agent="a", base_url="", page=None,
                           include_arguments=True)
    assert first.id == again.id == event_id("run1", "approval.requested", "ap1", "")
    assert "arguments" not in first.data and again.data["arguments"]["to"] == "bob@example.com"


def test_each_end_of_a_rewound_run_is_an_event_of_its_own() -> None:
    failed = RunRecord(run_id="run1", session_id="s1", agent="a", status="failed", updated_at=NOW)
    first = run_event(failed, base_url="")
    assert first is not None and first.id == event_id("run1", "run.failed")  # as before rewinds existed
    again = run_event(failed.model_copy(update={"rewinds": [{"rewind_id": "r1"}]}), base_url="")
    twice = run_event(failed.model_copy(update={"rewinds": [{"rewind_id": "r1"}, {"rewind_id": "r2"}]}), base_url="")
    assert again is not None and twice is not None and len({first.id, again.id, twice.id}) == 3


def test_an_approval_implies_its_events_in_order() -> None:
    decided = record(status="rejected", decided_at=NOW, escalated_to="role:chief", escalated_at=NOW)
    assert [t for t, _, _ in approval_transitions(decided)] == [
        "approval.requested", "approval.escalated", "approval.decided"]
    assert [t for t, _, _ in approval_transitions(record(status="expired"))] == [
        "approval.requested", "approval.expired"]
    assert approval_transitions(record(tool="workflow_gate:sign_off"))[0][0] == "workflow.gate_opened"


def test_backoff_doubles_to_an_hour_and_retry_after_wins() -> None:
    assert [next_delay(n) for n in range(4)] == [10, 20, 40, 80]
    assert next_delay(30) == MAX_DELAY_SECONDS
    assert next_delay(0, "120") == 120
    assert next_delay(0, "999999") == 6 * 3600  # bounded
    assert parse_retry_after("Wed, 01 Jan 2030 12:05:00 GMT", now=NOW) == 300
    assert parse_retry_after("soon") is None


def test_backoff_stays_capped_however_many_times_a_step_failed() -> None:
    """A delivery step that keeps failing counts up without end: its delay stays the cap (`10.0 * 2**1024` overflowed
    a float, which failed the delivery orchestration after about a thousand failures)."""
    assert [next_delay(n) for n in (9, 1023, 1024, 5000, 10**6)] == [MAX_DELAY_SECONDS] * 5


def test_a_step_failing_itself_is_given_up_after_days_whatever_the_clock_s_zone() -> None:
    assert timedelta(days=1) <= STEP_GIVE_UP_AFTER  # a schedule of days, as Standard Webhooks senders have
    assert not gives_up(NOW, NOW + STEP_GIVE_UP_AFTER - timedelta(seconds=1))
    assert gives_up(NOW, NOW + STEP_GIVE_UP_AFTER)
    assert gives_up(NOW.replace(tzinfo=None), NOW + STEP_GIVE_UP_AFTER)  # a naive time is UTC


def test_decision_links_are_bound_signed_and_expiring() -> None:
    link = sign_link(["k1"], run_id="run1", approval_id="ap1", expires_at=NOW + timedelta(minutes=5))
    assert verify_link(["k1"], link, approval_id="ap1", now=NOW) == "run1"
    assert verify_link(["k2", "k1"], link, approval_id="ap1", now=NOW) == "run1"  # rotated secrets
    # During a rotation the first (new) secret signs: the link outlives the retired one, which signed nothing.
    rotating = sign_link(["k2", "k1"], run_id="run1", approval_id="ap1", expires_at=NOW + timedelta(minutes=5))
    assert verify_link(["k2"], rotating, approval_id="ap1", now=NOW) == "run1"
    with pytest.raises(LinkError):
        verify_link(["k1"], rotating, approval_id="ap1", now=NOW)
    for token, approval, now in ((link, "ap2", NOW), (link, "ap1", NOW + timedelta(minutes=6)),
                                 (link[:-3] + "abc", "ap1", NOW), ("", "ap1", NOW)):
        with pytest.raises(LinkError):
            verify_link(["k1"], token, approval_id=approval, now=now)
    with pytest.raises(LinkError):
        verify_link(["other"], link, approval_id="ap1", now=NOW)


@pytest.mark.parametrize(("url", "why"), [
    ("https://hooks.example.com/x", None),
    ("https://evil.example.net/x", "not in WEBHOOK_ALLOWED_HOSTS"),
    ("https://user:pw@hooks.example.com/x", "credentials"),
    ("ftp://hooks.example.com/x", "http(s)"),
    ("https://hooks.example.com:99999/x", "not a valid URL"),
    ("https://hooks.example.com/" + "x" * 3000, "at most"),
])
def test_run_webhooks_only_to_allowed_hosts(url: str, why: str | None) -> None:
    if why is None:
        assert check_run_webhook(url, {"hooks.example.com"}) == url
    else:
        with pytest.raises(DestinationError, match=why.replace("(", r"\(").replace(")", r"\)")):
            check_run_webhook(url, {"hooks.example.com"})
    with pytest.raises(DestinationError, match="not enabled"):
        check_run_webhook("https://hooks.example.com/x", set())


@pytest.mark.parametrize("address", [
    "2002:7f00:1::",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of the metadata endpoint 169.254.169.254
    "::ffff:169.254.169.254",  # IPv4-mapped
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b:1::a00:1",  # local-use NAT64
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo: the IPv4 address inside cannot be checked
    "100.64.0.1",  # shared address space (carrier-grade NAT): not global
    "168.63.129.16",  # Azure's wire server and DNS, reachable from every Azure host
    "fe80::1%eth0", "0.0.0.0", "::", "255.255.255.255", "224.0.0.1",
])
def test_internal_addresses_in_every_spelling_are_not_public(address: str) -> None:
    assert not is_public_address(address)


@pytest.mark.parametrize("address", ["20.50.2.1", "2606:4700::1111", "64:ff9b::1432:201", "2002:1432:201::"])
def test_public_addresses_are_public_whatever_their_spelling(address: str) -> None:
    assert is_public_address(address)


def test_private_and_loopback_destinations_are_refused_when_sending() -> None:
    assert not any(is_public_address(a) for a in ("127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "192.168.1.1"))
    assert is_public_address("20.50.2.1")
    with pytest.raises(DestinationError, match="private or loopback"):
        asyncio.run(check_resolved("http://localhost:8080/x", allow_private=False))
    asyncio.run(check_resolved("http://localhost:8080/x", allow_private=True))


def test_event_filters_and_readable_arguments() -> None:
    assert wanted("approval.requested", []) and wanted("approval.requested", ["approval.*"])
    assert not wanted("run.completed", ["approval.*", "workflow.completed"])
    assert arguments_text({"body": "a\nb", "n": 3}) == "body:\na\nb\nn: 3"


def test_settings_parse_lists_and_the_slack_map(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBHOOK_URLS", "https://a.example.com/h, https://b.example.com/h")
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("SLACK_APPROVERS", "U1=alice@contoso.com/Payments.Approver Publisher,U2=bob")
    settings = NotificationSettings()
    assert settings.webhook_url_list() == ["https://a.example.com/h", "https://b.example.com/h"]
    assert settings.slack_user_map() == {"U1": ("alice@contoso.com", ["Payments.Approver", "Publisher"]),
                                         "U2": ("bob", [])}
    assert SECRET not in repr(settings)  # secrets and URLs never printed
