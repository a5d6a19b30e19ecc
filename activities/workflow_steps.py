"""Workflow activities for the steps that need no child run: functions, branch tests, delays, signals."""

from __future__ import annotations

import inspect
import logging
import uuid
from datetime import datetime

from agent_runs.finishing import closed_as
from durable_steps import activity
from workflow_runtime.conditions import evaluate, monitor_facts
from workflow_runtime.contracts import DelayRecord, SignalFound, SignalProbe, SignalRecord, StepRequest, StepResult
from workflow_runtime.definition import BranchStep, DelayStep, FunctionStep, MonitorStep, SignalStep, StepData
from workflow_runtime.journal import WorkflowContext
from workflow_runtime.references import resolve

log = logging.getLogger("workflow")


@activity()
async def workflow_call_function(request: StepRequest) -> StepResult:
    ctx = WorkflowContext.for_ref(request.ref)
    step = ctx.definition.step(request.step_id)
    if not isinstance(step, FunctionStep | MonitorStep) or step.function is None:
        raise TypeError(f"step {request.step_id!r} has no function")
    function = step.function
    record = await ctx.record()  # the read `data` makes anyway
    ended = closed_as(record)  # given up by its start after the orchestration's first read: its function never runs
    if ended is not None:
        return StepResult(step_id=request.step_id, status="ok", journaled=False, ended=ended)
    data = await ctx.data(request.refs, record)
    try:
        output = function(StepData(input=data["input"], steps=data["steps"]))
        if inspect.isawaitable(output):
            output = await output
        if not isinstance(output, dict):
            raise TypeError(f"a step function must return a dict, not {type(output).__name__}")
    except Exception as error:  # the function is user code: its failure is the step's failure, named
        correlation_id = uuid.uuid4().hex  # the exception's text goes to the log, not to clients
        log.warning("step %r of workflow run %s: its function raised (correlation id %s)", request.step_id,
                    request.ref.run_id, correlation_id, exc_info=True)
        message = f"its function raised {type(error).__name__} (correlation id {correlation_id})"
        await ctx.journal(request, step.kind, status="failed", error=message)
        return StepResult(step_id=request.step_id, status="failed", error=message)
    result = StepResult(step_id=request.step_id, status="ok")
    if isinstance(step, MonitorStep):
        output, result = await monitor_facts(ctx, request, step, output)
    await ctx.journal(request, step.kind, output=output)
    result.cancel_requested = await ctx.cancel_requested()
    return result


@activity()
async def workflow_evaluate(request: StepRequest) -> StepResult:
    ctx = WorkflowContext.for_ref(request.ref)
    step = ctx.definition.step_as(request.step_id, BranchStep)
    holds, problem = evaluate(step.when, await ctx.data(request.refs))
    await ctx.journal(request, "branch", output={"condition": holds, "took": "then" if holds else "otherwise",
                                                  "problem": problem})
    return StepResult(step_id=request.step_id, status="ok", condition=holds, journaled=False)


@activity()
async def workflow_record_delay(request: DelayRecord) -> StepResult:
    ctx = WorkflowContext.for_ref(request.ref)
    await ctx.journal(request, "delay", output={"until": request.until.isoformat()})
    return StepResult(step_id=request.step_id, status="ok", cancel_requested=await ctx.cancel_requested())


@activity()
async def workflow_resolve_time(request: StepRequest) -> datetime:
    """A delay's `until` reference, resolved and parsed (an ISO 8601 time with a zone)."""
    ctx = WorkflowContext.for_ref(request.ref)
    step = ctx.definition.step_as(request.step_id, DelayStep)
    if step.until is None:
        raise TypeError(f"step {request.step_id!r} waits a number of seconds, not until a time")
    moment = datetime.fromisoformat(str(resolve(step.until, await ctx.data(request.refs))))
    if moment.tzinfo is None:
        raise ValueError(f"'{step.until}' must carry a time zone (e.g. 2030-01-01T09:00:00Z)")
    return moment


@activity()
async def workflow_find_signal(probe: SignalProbe) -> SignalFound:
    """Whether signal `index` of a name is in the store (its event may have been dropped or may still be coming)."""
    ctx = WorkflowContext.for_ref(probe.ref)
    return SignalFound(found=await ctx.signal(probe.name, probe.index) is not None)


@activity()
async def workflow_record_signal(request: SignalRecord) -> StepResult:
    ctx = WorkflowContext.for_ref(request.ref)
    step = ctx.definition.step_as(request.step_id, SignalStep)
    if request.index is None:
        if step.on_timeout == "fail":
            error = f"no '{step.name}' signal within {step.timeout_seconds:g} s"
            await ctx.journal(request, "signal", status="failed", error=error)
            return StepResult(step_id=request.step_id, status="failed", error=error)
        await ctx.journal(request, "signal", output={"payload": None, "timed_out": True})
    else:
        signal = await ctx.signal(request.name, request.index)
        if signal is None:
            raise LookupError(f"signal {request.name!r} #{request.index} is not in the store")  # retried by Durable
        await ctx.journal(request, "signal", output={"payload": signal.payload, "timed_out": False,
                                                     "signal_id": signal.signal_id, "index": signal.index})
    return StepResult(step_id=request.step_id, status="ok", cancel_requested=await ctx.cancel_requested())
