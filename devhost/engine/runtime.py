"""The engine runtime: scheduler loop, commits (one SQLite transaction each, memory updated only after COMMIT),
idle tracking and fault injection. Episodes, activities, entities and management operations live in their own
modules and use the primitives here.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from devhost.app_loader import FunctionIndex, FunctionInfo
from devhost.engine.activities import ActivityRunner
from devhost.engine.clock import Clock, VirtualClock
from devhost.engine.entities import EntityProcessor
from devhost.engine.episodes import EpisodeProcessor
from devhost.engine.errors import EngineClosedError, SimulatedCrash
from devhost.engine.management import Management
from devhost.engine.models import EngineOptions, RuntimeStatus
from devhost.engine.state import Inbox, Instance, completion_id
from devhost.engine.store import EntityRow, InboxMessage, Store, Transaction, WorkItem
from devhost.execution import FunctionExecutor, InProcessExecutor
from devhost.invoke import install_sdk_caches
from devhost.protocol.events import event_text
from devhost.protocol.timefmt import from_epoch, to_epoch

log = logging.getLogger("devhost.engine")
_DISPATCH_SLICE_SECONDS = 0.02


class Commit:
    """The writes of one transaction plus the in-memory effects to apply once it is committed."""

    def __init__(self, tx: Transaction) -> None:
        self.tx = tx
        self.messages: list[InboxMessage] = []
        self.work: list[WorkItem] = []
        self.changed: set[str] = set()

    def send(self, instance_id: str, execution_id: str | None, event: dict[str, Any],
             visible_at: float | None = None) -> None:
        text = event_text(event)
        message_id = self.tx.add_message(instance_id, execution_id, text, visible_at)
        self.messages.append(InboxMessage(message_id, instance_id, execution_id, event, visible_at, text))

    def schedule_activity(self, instance_id: str, execution_id: str, task_id: int, name: str,
                          input_text: str | None) -> None:
        work_id = self.tx.add_work(instance_id, execution_id, task_id, name, input_text)
        self.work.append(WorkItem(work_id, instance_id, execution_id, task_id, name, input_text))


_TERMINAL = {s for s in RuntimeStatus if s.is_terminal}


def _time_out(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


class _CommitScope:
    """`EngineRuntime.commit`'s scope (a class, not a generator context manager: 12 commits per turn)."""

    __slots__ = ("pending", "rt", "step")

    def __init__(self, rt: EngineRuntime, step: str | None) -> None:
        self.rt = rt
        self.step = step

    def __enter__(self) -> Commit:
        self.rt.ensure_open()
        self.pending = Commit(self.rt.store.begin())
        return self.pending

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        rt, store = self.rt, self.rt.store
        if exc_type is not None:  # nothing of it is written; the exception goes on
            store.rollback()
            return
        if self.step:
            try:
                rt._maybe_crash(f"{self.step}_before_commit")
            except BaseException:
                store.rollback()
                raise
        store.commit()
        if self.step:
            rt._maybe_crash(f"{self.step}_after_commit")
        rt._apply(self.pending)


class EngineRuntime(Management):
    def __init__(self, index: FunctionIndex, state_path: str, clock: Clock, options: EngineOptions,
                 functions: FunctionExecutor | None = None) -> None:
        self.index = index
        self.state_path = state_path
        self.clock = clock
        self.options = options
        self.store = Store(state_path)
        self.instances: dict[str, Instance] = {}
        self.entities: dict[str, EntityRow] = {}
        self.inbox = Inbox()
        self.ready: dict[str, None] = {}
        self.running: set[str] = set()
        self.crashed = False
        self.closed = False
        self.stopping = False  # stop() drains: what runs finishes and commits, nothing new starts
        self.random = random.Random(options.faults.seed)
        self._crash_hits: dict[str, int] = {}
        if isinstance(functions, InProcessExecutor):
            # One Python worker: its one sync thread pool runs activities, entity batches and orchestrators alike.
            self.executor: Executor = functions.executor
        else:
            threads = options.worker_threads or options.max_concurrent_activities + options.max_concurrent_entities
            self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="devhost-worker")
        # Activities run wherever the host says (worker processes); by default on this loop and `executor`.
        self.functions: FunctionExecutor = functions or InProcessExecutor(index.app_dir, executor=self.executor)
        # The `durableClient` binding JSON for activities that take one (set by the host once it listens).
        self.client_binding: Callable[[], str] | None = None
        # Set by a host that will set the binding: work resumed when the engine opens (before the host listens)
        # waits for it, as on Azure, where every invocation carries the binding (`client_binding_for`).
        self.client_binding_set: asyncio.Event | None = None
        self.episodes = EpisodeProcessor(self)
        self.activities = ActivityRunner(self)
        self.entity_processor = EntityProcessor(self)
        self._status_waiters: dict[str, list[tuple[set[RuntimeStatus], asyncio.Future[None]]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._unsubscribe_clock: Any = None
        self._pass_pending = False  # a scheduler pass is queued on the loop
        self._timer: asyncio.TimerHandle | None = None  # wakes the scheduler at the next due message (real clock)
        self._timer_due: float | None = None

    # ----- lifecycle -----

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        install_sdk_caches()
        self._idle = asyncio.Event()
        loaded = self.store.load()
        resumed = loaded.latest_moment()
        if isinstance(self.clock, VirtualClock) and resumed is not None:
            # Durable time never goes back over a restart (nor does a real clock): a virtual clock goes on from the
            # latest moment the state recorded, so new events follow the history's and timers keep their distance.
            self.clock.advance_to(from_epoch(resumed))
        for row in loaded.instances:
            self.instances[row.instance_id] = Instance(row)
        for entity in loaded.entities:
            self.entities[entity.entity_id] = entity
        now = self.now_epoch()
        for message in loaded.inbox:
            if self.inbox.add(message, now):
                self.ready[message.instance_id] = None
        if isinstance(self.clock, VirtualClock):
            self._unsubscribe_clock = self.clock.subscribe(self._wake_threadsafe)
        self._wake()
        for work in loaded.work:  # in flight when the previous process stopped: run again (at-least-once)
            self.activities.start(work)

    async def stop(self) -> None:
        if self.closed or self.stopping:
            return
        # Drain as the Functions host and DTFx do on a graceful shutdown: user code in flight finishes and its result
        # is committed; nothing new starts. (`closed` was set first, so every result of the grace period was dropped
        # and the restarted host ran those activities and episodes again.)
        self.stopping = True
        self._disarm_timer()
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=5.0)
        self.closed = True
        for task in [t for t in self._tasks if not t.done()]:
            task.cancel()
        self._shutdown()

    def _shutdown(self) -> None:
        self._disarm_timer()
        if self._unsubscribe_clock:
            self._unsubscribe_clock()
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.store.close()
        self._idle.set()
        for waiters in self._status_waiters.values():
            for _, fut in waiters:
                if not fut.done():
                    fut.set_exception(EngineClosedError("engine closed"))
        self._status_waiters.clear()

    def die(self, reason: BaseException) -> None:
        """Fault injection killed the engine: stop everything without committing anything more."""
        if self.crashed:
            return
        log.warning("devhost engine stopped by %r", reason)
        self.crashed = True
        self.closed = True
        for task in self._tasks:
            task.cancel()
        self._wake()
        self._shutdown()

    def ensure_open(self) -> None:
        if self.closed:
            raise EngineClosedError("the engine is closed" + (" (simulated crash)" if self.crashed else ""))

    # ----- time and wake-ups -----

    def now_epoch(self) -> float:
        return to_epoch(self.clock.now())

    def _wake(self) -> None:
        """Something changed (a commit, a task ended, time moved): a scheduler pass follows."""
        self._idle.clear()
        if not self._pass_pending and not self.closed:
            self._pass_pending = True
            # One more loop turn before the pass: completions already queued by worker threads commit first, so an
            # episode gets them as one batch (fewer replays of a long history).
            self.loop.call_soon(self.loop.call_soon, self._pass)

    def _wake_threadsafe(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._wake)

    def redeliver_later(self, messages: list[InboxMessage], visible_at: float) -> None:
        """Messages of an aborted episode or entity batch back to the inbox, visible at `visible_at`. No commit
        follows to wake the scheduler, and only a pass arms the real clock's wake-up for a message that is not due
        yet: without the wake here the redelivery waited for whatever woke the engine next (an unrelated call_http
        could hold it for 100 s)."""
        now = self.now_epoch()
        for message in messages:
            self.inbox.add(replace(message, visible_at=visible_at), now)
        self._wake()

    def mark_ready(self, instance_id: str) -> None:
        self.ready[instance_id] = None
        self._wake()

    def spawn(self, coroutine: Any, name: str) -> None:
        task = self.loop.create_task(coroutine, name=name)
        self._tasks.add(task)
        self._idle.clear()
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and isinstance(task.exception(), SimulatedCrash):
            self.die(task.exception())  # type: ignore[arg-type]
        elif not task.cancelled() and task.exception() is not None:
            log.error("devhost engine task failed", exc_info=task.exception())
        if not self._tasks or self.ready:  # the engine may be idle now, or an instance waits for the others to end
            self._wake()

    # ----- commits -----

    async def client_binding_for(self, function: FunctionInfo) -> str | None:
        if function.durable_client_param is None:
            return None
        if self.client_binding is None and self.client_binding_set is not None:
            await self.client_binding_set.wait()  # the host is about to listen (it opened the engine first)
        return None if self.client_binding is None else self.client_binding()

    def commit(self, step: str | None = None) -> _CommitScope:
        """One transaction (`with rt.commit() as commit:`); its in-memory effects apply once it is committed. Fault
        injection may "kill the process" before or after COMMIT at named steps."""
        return _CommitScope(self, step)

    def _maybe_crash(self, point: str) -> None:
        faults = self.options.faults
        if point not in faults.crash_at:
            return
        hits = self._crash_hits.get(point, 0) + 1
        self._crash_hits[point] = hits
        if hits == faults.crash_after:
            raise SimulatedCrash(f"simulated crash at {point}")

    def _apply(self, pending: Commit) -> None:
        now = None  # (read only for a message that is not visible at once: a timer, a retry)
        needs_pass = False
        for message in pending.messages:
            if message.visible_at is not None and now is None:
                now = self.now_epoch()
            if not self.inbox.add(message, now or 0.0):
                needs_pass = True  # (the pass sets the wake-up for it)
                continue
            self.ready[message.instance_id] = None
            needs_pass = not self._started_at_once(message) or needs_pass
        for work in pending.work:
            if not self.stopping:  # (stored: it runs after the restart)
                self.activities.start(work)
        for instance_id in pending.changed:
            self._notify_status(instance_id)
        if needs_pass:
            self._wake()

    def _started_at_once(self, message: InboxMessage) -> bool:
        """Start the episode for a completion at once, without the scheduler pass, when it completes the only task
        its orchestration still waits for: nothing else can arrive that a later episode start would batch with it
        (the pass waits a loop turn for that, ee87daf). Everything else goes through the pass."""
        instance_id = message.instance_id
        instance = self.instances.get(instance_id)
        state = instance.replay_state if instance is not None else None
        task_id = completion_id(message.event)
        if state is None or task_id is None or not state.waits_only_for(task_id):
            return False
        if instance_id in self.running or self._held_for_batching(instance_id) or self.closed or self.stopping:
            return False
        del self.ready[instance_id]
        self.episodes.start(instance_id)
        return True

    # ----- status waiters -----

    def _notify_status(self, instance_id: str) -> None:
        waiters = self._status_waiters.get(instance_id)
        instance = self.instances.get(instance_id)
        if not waiters or instance is None:
            return
        remaining = []
        for statuses, fut in waiters:
            if instance.status in statuses:
                if not fut.done():
                    fut.set_result(None)
            else:
                remaining.append((statuses, fut))
        if remaining:
            self._status_waiters[instance_id] = remaining
        else:
            del self._status_waiters[instance_id]

    def add_status_waiter(self, instance_id: str, statuses: set[RuntimeStatus]) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = self.loop.create_future()
        self._status_waiters.setdefault(instance_id, []).append((statuses, fut))
        self._notify_status(instance_id)
        return fut

    # ----- the scheduler -----
    # Passes run as loop callbacks when `_wake` asks (commits, ended tasks, clock moves, the due-message timer), not
    # as a task that sleeps and polls: an idle engine costs nothing, a busy one a callback per change.

    def _pass(self) -> None:
        self._pass_pending = False
        if self.closed or self.stopping:
            return
        try:
            if self.inbox.timers:
                for instance_id in self.inbox.release_due(self.now_epoch()):
                    self.ready[instance_id] = None
            dispatched, cut_short = self._dispatch()
            if cut_short:
                self._wake()  # the rest after the others had their turn
            elif not dispatched and self._is_idle():
                if self._auto_skip():
                    self._wake()
                    return
                self._idle.set()
            self._arm_timer()
        except SimulatedCrash as crash:
            self.die(crash)

    def _arm_timer(self) -> None:
        """A wake-up at the next due message (timers, retries); a virtual clock wakes the engine when it moves."""
        due = self.inbox.next_due()
        if due == self._timer_due or self.clock.is_virtual:
            return
        self._disarm_timer()
        if due is not None:
            self._timer = self.loop.call_later(max(due - self.now_epoch(), 0.0), self._on_timer)
            self._timer_due = due

    def _on_timer(self) -> None:
        self._timer = self._timer_due = None
        self._wake()

    def _disarm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_due = None

    def _dispatch(self) -> tuple[bool, bool]:
        """Start work for ready instances; yields back to the loop after a time slice so HTTP stays responsive.
        Returns (whether it started anything, whether the time slice cut it short)."""
        dispatched = False
        budget_end = self.loop.time() + _DISPATCH_SLICE_SECONDS
        for instance_id in list(self.ready):
            if dispatched and self.loop.time() > budget_end:
                return True, True
            if instance_id in self.running:
                continue
            if self._held_for_batching(instance_id):
                continue
            del self.ready[instance_id]
            if not self.inbox.count(instance_id):
                continue
            dispatched = True
            if instance_id.startswith("@"):
                self.entity_processor.start(instance_id)
            else:
                self.episodes.start(instance_id)  # `running` until done: episodes of one instance never overlap
        return dispatched, False

    def _held_for_batching(self, instance_id: str) -> bool:
        """Fault injection: hold completions until `batch_completions` are queued or nothing else is running."""
        batch = self.options.faults.batch_completions
        if batch <= 1 or instance_id.startswith("@"):
            return False
        return self.inbox.count(instance_id) < batch and bool(self._tasks)

    def _is_idle(self) -> bool:
        return not self._tasks and not any(
            i not in self.running and self.inbox.count(i) for i in self.ready
        )

    def _auto_skip(self) -> bool:
        clock = self.clock
        due = self.inbox.next_due()
        if isinstance(clock, VirtualClock) and clock.auto_skip and due is not None:
            clock.advance_to(from_epoch(due))
            return True
        return False

    async def run_until_idle(self, timeout: float, skip_timers: bool) -> None:
        deadline = self.loop.time() + timeout
        while True:
            self.ensure_open()
            self._wake()
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                raise TimeoutError(f"engine not idle after {timeout} s")
            await asyncio.wait_for(self._idle.wait(), remaining)
            self.ensure_open()
            due, clock = self.inbox.next_due(), self.clock
            if skip_timers and due is not None and isinstance(clock, VirtualClock):
                clock.advance_to(from_epoch(due))
                continue
            return

    async def wait_for_status(self, instance_id: str, statuses: set[RuntimeStatus] | None,
                              timeout: float) -> Any:
        fut = self.add_status_waiter(instance_id, statuses or _TERMINAL)
        # (a timer on the waiter itself: asyncio.wait_for wraps it in a task-like waiter of its own)
        timer = None if fut.done() else self.loop.call_later(timeout, _time_out, fut)
        try:
            await fut
        finally:  # a timed-out waiter must not linger until the instance happens to reach that status
            if timer is not None:
                timer.cancel()
            remaining = [w for w in self._status_waiters.get(instance_id, []) if w[1] is not fut]
            if remaining:
                self._status_waiters[instance_id] = remaining
            else:
                self._status_waiters.pop(instance_id, None)
        return await self.get_status(instance_id, False, False, True)
