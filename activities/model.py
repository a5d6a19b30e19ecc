"""`call_model`: one model call of a run (chat middleware, retries honouring Retry-After, the answer stored; while
it streams, the text so far is stored as a draft that pollers see as `partial_output`). An answer that ends the run's
loop also closes the run (`agent_runs.finishing.close_if_final`).

An attempt that fails after the provider reported its usage (billed, see `agent_runtime.spend`) keeps that usage on
the run record; the attempt that answers adds it to its turn, so the run's budget sees it, and a run that fails with
the call unanswered is closed with it (`agent_runs.failed_attempts`). Only a failing attempt writes it: a call that
succeeds costs the store nothing more."""

from __future__ import annotations

from agent_runs.budget import PAYLOAD_BUDGET_BYTES, payload_size
from agent_runs.context import StepContext, overrides_of
from agent_runs.contracts import ModelCallInput, ModelCallResult, StepFailure
from agent_runs.drafts import DraftWriter
from agent_runs.failed_attempts import keep_failed_attempt, new_attempt_id, with_failed_attempts
from agent_runs.finishing import close_if_final, ended_before
from agent_runs.sequence import SLOTS_PER_MODEL_CALL
from agent_runs.store_log import RunClosedError
from agent_runtime.conversation import model_message_id
from agent_runtime.loop_types import ModelTurn
from agent_runtime.messages import Usage
from agent_runtime.models.errors import ModelError
from agent_runtime.steps import ChatMiddlewareEnded, call_model_step
from durable_steps import activity
from telemetry.metrics import record_cost
from telemetry.model_client import TracedModelClient
from telemetry.spans import run_step


@activity(compact=True)
async def call_model(step: ModelCallInput) -> ModelCallResult:
    ctx = StepContext.for_run(step.run)
    record = await ctx.record()
    # An earlier attempt closed the run, or something else did before this call (a start that failed, answered as
    # such, whose orchestration the host started all the same; a stuck run reconciled): the model is not asked, and
    # the run ends as its record says (its session released, should that close have been cut short).
    closed = await ended_before(ctx, record)
    if closed is not None:
        return closed
    if record is None or record.cancel_requested_at is not None:
        # The cancel event may have been dropped at a continue-as-new boundary; the stored request is not. A run
        # whose record is gone (its session was deleted while its orchestration was being started) is over too.
        result: ModelTurn | StepFailure = StepFailure.cancelled()
    else:
        # A call abandoned by a cancel (hung past the grace period) must not store its answer or drafts once the run
        # has closed: a call in a closed run would never get its result (the provider then refuses the session).
        log = ctx.open_session_log(step.first_seq, SLOTS_PER_MODEL_CALL, record=record)
        agent = await ctx.run_agent()
        settings = ctx.services.run_settings
        drafts = (
            DraftWriter(
                log,
                step.run.run_id,
                step.command.iteration,
                author_name=agent.name,
                interval_seconds=settings.partial_output_interval_seconds,
                max_interval_seconds=settings.partial_output_max_interval_seconds,
                seq=step.first_seq,
            )
            if settings.stream_partial_output
            else None
        )
        client = TracedModelClient(
            ctx.services.model_client(),
            agent=agent.name,
            capture_content=ctx.services.telemetry_settings.capture_message_content,
        )
        request_model = agent.model or client.default_model

        def billed(usage: Usage) -> None:
            record_cost(agent=agent.name, request_model=request_model, usage=usage)

        try:
            with run_step(step.run.trace, step.run.run_id):  # the `chat` span is a child of the run's span
                result = await call_model_step(
                    agent,
                    client,
                    log,
                    step.run.run_id,
                    step.command,
                    on_update=drafts.on_update if drafts else None,
                    on_stream_end=drafts.finish if drafts else None,
                    prices=ctx.services.model_prices,
                    overrides=overrides_of(record),
                    on_billed=billed,
                )
            result = with_failed_attempts(result, record, step.command.iteration)
        except ModelError as error:
            if error.usage is not None:
                billed(error.usage)
            # Counted by the attempt that answers, or by the run's close if none does.
            await keep_failed_attempt(ctx, record, step.command.iteration, error.usage, new_attempt_id())
            if error.retryable:
                raise  # the activity's durable retry waits on a timer, holding no worker
            result = StepFailure(code=error.code or f"model_http_{error.status}", message=str(error))
        except ChatMiddlewareEnded as ended:  # the same middleware would decide the same again: no retry
            result = StepFailure(code=ended.code, message=ended.message)
        except RunClosedError:  # abandoned by a cancel: nobody waits for this answer any more
            result = StepFailure.cancelled()
    if payload_size(result) > PAYLOAD_BUDGET_BYTES:
        # The answer is stored already: failing the activity (as an output over budget does) would make Durable
        # retry it and call the model again.
        return StepFailure(code="payload_too_large", message="the model's answer is too large to hand back to the run")
    if isinstance(result, ModelTurn):
        # The answer's messages are "<run>:model:<iteration>:0", ":1", ... written in order: an earlier attempt that
        # wrote more than this one would have left the first id past this answer's.
        index = 0
        while model_message_id(step.run.run_id, step.command.iteration, index) in log.block_ids:
            index += 1
        await log.settle(probe_id=model_message_id(step.run.run_id, step.command.iteration, index))
        return await close_if_final(ctx, step, result, record=log.checked) or result
    return result
