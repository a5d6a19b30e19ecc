"""The workflow runtime: typed definitions (`definition`), references and conditions (`references`), the flat
program (`program`), the sans-IO `WorkflowDriver` (`driver`) and the requests and events it trades with the
orchestrator (`requests`: activities are named there by their declarations), payloads (`contracts`), the registry."""

from workflow_runtime.definition import (
    AgentStep,
    ApprovalStep,
    BranchStep,
    DelayStep,
    Escalate,
    FunctionStep,
    MonitorStep,
    ParallelStep,
    SignalStep,
    StepData,
    WorkflowDefinition,
    WorkflowDefinitionError,
)
from workflow_runtime.references import Condition

__all__ = [
    "AgentStep",
    "ApprovalStep",
    "BranchStep",
    "Condition",
    "DelayStep",
    "Escalate",
    "FunctionStep",
    "MonitorStep",
    "ParallelStep",
    "SignalStep",
    "StepData",
    "WorkflowDefinition",
    "WorkflowDefinitionError",
]
