"""App settings whose names are configuration, not code: an MCP server's `url_setting`, `header_settings` and
`env_settings` name the settings that hold its URL and secrets. No settings class can declare a name it does not
know, so they are read here: the one place outside the settings classes that reads the environment (the test
`tests/deploy/test_code_rules.py` holds every other module to that)."""

from __future__ import annotations

import os


def named_setting(name: str) -> str | None:
    """The value of the app setting `name` (Functions app settings and `local.settings.json` `Values` are
    environment variables), or None when it is not set."""
    return os.environ.get(name)
