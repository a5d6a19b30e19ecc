"""`python -m devhost`: see devhost/cli.py."""

import sys

from devhost.cli import main

sys.exit(main())
