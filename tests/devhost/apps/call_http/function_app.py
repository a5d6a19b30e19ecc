"""call_http: the built-in HTTP activity; the orchestrator follows 202 + Location itself (Python sees the 202)."""

from datetime import timedelta

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.orchestration_trigger(context_name="context")
def fetch(context: df.DurableOrchestrationContext):
    response = yield context.call_http("POST", context.get_input(), content={"q": 1})
    while response["statusCode"] == 202:
        headers = {k.lower(): v for k, v in response["headers"].items()}
        yield context.create_timer(context.current_utc_datetime + timedelta(seconds=5))
        response = yield context.call_http("GET", headers["location"][0])
    return {"status": response["statusCode"], "content": response["content"]}
