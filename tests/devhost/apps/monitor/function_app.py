"""Monitor: an eternal orchestration that checks status on a timer and continues as new each round."""

from datetime import timedelta

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.orchestration_trigger(context_name="context")
def monitor(context: df.DurableOrchestrationContext):
    state = context.get_input() or {}
    rounds = state.get("round", 0)
    status = yield context.call_activity("check_job", rounds)
    if status == "done" or rounds >= state.get("max_rounds", 10):
        return {"rounds": rounds, "status": status}
    yield context.create_timer(context.current_utc_datetime + timedelta(minutes=30))
    context.continue_as_new({**state, "round": rounds + 1})
    return None


@app.activity_trigger(input_name="round")
def check_job(round: int) -> str:
    return "done" if round >= 3 else "running"
