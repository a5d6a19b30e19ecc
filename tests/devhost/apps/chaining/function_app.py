"""Function chaining: three activities in sequence (the classic Durable sample)."""

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.orchestration_trigger(context_name="context")
def chaining(context: df.DurableOrchestrationContext):
    results = []
    for city in ("Tokyo", "Seattle", "London"):
        results.append((yield context.call_activity("say_hello", city)))
    return results


@app.activity_trigger(input_name="city")
def say_hello(city: str) -> str:
    return f"Hello {city}!"
