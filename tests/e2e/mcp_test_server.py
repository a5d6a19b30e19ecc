"""A real MCP server for the tests, built with the official `mcp` package (`MCPServer`).

    python mcp_test_server.py http --port 8123 --state DIR     # Streamable HTTP on 127.0.0.1 (answers as SSE)
    python mcp_test_server.py http --json-response ...          # the same, answering plain JSON (as many servers do)
    python mcp_test_server.py http --json-response --gzip ...   # ... gzip-compressed whenever the client accepts it
    python mcp_test_server.py stdio --state DIR                # stdio (the client starts it)

Everything it does is recorded under the state directory, so tests (in another process) can assert on it:
- `calls.jsonl`: one line per tool call: tool, arguments, the `_meta` idempotency key, selected headers;
- `effects/<key>.json`: `record`'s effect, created once per idempotency key (a retried call finds it and answers the
  same without a second effect);
- `crash_once` (a file the test creates, empty or naming an item): the next `record` (of that item) stores its effect
  and then the process dies before it answers - the lost answer of a crash;
- `tools.json` (a file the test writes): the tool names `tools/list` shows (the tool list changing under a run;
  `later` and `big` are listed only when it names them);
- `schemas.json` (a file the test writes): `{tool: input schema}` that `tools/list` shows instead of the generated ones;
- `output_schemas.json` (a file the test writes): `{tool: output schema}` that `tools/list` shows instead;
- `copies.json` (a file the test writes): `{tool: n}`: `tools/list` also shows n copies of the tool (`tool_1`...);
- `page_size` (a file the test writes, a number): `tools/list` answers in pages of that many tools (`nextCursor`);
- `renamed.json` (a file the test writes): `{tool: name}`: `tools/list` shows the tool under that name;
- `errors.json` (a file the test writes): `{method: message}`: `tools/list` or `tools/call` answers a JSON-RPC error
  with that message (and as its `data`) - a misbehaving server's text (line breaks, terminal escapes, a secret).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolRequestParams,
    EmbeddedResource,
    ImageContent,
    ListToolsResult,
    PaginatedRequestParams,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import Field

IDEMPOTENCY_META_KEY = "idempotencyKey"
DEFAULT_TOOLS = ["echo", "record", "transfer", "fail", "picture"]
RECORDED_HEADERS = ("x-api-key", "authorization", "x-team")
PNG_1PX = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000100ffff03000006000557bfabd40000000049454e44ae426082"
    )
).decode()


class TestServer(MCPServer):
    """`tools/list` shows what `tools.json` names (all tools stay callable, like a server mid-deployment), in pages
    when `page_size` says so."""

    def _refuse_if_asked(self, method: str) -> None:
        errors_file = self.state / "errors.json"
        message = json.loads(errors_file.read_text()).get(method) if errors_file.exists() else None
        if message is not None:
            raise MCPError(code=-32603, message=message, data={"detail": message})

    async def _handle_call_tool(self, ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> Any:
        self._refuse_if_asked("tools/call")
        return await super()._handle_call_tool(ctx, params)

    async def _handle_list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        self._refuse_if_asked("tools/list")
        tools = await self.list_tools()
        size_file = self.state / "page_size"
        if not size_file.exists():
            return ListToolsResult(tools=tools)
        size, start = int(size_file.read_text()), int(params.cursor) if params and params.cursor else 0
        more = start + size < len(tools)
        return ListToolsResult(tools=tools[start:start + size], next_cursor=str(start + size) if more else None)

    def __init__(self, state: Path) -> None:
        super().__init__("test-tools")
        self.state = state

    async def list_tools(self) -> list[Any]:
        listed = await super().list_tools()
        names_file = self.state / "tools.json"
        names = json.loads(names_file.read_text()) if names_file.exists() else DEFAULT_TOOLS
        schemas_file = self.state / "schemas.json"  # {tool: input schema}: a server listing schemas of its own
        schemas = json.loads(schemas_file.read_text()) if schemas_file.exists() else {}
        outputs_file = self.state / "output_schemas.json"  # {tool: output schema} shown instead of the generated ones
        outputs = json.loads(outputs_file.read_text()) if outputs_file.exists() else {}
        shown = [
            tool.model_copy(
                update={"input_schema": schemas.get(tool.name, tool.input_schema),
                        "output_schema": outputs.get(tool.name, tool.output_schema)}
            )
            for tool in listed
            if tool.name in names
        ]
        copies_file = self.state / "copies.json"  # {"tool": n}: n more copies listed, named tool_1..tool_n
        copies = json.loads(copies_file.read_text()) if copies_file.exists() else {}
        renamed_file = self.state / "renamed.json"  # {"tool": "shown name"}
        renamed = json.loads(renamed_file.read_text()) if renamed_file.exists() else {}
        return [tool.model_copy(update={"name": renamed.get(tool.name, tool.name)}) for tool in shown] + [
            tool.model_copy(update={"name": f"{tool.name}_{index}"})
            for tool in shown
            for index in range(1, copies.get(tool.name, 0) + 1)
        ]


def build(state: Path) -> TestServer:
    server = TestServer(state)
    (state / "effects").mkdir(parents=True, exist_ok=True)

    def log_call(ctx: Context, tool: str, arguments: dict[str, Any]) -> str | None:
        meta = ctx.request_context.meta or {}
        key = meta.get(IDEMPOTENCY_META_KEY)
        headers = {h: v for h, v in (ctx.headers or {}).items() if h.lower() in RECORDED_HEADERS}
        line = {"tool": tool, "arguments": arguments, "idempotency_key": key, "headers": headers, "pid": os.getpid()}
        with (state / "calls.jsonl").open("a") as calls:
            calls.write(json.dumps(line) + "\n")
        return key

    @server.tool()
    def echo(text: str, ctx: Context) -> str:
        """Repeat the text."""
        log_call(ctx, "echo", {"text": text})
        return f"echo: {text}"

    @server.tool()
    def record(item: str, ctx: Context) -> str:
        """Record an item (once per idempotency key)."""
        key = log_call(ctx, "record", {"item": item})
        if not key:
            raise ToolError("record needs an idempotency key in _meta")
        effect = state / "effects" / f"{key}.json"
        try:
            with effect.open("x") as created:
                created.write(json.dumps({"item": item}))
        except FileExistsError:
            pass  # a retry of a call whose effect is already recorded
        crash = state / "crash_once"
        if crash.exists() and crash.read_text() in ("", item):
            crash.unlink()
            os._exit(17)  # the effect is stored, the answer is lost
        return f"recorded {json.loads(effect.read_text())['item']}"

    @server.tool()
    def transfer(amount: Annotated[int, Field(ge=1, le=1000)], to: str, ctx: Context) -> str:
        """Transfer money (the approval tests edit its arguments)."""
        log_call(ctx, "transfer", {"amount": amount, "to": to})
        return f"transferred {amount} to {to}"

    @server.tool()
    def fail(reason: str, ctx: Context) -> str:
        """Always fails with the reason."""
        log_call(ctx, "fail", {"reason": reason})
        raise ToolError(f"cannot do that: {reason}")

    @server.tool()
    def picture(ctx: Context) -> list[Any]:
        """An image, a text resource and a resource link."""
        log_call(ctx, "picture", {})
        return [
            TextContent(type="text", text="a red dot"),
            ImageContent(type="image", data=PNG_1PX, mime_type="image/png"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="some notes"),
            ),
            ResourceLink(type="resource_link", uri="file:///big.bin", name="big.bin", mime_type="application/zip"),
        ]

    @server.tool(structured_output=False)  # the contents once, not repeated as structured content
    def big(chars: int, images: int, ctx: Context, refuse: bool = False) -> list[Any]:
        """A text of `chars` characters and `images` PNG-typed images of 400 KB each (results past what a session
        item holds), or with `refuse` a JSON-RPC error whose message is that text; listed only when tools.json
        names it."""
        log_call(ctx, "big", {"chars": chars, "images": images, "refuse": refuse})
        if refuse:
            raise MCPError(code=-32602, message="x" * chars)
        data = base64.b64encode(b"\x89PNG" + bytes(400 * 1024)).decode()
        texts = [TextContent(type="text", text="x" * chars)] if chars else []
        return texts + [ImageContent(type="image", data=data, mime_type="image/png") for _ in range(images)]

    @server.tool()
    def later(x: int, ctx: Context) -> str:
        """A tool that only appears in the list when tools.json names it."""
        log_call(ctx, "later", {"x": x})
        return f"later {x}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["http", "stdio"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state", default=os.environ.get("MCP_TEST_STATE", ""))
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--gzip", action="store_true")
    args = parser.parse_args()
    if not args.state:
        parser.error("--state (or MCP_TEST_STATE) is required")
    server = build(Path(args.state))
    if args.transport == "stdio":
        # A server that talks on its stderr: prints its environment's token, then floods (MCP_TEST_STDERR_CHARS).
        if os.environ.get("MCP_TEST_TOKEN"):
            print(f"starting with MCP_TEST_TOKEN={os.environ['MCP_TEST_TOKEN']}", file=sys.stderr, flush=True)
        flood = int(os.environ.get("MCP_TEST_STDERR_CHARS", "0"))
        for start in range(0, flood, 100):
            print("noise " + "n" * min(94, flood - start), file=sys.stderr)
        sys.stderr.flush()
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app(json_response=args.json_response)
    if args.gzip:
        from starlette.middleware.gzip import GZipMiddleware

        app.add_middleware(GZipMiddleware, minimum_size=0)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
