"""Host-agnostic agent runtime: messages, tools, agent definitions, the sans-IO loop, middleware, model clients.

Nothing in this package imports Azure Functions or the Durable SDK; the durable layer adapts to it.
"""
