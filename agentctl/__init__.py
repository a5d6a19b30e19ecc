"""`agentctl`: a terminal client for the durable agents' HTTP API (it imports nothing of the app)."""
