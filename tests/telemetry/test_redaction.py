"""`telemetry.redaction` with the real OpenTelemetry SDK: a remembered secret raised inside a span (as a model error
whose cause echoes the key) reaches no exporter - neither behind `RedactingSpanExporter` nor after a
`RedactingSpanProcessor` (Azure Monitor's place) - and no log record, whatever handler formats it."""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_runtime.mcp.config import McpServer
from agent_runtime.redaction import redact, redact_quoted, remember_secret
from telemetry.redaction import RedactingSpanExporter, RedactingSpanProcessor, install_log_redaction

SECRET = "unit-key-Hh3-remembered"


class EchoedKeyError(RuntimeError):
    pass


def fail_in_span(provider: TracerProvider) -> None:
    tracer = provider.get_tracer("test")
    with pytest.raises(ValueError), tracer.start_as_current_span(f"chat {SECRET}", attributes={"k": [SECRET]}):
        try:
            raise EchoedKeyError(f"401: you sent Authorization: Bearer {SECRET}")
        except EchoedKeyError as cause:
            raise ValueError("model: bad request") from cause


def exported_text(exporter: InMemorySpanExporter) -> str:
    return "".join(span.to_json() for span in exporter.get_finished_spans())


def test_the_redaction_masks_remembered_secrets_and_credential_shapes() -> None:
    remember_secret(SECRET)
    assert redact(f"key {SECRET} and Bearer abc.def and sk-abcdef123") == "key *** and Bearer *** and ***"
    run_id = "38e5bc3c284d4feaab6f130cd910f425"
    assert redact(run_id) == run_id and redact(run_id, long_tokens=True) == "***"  # ids stay ids


@pytest.mark.parametrize("place", ["exporter", "processor"])
def test_no_span_exporter_sees_the_secret(place: str) -> None:
    remember_secret(SECRET)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    if place == "exporter":
        provider.add_span_processor(SimpleSpanProcessor(RedactingSpanExporter(memory)))
    else:
        provider.add_span_processor(RedactingSpanProcessor())
        provider.add_span_processor(SimpleSpanProcessor(memory))
    fail_in_span(provider)
    text = exported_text(memory)
    assert "exception.stacktrace" in text and "EchoedKeyError" in text  # the cause is recorded...
    assert SECRET not in text  # ...without the key
    provider.shutdown()


def test_log_records_are_redacted_for_every_handler(caplog: pytest.LogCaptureFixture) -> None:
    remember_secret(SECRET)
    install_log_redaction()
    logger = logging.getLogger("test.redaction")
    with caplog.at_level(logging.INFO, logger="test.redaction"):
        logger.info("calling with %s", SECRET)
        try:
            raise EchoedKeyError(f"echo {SECRET}")
        except EchoedKeyError:
            logger.exception("failed")
    formatted = "\n".join(logging.Formatter().format(record) for record in caplog.records)
    assert "EchoedKeyError" in formatted and SECRET not in formatted and SECRET not in caplog.text


@pytest.mark.parametrize("secret", ['pass\\word"-Hh3', "line\nbreak-Hh3", "caf\u00e9-key-Hh3", "tab\tkey'-Hh3\""],
                         ids=["backslash-quote", "control", "non-ascii", "both-quotes"])
def test_a_secret_quoted_escaped_is_masked(secret: str, caplog: pytest.LogCaptureFixture) -> None:
    """A traceback quotes an answer as `b'...'` (pydantic's `input_value`) and a server may echo JSON: a secret with a
    backslash, a quote, a control or a non-ASCII character is written escaped there, and was shown whole (and its
    start at a cut)."""
    remember_secret(secret)
    install_log_redaction()
    quoted = [repr(secret), repr(secret.encode()), json.dumps(secret), json.dumps(secret, ensure_ascii=False)]
    logger = logging.getLogger("mcp.client.test_redaction")
    with caplog.at_level(logging.INFO, logger="mcp.client.test_redaction"):
        try:
            raise EchoedKeyError(" ".join(quoted) + f" and cut b'{repr(secret.encode())[2:-3]}...'")
        except EchoedKeyError:
            logger.exception("failed")
    formatted = logging.Formatter().format(caplog.records[0])
    assert "EchoedKeyError" in formatted and formatted.count("***") == len(quoted) + 1, formatted
    assert not any(form[1:6] in formatted for form in quoted), formatted


def test_a_redacted_record_keeps_its_arguments_for_formatters_that_read_them(caplog: pytest.LogCaptureFixture) -> None:
    """uvicorn's access formatter unpacks `record.args` (client, method, path, version, status): a record whose
    secret is in an argument keeps five arguments, the secret masked; a clean record is left as it was."""
    from uvicorn.logging import AccessFormatter

    remember_secret(SECRET)
    install_log_redaction()
    logger = logging.getLogger("test.redaction.access")
    with caplog.at_level(logging.INFO, logger="test.redaction.access"):
        logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "GET", f"/api/x?key={SECRET}", "1.1", 200)
        logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:2", "POST", "/api/runs", "1.1", 202)
        logger.info(f"template {SECRET} %s", "arg")  # the secret in the template: only the message can carry it
    secret_path, clean, in_template = caplog.records
    formatter = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False)
    assert SECRET not in formatter.format(secret_path) and "/api/x?key=***" in formatter.format(secret_path)
    assert formatter.format(clean) == '127.0.0.1:2 - "POST /api/runs HTTP/1.1" 202 Accepted'
    assert clean.args == ("127.0.0.1:2", "POST", "/api/runs", "1.1", 202)
    assert in_template.getMessage() == "template *** arg" and in_template.args is None


async def test_mcp_settings_remember_their_credentials_only() -> None:
    """Only the MCP settings that are credentials are masked: a harmless value (a module path, a URL's host and path,
    a tenant header) stays readable in logs, and every remembered value would slow each `redact`."""
    settings = {
        "MCP_URL": "https://mcp.example.com/tools/search-index?code=fnkey-Qq7-remembered&format=verbose",
        "MCP_KEY": "apikey-Zz9-remembered",
        "MCP_TENANT": "tenant-contoso-prod",
        "GH_TOKEN": "ghtoken-Ww4-remembered",
        "MODULE_PATH": "/srv/mcp-servers/python",
    }
    http = McpServer(name="remote", url_setting="MCP_URL",
                     header_settings={"X-Api-Key": "MCP_KEY", "X-Tenant": "MCP_TENANT"})
    stdio = McpServer(name="local", command="python",
                      env_settings={"GITHUB_TOKEN": "GH_TOKEN", "PYTHONPATH": "MODULE_PATH"})
    http.resolved_url(settings)
    await http.resolved_headers(settings)
    stdio.resolved_env(settings)
    line = redact(" ".join(settings.values()))
    for secret in ("fnkey-Qq7-remembered", "apikey-Zz9-remembered", "ghtoken-Ww4-remembered"):
        assert secret not in line
    for harmless in ("https://mcp.example.com/tools/search-index?code=", "format=verbose", "tenant-contoso-prod",
                     "/srv/mcp-servers/python"):
        assert harmless in line


def test_an_mcp_variable_that_is_no_url_is_passed_on_as_it_is() -> None:
    """An environment value is searched for URL credentials, but any text may be one: a value `urlsplit` cannot read
    as a URL (a pattern, a bracketed list) is handed to the server unchanged, not a failure to start it."""
    settings = {"PATTERN": "//[a-z]+", "ENDPOINT": "http://[not-an-ipv6"}
    stdio = McpServer(name="local", command="python", env_settings={"PATTERN": "PATTERN", "ENDPOINT": "ENDPOINT"})
    assert stdio.resolved_env(settings) == settings


async def test_an_mcp_header_that_is_a_url_has_its_credentials_remembered() -> None:
    """A header whose name is no credential's may still carry a URL with one (a callback with a SAS `sig`), as an
    environment value may: its credentials are masked, the rest of it is not."""
    settings = {"CALLBACK": "https://hooks.example.com/cb?sv=2024&sig=sasSig-Hh3-remembered"}
    http = McpServer(name="remote", url="https://mcp.example.com/mcp", header_settings={"X-Callback": "CALLBACK"})
    await http.resolved_headers(settings)
    line = redact(settings["CALLBACK"])
    assert "sasSig-Hh3-remembered" not in line and "https://hooks.example.com/cb?sv=2024&sig=" in line


@pytest.mark.parametrize(
    ("quoted", "others", "expected"),
    [  # the start of the secret before a cut, then its end after one
        ("b'/mcp?code=e2e-url-secr...xxx'", ["url-secr-aa", "rl-secr-bb", "l-secr-cc", "-secr-dd", "secr-ee"],
         "b'/mcp?code=***...xxx'"),
        ("b'xxx...-secret-8642 is not JSON'", ["aa-secret-86", "bb-secret-8", "cc-secret", "dd-secr", "ee-sec"],
         "b'xxx...*** is not JSON'"),
    ],
    ids=["start", "end"],
)
def test_a_secret_at_a_cut_is_masked_whole_when_others_share_its_part(
    quoted: str, others: list[str], expected: str
) -> None:
    """`redact_quoted` masked each secret's parts in turn, in no set order: another secret starting (or ending) with
    the end (or start) of the part shown (`url-secr` of `code=e2e-url-secr...`) could be masked first and leave the
    rest of it (`code=e2e-***...`). Five such secrets: it failed five times in six."""
    assert redact_quoted(quoted, ["e2e-url-secret-8642", *others]) == expected


def test_a_secret_cut_by_a_pydantic_error_in_an_unretrieved_task_is_masked(caplog: pytest.LogCaptureFixture) -> None:
    """asyncio logs a task's exception nobody retrieved ("Task exception was never retrieved", the task's repr in the
    message, the traceback after it): a pydantic error in it quotes a peer's answer cut (`input_value='<start>...'`),
    and the secret's start at the cut is as much a leak there as in the `mcp` loggers' records."""
    import asyncio
    import gc

    from pydantic import BaseModel

    class Answer(BaseModel):
        count: int

    secret = "unit-cut-Zz8-" + "k" * 60 + "-remembered"
    remember_secret(secret)
    install_log_redaction()

    async def parse_answer() -> None:
        Answer.model_validate({"count": f"token={secret} and more text after it"})

    async def main() -> None:
        task = asyncio.get_running_loop().create_task(parse_answer())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        del task
        gc.collect()

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(main())
    formatted = "\n".join(logging.Formatter().format(record) for record in caplog.records)
    assert "Task exception was never retrieved" in formatted and "input_value=" in formatted and "..." in formatted
    for part in (secret[:20], secret[-20:], "unit-cut-Zz8-kkkk", "kkkk-remembered"):
        assert part not in formatted, formatted


def test_a_callers_own_secrets_are_ordered_once_and_mask_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """`redact_quoted` with a caller's own secrets (a server's URL credentials, passed on each of its errors) sorted
    every cut part of every known secret and of them on every call. The set is ordered once (again only when a
    secret is remembered) and masks as before: the longest part first, whichever secret it is of. Secrets passed as
    an iterator were read twice, the second time empty: their parts at a cut were not masked."""
    from agent_runtime import redaction

    built: list[int] = []
    real = redaction._longest_parts_first
    monkeypatch.setattr(redaction, "_longest_parts_first", lambda secrets: built.append(1) or real(secrets))
    remember_secret("unit-order-Hh3-remembered")
    own = ["e2e-url-secret-8642", "url-secr-aa", "rl-secr-bb", "aa-secret-86", "ee-sec"]
    quoted = "b'/mcp?code=e2e-url-secr...xxx' b'xxx...-secret-8642 is not JSON' b'unit-order-Hh3-rem...'"
    expected = "b'/mcp?code=***...xxx' b'xxx...*** is not JSON' b'***...'"
    assert [redact_quoted(quoted, own) for _ in range(3)] == [expected] * 3
    assert [redact_quoted(quoted, own[::-1]), redact_quoted(quoted, own[:1])] == [expected] * 2
    assert len(built) == 2  # `own` (in any order) and `own[:1]`: each set once
    assert redact_quoted(quoted, iter(own)) == expected
    remember_secret("unit-order-Zz9-remembered")
    assert redact_quoted(quoted + " b'unit-order-Zz9-r...'", own) == expected + " b'***...'"
    assert len(built) == 3
