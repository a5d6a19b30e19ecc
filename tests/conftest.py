"""Shared pytest configuration. Per-area fixtures live next to their tests."""

import os

# host.json names its task hub `%TASKHUB_NAME%` (an app setting, as on Azure): every host of the app that a test or
# its child processes start gets one, as a developer's local.settings.json would give it.
os.environ.setdefault("TASKHUB_NAME", "tests")
