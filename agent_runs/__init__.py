"""Durable agent runs: the contract between the HTTP API, the `agent_run` orchestrator and the activities.

Host-agnostic (no azure.functions import): payload models and their size budget, message sequence numbering, the
pure `RunDriver` the orchestrator steps through, the store-backed conversation log, and the per-process services.
"""
