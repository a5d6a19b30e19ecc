"""Agents served only to the end-to-end tests (`AGENTS_PACKAGE=fixture_agents`, with `tests/e2e` on the path).

`tools.py` holds the tools (including the demo's own `send_email`, so its idempotent effect is what gets tested);
`agents.py` the agents that combine them.
"""
