"""Live streams (Server-Sent Events) of agent runs and workflow runs: `GET /api/runs/{id}/stream`,
`GET /api/workflows/runs/{id}/stream`.

- `cursor`: the `id:` of every event, which `Last-Event-ID` / `?after=` resume from;
- `sse`: the wire format;
- `feeds`: what a run or a workflow run shows (the poll views' own builders), read from the orchestration status
  and the session store;
- `watchers`: one watcher per run per process, shared by all of that run's connections;
- `connection`: one client's event sequence from its cursor;
- `handlers`: the HTTP functions (same lookups and problems as the polls, before the stream starts).

The Responses API's streams (`http_api.openai_responses.stream`) ride the same transport with a feed and a position
of their own.
"""
