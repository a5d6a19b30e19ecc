"""HTTP surface of the app: typed request/response models, handlers and RFC 9457 problem details.

Handlers here are host-agnostic functions over typed models; `function_app.py` only adapts Azure Functions
`HttpRequest`/`HttpResponse` to them (see `http_api.adapter`).
"""
