"""Durable activities: the only places with I/O during a run.

Each is a typed coroutine declared with `durable_steps.activity` (the Functions app registers it and orchestrators
call it from that one declaration): it takes a small `agent_runs.contracts` model, works on the session store through
the agent runtime's steps, and returns a small typed summary. All are safe to run twice (Durable delivers
activities at least once): every write has a deterministic id and seq.
"""
