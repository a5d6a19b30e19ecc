"""Read once at import time, like many apps' settings modules."""

import os

GREETING = os.environ["SETTINGS_APP_GREETING"]
