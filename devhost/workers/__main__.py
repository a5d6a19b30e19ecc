"""`python -m devhost.workers`: one worker process (started by devhost, see devhost/workers/worker.py)."""

from devhost.workers.worker import main

main()
