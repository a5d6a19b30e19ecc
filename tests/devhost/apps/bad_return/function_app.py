"""An app Azure's Python worker refuses to index: `-> None` on a function whose `$return` is the http output."""

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="out")
@app.generic_output_binding(arg_name="res", type="http")
def named_output(req: func.HttpRequest, res: func.Out[func.HttpResponse]) -> None:
    res.set(func.HttpResponse("from out binding", status_code=202))
