"""An app with host.json routePrefix "v1" and a function without an explicit route."""

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(methods=["GET"])
def ping(req: func.HttpRequest) -> str:
    return "pong"
