"""The line-count benchmark counts exactly the lines a traced thread executes while counting, charged to an owner."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from bench.lines_bench import LineCounter, rows


def three_lines() -> int:
    a = 1
    b = a + 1
    return a + b


def one_line() -> None:
    return None


def run_in_a_new_thread(counter: LineCounter, counting: bool, target: Callable[[], object] = three_lines) -> None:
    with counter.tracing_new_threads():
        thread = threading.Thread(target=target)
        counter.counting = counting  # (the flag itself, not `counted()`: that block's own exit would be counted too)
        thread.start()
        thread.join()
        counter.counting = False


def test_a_new_thread_is_counted_line_by_line_while_counting() -> None:
    counter, baseline = LineCounter(), LineCounter()
    run_in_a_new_thread(counter, counting=True)
    run_in_a_new_thread(baseline, counting=True, target=one_line)
    # The same thread's own frames (threading's) either way; three_lines is a call and three lines, one_line a call
    # and one line (all charged to "other": no owner's path).
    assert set(counter.lines) == {"other"}
    assert counter.lines["other"] - baseline.lines["other"] == 2


def test_nothing_is_counted_while_counting_is_off() -> None:
    counter = LineCounter()
    run_in_a_new_thread(counter, counting=False)
    assert counter.lines == Counter()


def test_this_thread_is_counted_the_same() -> None:
    counter = LineCounter()
    with counter.tracing_this_thread():
        counter.counting = True
        three_lines()
        counter.counting = False
    assert counter.lines == Counter({"other": 4})


def test_rows_give_lines_per_turn_by_owner_and_what_durability_adds() -> None:
    durable = Counter({"Durable SDK": 600, "model client (openai SDK, httpx)": 300})
    in_process = Counter({"model client (openai SDK, httpx)": 290, "app: other": 100})
    assert rows(durable, in_process, 2) == [
        ["Durable SDK", 300, 0], ["model client (openai SDK, httpx)", 150, 145], ["app: other", 0, 50],
        ["all", 450, 195], ["added by durability", 255, ""],
    ]
