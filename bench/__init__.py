"""Benchmarks with recorded results (`python -m bench` lists them; `python -m bench NAME` runs one).

Each benchmark prints its figures and appends a section to `bench/RESULTS.md` (machine, date, command). They are
never run by the test suite.
"""

import os

# host.json names its task hub `%TASKHUB_NAME%`: the app hosts a benchmark starts (and their child processes) get one.
os.environ.setdefault("TASKHUB_NAME", "bench")
