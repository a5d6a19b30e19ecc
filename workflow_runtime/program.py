"""A definition compiled to a flat program: one instruction per step, branches as conditional jumps.

Flat so that the driver's position is one integer (`pc`) that survives continue-as-new unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from workflow_runtime.definition import BranchStep, ParallelStep, WorkflowDefinition

Op = Literal["agent", "function", "parallel", "approval", "signal", "delay", "monitor", "test", "jump"]


class Instruction(BaseModel):
    model_config = ConfigDict(frozen=True)

    op: Op
    step_id: str
    target: int | None = None
    """`test`: where to go when the condition is false; `jump`: where to go."""

    def branch_target(self) -> int:
        """`target` of a `test` or `jump` (the compiler sets it on both: missing is a compiler bug)."""
        if self.target is None:
            raise ValueError(f"the {self.op} instruction of step {self.step_id!r} has no target")
        return self.target


def compile_program(definition: WorkflowDefinition) -> list[Instruction]:
    program: list[Instruction] = []
    _emit(list(definition.steps), program)
    return program


def _emit(steps: list[Any], program: list[Instruction]) -> None:
    for step in steps:
        if isinstance(step, BranchStep):
            test_at = len(program)
            program.append(Instruction(op="test", step_id=step.id))
            _emit(step.then, program)
            if step.otherwise:
                jump_at = len(program)
                program.append(Instruction(op="jump", step_id=step.id))
                program[test_at] = Instruction(op="test", step_id=step.id, target=len(program))
                _emit(step.otherwise, program)
                program[jump_at] = Instruction(op="jump", step_id=step.id, target=len(program))
            else:
                program[test_at] = Instruction(op="test", step_id=step.id, target=len(program))
        elif isinstance(step, ParallelStep):
            program.append(Instruction(op="parallel", step_id=step.id))
            if step.merge is not None:
                program.append(Instruction(op=step.merge.kind, step_id=step.merge.id))
        else:
            program.append(Instruction(op=step.kind, step_id=step.id))
