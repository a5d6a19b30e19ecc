"""Workflows served in the workflow tests: the shipped examples plus flows that exercise signals, failing steps,
an eternal monitor and a child run that waits for a person (so a cancel finds it running)."""

from served_workflows.expert_panel import expert_panel
from served_workflows.follow_up import follow_up
from served_workflows.review_pipeline import review_pipeline

__all__ = ["expert_panel", "follow_up", "review_pipeline"]
