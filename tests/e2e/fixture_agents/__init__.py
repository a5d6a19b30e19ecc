"""Agents served only to the end-to-end tests (`AGENTS_PACKAGE=fixture_agents`, with `tests/e2e` on the path).

`tools.py` holds the tools (including the demo's own `send_email`, so its idempotent effect is what gets tested);
`agents.py` the agents that combine them. `store_pause.py` lets a test hold one of the app's store calls in flight,
in whichever process runs the app (installed on import).
"""

from fixture_agents import store_pause

store_pause.install()
