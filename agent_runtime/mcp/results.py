"""MCP tool results in our vocabulary: text, images/audio/blobs (`DataContent`), resource links (`UriContent`).

A result that is all text becomes one string (what the model reads best); anything else becomes a list of our
contents in their JSON form; structured content (`structuredContent`) is the result only when there is no text.
`isError` results are the tool's own error report and reach the model as a tool error.

A result is kept to `MAX_RESULT_BYTES` as stored (`content_sizes`): a server may answer up to
`answers.MAX_ANSWER_BYTES` (4 MiB), while the session stores the result as one message of at most 2 MB (Cosmos's
item limit); what does not fit is cut (text) or left out (data) with a note the model reads.
"""

from __future__ import annotations

from typing import Any

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextResourceContents,
)
from mcp_types import (
    TextContent as McpText,
)

from ..content_sizes import MAX_CONTENT_BYTES as MAX_RESULT_BYTES
from ..content_sizes import NOTE_ROOM, cut_text, fit_result, json_bytes
from ..messages import DataContent, TextContent, UriContent

# Inline data above this is replaced by a note: a message item must stay far below the store's 2 MB item limit.
MAX_INLINE_BYTES = 512 * 1024

OurContent = TextContent | DataContent | UriContent


def convert_contents(result: CallToolResult) -> list[OurContent]:
    return [converted for block in result.content for converted in [_convert(block)] if converted is not None]


def result_value(result: CallToolResult) -> Any:
    """What the tool step stores as the call's result (the model reads it as JSON or text), within
    `MAX_RESULT_BYTES`."""
    value = _full_value(result)
    return _fit_contents(value) if isinstance(value, list) else fit_result(value)


def _full_value(result: CallToolResult) -> Any:
    contents = convert_contents(result)
    structured = result.structured_content
    if all(isinstance(c, TextContent) for c in contents):
        text = "\n".join(c.text for c in contents)  # type: ignore[union-attr]
        if structured is not None and not text:
            return structured
        return text
    # Mixed contents: ours (the structured form, when a server adds one, repeats them for programs, not models).
    return [c.model_dump(mode="json", exclude_none=True) for c in contents]


def error_text(result: CallToolResult) -> str:
    text = "\n".join(c.text for c in convert_contents(result) if isinstance(c, TextContent)).strip()
    return cut_text(text) or "the tool reported an error"


def _fit_contents(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The contents in order while they fit in `MAX_RESULT_BYTES`; the first that does not is cut (text) or noted
    (data), and one note counts the rest (a server may send thousands of small ones)."""
    fitted: list[dict[str, Any]] = []
    left = MAX_RESULT_BYTES - NOTE_ROOM
    for index, content in enumerate(contents):
        size = json_bytes(content) + 1  # and its comma
        if size <= left:
            fitted.append(content)
            left -= size
            continue
        if content.get("type") == "text" and left > NOTE_ROOM:
            fitted.append({**content, "text": cut_text(content["text"], left)})
        else:
            kind = content.get("media_type") or content.get("type")
            fitted.append({"type": "text", "text": f"[{kind} content omitted: over {MAX_RESULT_BYTES} bytes in all]"})
        if rest := len(contents) - index - 1:
            fitted.append({"type": "text", "text": f"[{rest} more contents omitted]"})
        break
    return fitted


def _convert(block: Any) -> OurContent | None:
    if isinstance(block, McpText):
        return TextContent(text=block.text)
    if isinstance(block, ImageContent | AudioContent):
        return _data(block.data, block.mime_type)
    if isinstance(block, ResourceLink):
        return UriContent(uri=str(block.uri), media_type=block.mime_type, name=block.name)
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            return TextContent(text=f"[resource {resource.uri}]\n{resource.text}")
        if isinstance(resource, BlobResourceContents):
            return _data(resource.blob, resource.mime_type or "application/octet-stream")
    return TextContent(text=f"[unsupported MCP content: {getattr(block, 'type', type(block).__name__)}]")


def _data(base64_data: str, media_type: str) -> OurContent:
    size = len(base64_data) * 3 // 4 - len(base64_data) + len(base64_data.rstrip("="))
    if size > MAX_INLINE_BYTES:
        return TextContent(text=f"[{media_type} content of {size} bytes omitted: over {MAX_INLINE_BYTES} bytes]")
    return DataContent(uri=f"data:{media_type};base64,{base64_data}", media_type=media_type)
