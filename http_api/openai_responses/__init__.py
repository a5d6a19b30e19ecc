"""The OpenAI Responses API over the durable agent runs (`/api/v1/responses`): any OpenAI client talks to the agents.

`ids` maps response ids to (run, turn); `models` holds the wire shapes; `snapshots` reads a run; `mapping` turns it
(store + orchestration state) into a Response object; `requests` validates what a client sends; `handlers` are the
routes; `errors` gives OpenAI's error shape; `events` maps successive responses to the streaming events, which
`stream` sends over the live streams' SSE transport.
"""
