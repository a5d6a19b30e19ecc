"""Workflows served in the identity tests (`WORKFLOWS_PACKAGE=auth_workflows`)."""

from auth_workflows.flows import publish_flow

__all__ = ["publish_flow"]
