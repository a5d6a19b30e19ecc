"""`sdk_retry`: what the openai SDK's retry headers say, bounded whatever a client sends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import azure.functions as func
import pytest

from http_api.openai_responses.sdk_retry import first_attempt_not_before, is_sdk_retry

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def request(**headers: str) -> func.HttpRequest:
    return func.HttpRequest("POST", "http://localhost/api/v1/responses", headers=headers, body=b"{}")


def test_the_first_attempt_of_a_retry_started_within_its_attempts_read_timeouts_and_waits() -> None:
    retry = request(**{"x-stainless-retry-count": "2", "x-stainless-read-timeout": "30.0"})
    assert is_sdk_retry(retry)
    assert first_attempt_not_before(retry, NOW) == NOW - timedelta(seconds=2 * (30 + 90))


def test_without_a_timeout_header_the_sdk_default_is_assumed() -> None:
    retry = request(**{"x-stainless-retry-count": "1"})
    assert first_attempt_not_before(retry, NOW) == NOW - timedelta(seconds=600 + 90)


def test_a_first_attempt_is_no_retry() -> None:
    assert not is_sdk_retry(request(**{"x-stainless-retry-count": "0"}))
    assert not is_sdk_retry(request())
    assert first_attempt_not_before(request(), NOW) == NOW


@pytest.mark.parametrize("timeout", ["nan", "inf", "-1", "0", "1e309", "soon", ""])
def test_a_timeout_that_is_no_positive_number_counts_as_the_default(timeout: str) -> None:
    retry = request(**{"x-stainless-retry-count": "1", "x-stainless-read-timeout": timeout})
    assert first_attempt_not_before(retry, NOW) == NOW - timedelta(seconds=600 + 90)


@pytest.mark.parametrize("count", ["-1", "1.5", "one", "+2", "\u00b2", "\u0661"])
def test_a_count_that_is_no_whole_number_is_no_retry(count: str) -> None:
    assert not is_sdk_retry(request(**{"x-stainless-retry-count": count}))


def test_forged_huge_values_stay_bounded() -> None:
    retry = request(**{"x-stainless-retry-count": "9" * 400, "x-stainless-read-timeout": "1e300"})
    assert first_attempt_not_before(retry, NOW) == NOW - timedelta(seconds=100 * (86_400 + 90))


@pytest.mark.parametrize("count", ["9" * 5000, "000000000003"])
def test_a_long_count_is_read_without_error(count: str) -> None:
    retry = request(**{"x-stainless-retry-count": count})
    expected = 3 if count.startswith("0") else 100
    assert first_attempt_not_before(retry, NOW) == NOW - timedelta(seconds=expected * (600 + 90))
