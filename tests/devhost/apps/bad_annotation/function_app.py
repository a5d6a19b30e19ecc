"""An app Azure's Python worker refuses to index: the HTTP trigger's parameter is annotated `int`."""

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="ok")
def ok(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("ok")


@app.route(route="bad")
def bad(req: int) -> func.HttpResponse:
    return func.HttpResponse(str(req))
