"""devhost's engine store keeps its WAL file from staying at its largest size (`WAL_SIZE_LIMIT_BYTES`).

Its checkpoints run beside the commits, so under steady load the WAL grows between the moments SQLite can start it
again from the beginning; without a limit the file keeps the largest size it ever reached."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from devhost.engine.store import WAL_SIZE_LIMIT_BYTES, EntityRow, Store


def _write(store: Store, count: int, size: int) -> None:
    for i in range(count):
        with store.transaction() as tx:
            tx.put_entity(EntityRow(f"@e@{i}", "e", str(i), True, "x" * size, None))


def test_the_wal_file_is_cut_back_when_it_starts_again(tmp_path: Path) -> None:
    path = tmp_path / "engine.sqlite3"
    wal = Path(f"{path}-wal")
    store = Store(str(path))
    try:
        _write(store, 60, 100_000)  # ~6 MB of WAL, no checkpoint yet (one is asked for every 100 commits)
        grown = wal.stat().st_size
        assert grown > WAL_SIZE_LIMIT_BYTES
        other = sqlite3.connect(path)  # a checkpoint that copies everything back (no commit runs meanwhile)
        try:
            busy, logged, copied = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        finally:
            other.close()
        assert (busy, logged) == (0, copied)
        _write(store, 1, 10)  # the next commit starts the WAL again: the file is cut back
        assert wal.stat().st_size <= WAL_SIZE_LIMIT_BYTES < grown
    finally:
        store.close()
