"""Agents of the run-semantics conformance table (`AGENTS_PACKAGE=semantics_agents`, with `tests/e2e` on the path):
a package of their own so the other end-to-end tests keep seeing only `fixture_agents`."""
