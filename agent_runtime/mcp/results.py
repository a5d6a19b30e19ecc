"""MCP tool results in our vocabulary: text, images/audio/blobs (`DataContent`), resource links (`UriContent`).

A result that is all text becomes one string (what the model reads best); anything else becomes a list of our
contents in their JSON form; structured content (`structuredContent`) is the result only when there is no text.
`isError` results are the tool's own error report and reach the model as a tool error.
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

from ..messages import DataContent, TextContent, UriContent

# Inline data above this is replaced by a note: a message item must stay far below the store's 2 MB item limit.
MAX_INLINE_BYTES = 512 * 1024

OurContent = TextContent | DataContent | UriContent


def convert_contents(result: CallToolResult) -> list[OurContent]:
    return [converted for block in result.content for converted in [_convert(block)] if converted is not None]


def result_value(result: CallToolResult) -> Any:
    """What the tool step stores as the call's result (the model reads it as JSON or text)."""
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
    return text or "the tool reported an error"


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
