"""Host-agnostic agent runtime: messages, tools, agent definitions, the sans-IO loop, middleware, model clients.

Nothing in this package imports Azure Functions or the Durable SDK; the durable layer adapts to it.

How a run fits together:
- `messages`    the vocabulary (contents, messages, responses; seed 002's approval contents);
- `tools`       `@tool`: schema from type hints, validation, approval policy, timeout, `ToolContext`;
- `agents`      `AgentDefinition` + `AgentRegistry` (loads the top-level `served_agents/` package);
- `loop`        `AgentLoop`: pure state machine (events in `loop_types`) deciding call model / run tools / ask
                approval / finish (seed 000's function-invocation rules);
- `steps`       the I/O of each command against a `conversation.ConversationLog`, with deterministic message ids;
- `runner`      `AgentRunner`: drives the loop with the steps in-process (the durable orchestrator does the same
                with activities);
- `middleware`  onion pipelines around a run, each model call and each tool call, and built-in layers;
- `models`      model clients (`ModelClient`, `OpenAIChatClient`), errors and retry policy;
- `mcp`         `McpServer`: tools of Model Context Protocol servers, discovered once per run.
"""
