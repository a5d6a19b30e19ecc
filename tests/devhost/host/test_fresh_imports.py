"""InProcessHost re-imports the app's modules for each host, even when a test imported their parent package."""

from __future__ import annotations

import sys
from pathlib import Path

from devhost.testing import InProcessHost

APP_SOURCE = '''
import azure.functions as func
from settings_pkg import reader

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="value", methods=["GET"])
def value(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(reader.VALUE)
'''


def test_each_host_sees_its_own_settings_even_if_the_parent_package_stays_imported(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text(APP_SOURCE)
    package = tmp_path / "settings_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "reader.py").write_text("import os\nVALUE = os.environ['APP_VALUE']\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import settings_pkg  # a test holding the parent package, as test modules often do

        with InProcessHost(tmp_path, env={"APP_VALUE": "first"}) as host:
            assert host.client.get("/api/value").text == "first"
        with InProcessHost(tmp_path, env={"APP_VALUE": "second"}) as host:
            assert host.client.get("/api/value").text == "second"
        assert "settings_pkg" in sys.modules and sys.modules["settings_pkg"] is settings_pkg
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == "settings_pkg" or n.startswith("settings_pkg.")]:
            del sys.modules[name]
