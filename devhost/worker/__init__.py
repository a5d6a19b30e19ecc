"""Azure's Python worker, for real or its rules: the real-worker mode and the worker's indexing checks.

- `pool` / `channel` / `process` / `wire` / `rpc` / `convert`: devhost drives `azure-functions-runtime` (the library
  Azure's 3.13+ Python worker runs) in worker processes with the Functions host's messages (real-worker mode);
- `indexing`: the checks Azure's Python worker applies when it indexes an app, for the in-process mode (3.11/3.12).
"""
