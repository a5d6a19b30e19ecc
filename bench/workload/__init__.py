"""The workload shared by the benchmarks and the load/fault tests (`tests/load/`).

- `agents`: the `worker` agent (AGENTS_PACKAGE=`bench.workload.agents`): tools with large results, side effects
  recorded once, an approval-gated email and a tool that always times out;
- `brain`: a stateless scripted-model responder that drives those tools from the text of the user's message;
- `host`: a devhost (`InProcessHost`) serving the repository's `function_app.py` with that agent and a model URL;
- `client`: async HTTP helpers (start a run, poll it to the end, approve what it asks).
"""
