"""The engine's work per orchestration step, counted (never timed). SQLite: a change that adds a transaction, a
statement or a read of what the engine itself wrote to an episode's or an activity's hot path fails here. Replay: an
episode replays only the history events after the previous episode's, so its cost does not grow with the history.

The budgets are per commit kind: an episode is one transaction (its consumed messages, new history, the instance
row, the work it schedules); an activity result is one transaction (its result message, its work item deleted); the
start is one transaction (the instance row and its ExecutionStarted message). The history of a running instance is
kept in memory and appended to, so a run reads nothing back from SQLite.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from engine_helpers import OpenEngine, output

from devhost.engine import store
from devhost.engine.api import RuntimeStatus
from devhost.engine.runtime import EngineRuntime
from devhost.protocol import replay
from devhost.protocol.events import MESSAGE_TYPES, event_text

# statement kind -> count for `chaining` (3 activities in sequence): 1 start, 4 episodes, 3 activity results.
CHAINING_BUDGET = {
    "BEGIN": 8,  # one transaction per commit: start + 4 episodes + 3 activity results
    "COMMIT": 8,
    "INSERT INTO instances": 5,  # start + each episode (status, last update)
    "INSERT INTO history": 16,  # 4 episodes x 4 events (Orchestrator- Started, the message, the decision, -Completed)
    "INSERT INTO inbox": 4,  # ExecutionStarted + 3 TaskCompleted
    "DELETE FROM inbox": 4,  # each episode consumes its message
    "INSERT INTO work": 3,
    "DELETE FROM work": 3,
}


def _kind(sql: str) -> str:
    words = sql.split()
    if words[0] in ("BEGIN", "COMMIT", "ROLLBACK"):
        return words[0]
    if words[0] == "INSERT" and words[1] == "OR":  # INSERT OR REPLACE INTO t
        words = ["INSERT", *words[3:]]
    return " ".join(words[:3])


async def test_a_chained_run_costs_one_transaction_per_episode_and_per_activity(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    engine = await open_engine("chaining", state_path=str(tmp_path / "state.sqlite3"))
    statements: Counter[str] = Counter()
    engine._rt.store._db.set_trace_callback(lambda sql: statements.update([_kind(sql)]))
    instance_id = await engine.start_new("chaining", "budget-1", None)
    await engine.run_until_idle()
    engine._rt.store._db.set_trace_callback(None)
    status = await engine.get_status(instance_id)
    assert status is not None and status.runtime_status == RuntimeStatus.Completed
    assert output(status) == ["Hello Tokyo!", "Hello Seattle!", "Hello London!"]
    assert dict(statements) == CHAINING_BUDGET  # no SELECT: nothing the engine wrote is read back during a run


async def test_checkpoints_off_the_commit_path_keep_every_commit_after_a_reopen(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """Hundreds of commits (more than one checkpoint's worth), then a close without waiting: all of it reads back."""
    state = str(tmp_path / "state.sqlite3")
    engine = await open_engine("chaining", state_path=state)
    ids = [await engine.start_new("chaining", f"run-{n}", None) for n in range(40)]  # 40 x 8 commits
    await engine.run_until_idle()
    assert engine._rt.store._db.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    await engine.close()
    reopened = await open_engine("chaining", state_path=state)
    for instance_id in ids:
        status = await reopened.get_status(instance_id, show_history=True)
        assert status is not None and status.runtime_status == RuntimeStatus.Completed
        assert output(status) == ["Hello Tokyo!", "Hello Seattle!", "Hello London!"]
        assert json.loads(json.dumps(status.to_json()["historyEvents"]))[-1]["EventType"] == "ExecutionCompleted"


async def test_each_episode_replays_only_the_events_since_the_previous_one(
    open_engine: OpenEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "VERIFY_CONTINUED_REPLAY", False)  # (the check replays from scratch itself)
    applied: list[int] = []
    original = replay._Replayer._apply

    def counting(self: replay._Replayer, event: dict) -> None:
        applied.append(event["EventType"])
        original(self, event)

    monkeypatch.setattr(replay._Replayer, "_apply", counting)
    engine = await open_engine("chaining", state_path=str(tmp_path / "state.sqlite3"))
    await engine.start_new("chaining", "replay-1", None)
    await engine.run_until_idle()
    # 4 episodes; each replays its own OrchestratorStarted + message, and the previous one's decision +
    # OrchestratorCompleted: 2 + 3 x 4 events (a replay from scratch every episode would be 2 + 6 + 10 + 14 = 32).
    assert len(applied) == 14


async def test_after_a_restart_the_first_episode_replays_from_scratch(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """The continued replay is memory only: a reopened engine rebuilds it from the stored history (and the check
    against a replay from scratch, on in tests, holds for every episode after that)."""
    state = str(tmp_path / "state.sqlite3")
    first = await open_engine("human_interaction", state_path=state)
    instance_id = await first.start_new("approval", "restart-1", json.dumps(json.dumps({"timeout_s": 3600})))
    await first.run_until_idle()
    assert first._rt.instances[instance_id].replay_state is not None  # waiting: the replay is kept for the next
    await first.close()
    second = await open_engine("human_interaction", state_path=state)
    assert second._rt.instances[instance_id].replay_state is None
    await second.raise_event(instance_id, "Approval", json.dumps(True))
    await second.run_until_idle()
    status = await second.get_status(instance_id)
    assert status is not None and status.runtime_status == RuntimeStatus.Completed


async def test_a_chained_run_writes_few_pages_per_commit(
    open_engine: OpenEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WAL frames (a page each, checksummed and written) for the same 8 commits: each table a commit touches is one
    b-tree (instances and history keyed by their primary key, no key index; no sqlite_sequence). The first layout
    wrote 50 for these commits."""
    monkeypatch.setattr(store, "CHECKPOINT_EVERY_COMMITS", 10**9)  # the WAL only grows meanwhile
    state = tmp_path / "state.sqlite3"
    engine = await open_engine("chaining", state_path=str(state))
    await engine.start_new("chaining", "warm-up", None)
    await engine.run_until_idle()
    wal = Path(f"{state}-wal")
    before = wal.stat().st_size
    await engine.start_new("chaining", "budget-2", None)
    await engine.run_until_idle()
    frames = (wal.stat().st_size - before) // (4096 + 24)
    # start 2 (instance, message), 3 episodes x 4 (message, work, history, instance), the last episode 3, 3 activity
    # results x 2 (message, work), and the pages that record the file's growth
    assert frames <= 26


async def test_a_state_file_of_the_first_layout_still_runs_and_resumes(open_engine: OpenEngine, tmp_path: Path) -> None:
    """A state file created by an earlier devhost (rowid tables, key indexes, AUTOINCREMENT) keeps its tables."""
    state = tmp_path / "state.sqlite3"
    db = sqlite3.connect(state)
    db.executescript(FIRST_LAYOUT)
    db.close()
    engine = await open_engine("chaining", state_path=str(state))
    first = await engine.start_new("chaining", "first", None)
    await engine.run_until_idle()
    await engine.start_new("chaining", "second", None)  # stopped before it runs: its message waits in the inbox
    await engine.close()
    reopened = await open_engine("chaining", state_path=str(state))
    await reopened.run_until_idle()
    for instance_id in (first, "second"):
        status = await reopened.get_status(instance_id)
        assert status is not None and output(status) == ["Hello Tokyo!", "Hello Seattle!", "Hello London!"]
    layout = sqlite3.connect(state)
    try:
        assert layout.execute("SELECT count(*) FROM sqlite_master WHERE name='sqlite_sequence'").fetchone() == (1,)
    finally:
        layout.close()


FIRST_LAYOUT = """
CREATE TABLE instances (
    instance_id TEXT PRIMARY KEY, name TEXT NOT NULL, version TEXT, execution_id TEXT NOT NULL,
    status TEXT NOT NULL, input TEXT, output TEXT, custom_status TEXT,
    created REAL NOT NULL, updated REAL NOT NULL, parent TEXT
);
CREATE TABLE history (
    instance_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, PRIMARY KEY (instance_id, seq)
);
CREATE TABLE inbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT NOT NULL, execution_id TEXT,
    event TEXT NOT NULL, visible_at REAL
);
CREATE INDEX inbox_instance ON inbox (instance_id);
CREATE TABLE work (
    id INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT NOT NULL, execution_id TEXT NOT NULL,
    task_id INTEGER NOT NULL, name TEXT NOT NULL, input TEXT
);
CREATE TABLE entities (
    entity_id TEXT PRIMARY KEY, name TEXT NOT NULL, key TEXT NOT NULL, exists_ INTEGER NOT NULL,
    state TEXT, last_op REAL
);
"""


async def test_the_history_sent_and_stored_is_the_events_encoded(open_engine: OpenEngine, tmp_path: Path) -> None:
    """Message texts are encoded once (when stored) and reused for the trigger and the history: the texts are still
    exactly the events', before and after a reopen."""
    state = str(tmp_path / "state.sqlite3")
    engine = await open_engine("chaining", state_path=state)
    instance_id = await engine.start_new("chaining", "texts", None)
    await engine.run_until_idle()
    instance = engine._rt.instances[instance_id]
    engine._rt.episodes.ensure_history(instance)
    history, texts = instance.history or [], instance.history_texts or []
    assert [t == event_text(e) for e, t in zip(history, texts, strict=True)] == [True] * len(history)
    assert all(e["IsPlayed"] for e in history if e["EventType"] in MESSAGE_TYPES)
    await engine.close()
    reopened = await open_engine("chaining", state_path=state)
    stored = reopened._rt.store.load_history(instance_id)
    assert stored == texts


async def test_a_completion_that_ends_all_waiting_starts_its_episode_without_a_scheduler_pass(
    open_engine: OpenEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain waits for one task at a time: its result starts the next episode at once. A fan-out's results go
    through the scheduler pass, which waits a loop turn so that results arriving together make one episode."""
    passes: list[int] = []
    original = EngineRuntime._pass

    def counting(self: EngineRuntime) -> None:
        passes.append(1)
        original(self)

    monkeypatch.setattr(EngineRuntime, "_pass", counting)
    engine = await open_engine("chaining")
    instance_id = await engine.start_new("chaining", "quick-1", None)
    await engine.run_until_idle()
    status = await engine.get_status(instance_id)
    assert status is not None and output(status) == ["Hello Tokyo!", "Hello Seattle!", "Hello London!"]
    assert len(passes) <= 3  # the start, and idle at the end (one pass per episode without the shortcut: >= 5)


def test_an_orchestration_waits_only_for_a_task_when_no_other_is_open() -> None:
    state = _replay_state(open_ids=[3])
    assert state.waits_only_for(3) and not state.waits_only_for(4)
    assert not _replay_state(open_ids=[3, 4]).waits_only_for(3)  # a fan-out: more results may come with it
    assert _replay_state(open_ids=[]).waits_only_for(3)  # a duplicate delivery: nothing left to wait for


def _replay_state(open_ids: list[int]) -> replay.ReplayState:
    state = replay.ReplayState(replay._Replayer.__new__(replay._Replayer), 0)
    state.replayer.open = {i: replay._Future() for i in open_ids}
    return state
