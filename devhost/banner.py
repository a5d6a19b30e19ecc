"""What devhost prints once the app is served: where it is and what to try first, not every function.

An app says what to try in its pyproject.toml (any other app gets its routes counted and the first few shown):

    [tool.devhost]
    banner = ["The page: {base_url}/api/ui", "Try: curl -s {base_url}/api/health", "agentctl{url_option} runs"]

`{base_url}` is where the host listens; `{url_option}` is ` --url {base_url}` when the port is not the default one
(clients that default to it need to be told), else empty."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Protocol

SHOWN_ROUTES = 3


class _Route(Protocol):
    url: str
    methods: list[str] | None


class _Host(Protocol):
    base_url: str
    port: int

    def routes(self) -> list[_Route]: ...


def app_banner_lines(app_dir: Path) -> list[str] | None:
    """The app's `[tool.devhost] banner` lines, or None (no pyproject.toml, no such table, not a list of strings)."""
    try:
        document = tomllib.loads((app_dir / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    lines = document.get("tool", {}).get("devhost", {}).get("banner")
    if isinstance(lines, list) and all(isinstance(line, str) for line in lines):
        return lines
    return None


def banner(host: _Host, app_dir: Path, default_port: int, list_command: str) -> str:
    """`list_command`: how to list every function (`--list-functions`, with the interpreter serving the app)."""
    url_option = "" if host.port == default_port else f" --url {host.base_url}"
    lines = app_banner_lines(app_dir)
    if lines is not None:
        try:
            shown = [line.format(base_url=host.base_url, url_option=url_option) for line in lines]
        except (KeyError, IndexError, ValueError):
            shown = lines  # a line with other braces: shown as written
    else:
        routes = host.routes()
        shown = [f"{','.join(r.methods) if r.methods else 'ALL'} {r.url}" for r in routes[:SHOWN_ROUTES]]
        shown.append(f"{len(routes)} HTTP routes in all")
    shown.append(f"Every function: {list_command}. Stop: Ctrl-C.")
    return "\n".join(["", *(f"  {line}" for line in shown), ""])
