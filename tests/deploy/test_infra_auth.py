"""The Bicep ties the app's auth settings to the platform: `authMode=easyauth` switches App Service Authentication on
(without it the app refuses to start: nothing would strip forged principal headers), `authMode` takes only the modes
the app knows, and the anonymous opt-in reaches the app as `ALLOW_ANONYMOUS_ON_AZURE`.

The Bicep compiler cannot run here (`make check-infra` is checkov over the same text), so this reads the templates."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agent_runs.deployment import ALLOW_ANONYMOUS_SETTING, AUTH_MODES

INFRA = Path(__file__).resolve().parents[2] / "infra"


def _text(name: str) -> str:
    return (INFRA / name).read_text()


def test_easyauth_switches_app_service_authentication_on() -> None:
    app = _text("app.bicep")
    condition = re.search(r"^module appAuth 'modules/appauth\.bicep' = if \((?P<cond>[^)]*)\)", app, re.M)
    assert condition is not None, "the App Service Authentication module is deployed conditionally"
    variable = condition.group("cond").strip()
    defined = re.search(rf"^var {re.escape(variable)} = (?P<expr>.+)$", app, re.M)
    expression = defined.group("expr") if defined else variable
    assert "authMode == 'easyauth'" in expression and re.search(r"\|\|", expression), expression
    auth = _text("modules/appauth.bicep")
    assert re.search(r"platform:\s*\{\s*enabled:\s*true\s*\}", auth)  # what makes Azure set WEBSITE_AUTH_ENABLED


def test_auth_mode_allows_only_the_modes_the_app_knows() -> None:
    main = _text("main.bicep")
    declared = r"@allowed\(\[(?P<values>[^\]]*)\]\)\s*(?:@description\([^\n]*\)\s*)?param authMode string"
    allowed = re.search(declared, main)
    assert allowed is not None
    assert tuple(re.findall(r"'([^']*)'", allowed.group("values"))) == AUTH_MODES


def test_the_anonymous_opt_in_is_a_parameter_reaching_the_app_setting() -> None:
    parameters = json.loads(_text("main.parameters.json"))["parameters"]
    assert parameters["allowAnonymous"]["value"] == f"${{{ALLOW_ANONYMOUS_SETTING}=false}}"
    assert re.search(r"^param allowAnonymous bool = false$", _text("main.bicep"), re.M)
    assert re.search(r"^\s*allowAnonymous: allowAnonymous$", _text("main.bicep"), re.M)
    assert f"{{ name: '{ALLOW_ANONYMOUS_SETTING}', value: string(allowAnonymous) }}" in _text("app.bicep")


def test_app_service_authentication_lets_unauthenticated_requests_reach_the_app() -> None:
    """The platform validates tokens and sign-ins and strips forged principal headers; the app refuses every route
    that needs a caller (`tests/auth/test_auth_identity.py` sweeps the route table). Requiring authentication at the
    platform refused the app's public routes too: the page and signed decision links answered 401 before they could
    send anyone to sign in, and Slack's signed button clicks never arrived."""
    auth = _text("modules/appauth.bicep")
    validation = re.search(r"globalValidation:\s*\{(?P<body>[^}]*)\}", auth)
    assert validation is not None
    assert re.search(r"requireAuthentication:\s*false", validation.group("body"))
    assert re.search(r"unauthenticatedClientAction:\s*'AllowAnonymous'", validation.group("body"))
    assert "excludedPaths" not in validation.group("body")  # nothing to exclude: the app decides per route
