"""Durable activities: the only places with I/O during a run.

Each takes a small `agent_runs.contracts` payload (a dict, as Durable delivers it), works on the session store
through the agent runtime's steps, and returns a small summary. All are safe to run twice (Durable delivers
activities at least once): every write has a deterministic id and seq.
"""
