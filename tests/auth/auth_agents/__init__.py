"""Agents served in the identity tests (`AGENTS_PACKAGE=auth_agents`, with `tests/auth` on the path)."""
