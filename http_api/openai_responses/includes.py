"""`include` (create's body, retrieve's `include[]` query): extra data OpenAI adds to a response on request.

Every value OpenAI knows is one of three kinds here. The items it completes (file search, web search, code
interpreter and computer calls, input images, reasoning items) never occur in this server's responses (those tools
and inputs are refused; the agents' models' reasoning is not exposed), so asking for them changes nothing - what
OpenAI answers for a response without such items. Logprobs would change the output but no agent model reports them:
refused by name, as `top_logprobs` is, rather than answered with empty lists. Any other value is a 400, as OpenAI's.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit

from http_api.openai_responses.errors import openai_error, unsupported

NOTHING_TO_ADD = (
    "file_search_call.results",
    "web_search_call.results",
    "web_search_call.action.sources",
    "message.input_image.image_url",
    "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
    "reasoning.encrypted_content",
)
NOT_PRODUCED = ("message.output_text.logprobs",)
KNOWN = (*NOTHING_TO_ADD, *NOT_PRODUCED)
QUERY_NAME = "include[]"  # how OpenAI clients send a list in a query (`include[]=a&include[]=b`)


def check_include(values: Iterable[str], param: str = "include") -> None:
    """Accept what asks for nothing this server leaves out; refuse the rest naming `param[i]`."""
    for index, value in enumerate(values):
        where = f"{param}[{index}]"
        if value in NOT_PRODUCED:
            raise unsupported(where, f"'{value}': the agents' models report no logprobs")
        if value not in KNOWN:
            supported = ", ".join(f"'{v}'" for v in KNOWN)
            raise openai_error(
                400, f"Invalid value: '{value}'. Supported values are: {supported}.", param=where, code="invalid_value"
            )


def query_include(url: str) -> list[str]:
    """Every `include[]` value of the request's query, read from its URL: `req.params` holds one string per name (the
    values comma-joined, as Azure's host passes them: `http_api.fastapi_bridge.host_query`), which cannot tell two
    values from one with a comma in it; the URL keeps each value as sent."""
    return [value for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True) if name == QUERY_NAME]
