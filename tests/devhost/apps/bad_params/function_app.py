"""An app Azure's Python worker refuses to index: an activity declares a parameter no binding provides."""

import azure.durable_functions as df

app = df.DFApp()


@app.activity_trigger(input_name="name")
def greet(name: str, greeting: str) -> str:
    return f"{greeting} {name}"
