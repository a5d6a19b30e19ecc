"""The agents this app serves. Each module defines `AgentDefinition`s at module level; all are registered at start-up
(`agent_runtime.agents.AgentRegistry.from_package("served_agents")`). Add a module here to serve a new agent."""
