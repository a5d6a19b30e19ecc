"""An app whose helper module reads a setting at import time (local.settings.json or the environment)."""

import app_settings
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="greeting", methods=["GET"])
def greeting(req: func.HttpRequest) -> str:
    return app_settings.GREETING
