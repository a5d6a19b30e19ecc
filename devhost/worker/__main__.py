"""`python -m devhost.worker`: one real-worker process (started by devhost, see devhost/worker/process.py)."""

from devhost.worker.process import main

main()
