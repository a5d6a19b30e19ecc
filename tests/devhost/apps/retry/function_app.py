"""Retries: a flaky activity that succeeds on the 3rd attempt and one that always fails (caught)."""

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)
attempts: dict[str, int] = {}


@app.orchestration_trigger(context_name="context")
def retry_orch(context: df.DurableOrchestrationContext):
    fast = df.RetryOptions(first_retry_interval_in_milliseconds=1000, max_number_of_attempts=3)
    flaky = yield context.call_activity_with_retry("flaky", fast, {"key": context.instance_id, "fail_times": 2})
    try:
        yield context.call_activity_with_retry("always_fails", df.RetryOptions(500, 2), "x")
        caught = None
    except Exception as exc:
        caught = str(exc).split(" \n ")[0]
    return {"flaky": flaky, "caught": caught}


@app.activity_trigger(input_name="payload")
def flaky(payload: dict) -> str:
    key = payload["key"]
    attempts[key] = attempts.get(key, 0) + 1
    if attempts[key] <= payload["fail_times"]:
        raise ValueError(f"transient failure #{attempts[key]}")
    return f"ok after {attempts[key]} attempts"


@app.activity_trigger(input_name="x")
def always_fails(x: str) -> str:
    raise RuntimeError(f"permanent failure ({x})")
