"""A Ctrl-C that Python drops is raised again at the next safe point (`testbed.interrupts`).

Python raises KeyboardInterrupt in whatever the main thread runs when SIGINT arrives;
raised inside a gc callback (JAX registers one) it is dropped. CI saw it: an sbi
training went on after Ctrl-C (tests/test_ctrl_c.py, stop 63). Here the interrupt is
dropped on purpose, by raising SIGINT inside a gc callback, and each long wait of the main
thread must raise it: an sbi training's next epoch, a wait for a JAX computation.
"""

from __future__ import annotations

import contextlib
import gc
import signal
import threading
from collections.abc import Iterator

import pytest

from testbed.interrupts import recorded_interrupts, safe_point
from testbed.waiting import waited


@contextlib.contextmanager
def default_sigint() -> Iterator[None]:
    """SIGINT at Python's default handler, as in a command (a test worker may differ)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def drop_a_ctrl_c() -> None:
    """A Ctrl-C that lands in a gc callback: its KeyboardInterrupt is dropped there."""

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            gc.callbacks.remove(callback)
            signal.raise_signal(signal.SIGINT)

    gc.callbacks.append(callback)
    gc.collect()


def reached(steps) -> list[str]:
    """The names of `steps` run before a KeyboardInterrupt (inside `recorded_interrupts`)."""
    done: list[str] = []
    with default_sigint():
        try:
            with recorded_interrupts():
                for name, step in steps:
                    step()
                    done.append(name)
        except KeyboardInterrupt:
            done.append("interrupted")
    return done


def test_a_dropped_ctrl_c_is_dropped_and_then_raised_by_the_block_end():
    """The premise: the gc callback drops it; only the block's end raises it."""
    assert reached([("dropped", drop_a_ctrl_c), ("after", lambda: None)]) == [
        "dropped", "after", "interrupted"]  # fmt: skip


def test_a_safe_point_raises_a_dropped_ctrl_c_once():
    assert reached([("dropped", drop_a_ctrl_c), ("safe point", safe_point)]) == [
        "dropped", "interrupted"]  # fmt: skip
    assert reached([("safe point", safe_point)]) == ["safe point"]  # nothing recorded


def test_a_safe_point_outside_the_recorder_or_the_main_thread_does_nothing():
    safe_point()
    with default_sigint(), recorded_interrupts() as interrupts:
        interrupts.pending = True
        thread = threading.Thread(target=safe_point)
        thread.start()
        thread.join()
        assert interrupts.pending  # left for the main thread
        interrupts.pending = False


def test_an_sbi_training_stops_at_the_epoch_after_a_dropped_ctrl_c():
    from agents.sbi_progress import TrainingProgress

    progress = TrainingProgress("npe on two_moons", 1000, mode="off")
    steps = [("dropped", drop_a_ctrl_c), ("epoch 1", lambda: progress.on_epoch(1, 0.5))]
    assert reached(steps) == ["dropped", "interrupted"]


def test_a_wait_for_native_work_stops_after_a_dropped_ctrl_c():
    """`waited` looks for it while the work runs (here 60 s; the test takes one look)."""
    release = threading.Event()
    steps = [("dropped", drop_a_ctrl_c), ("waited", lambda: waited(lambda: release.wait(60)))]
    try:
        assert reached(steps) == ["dropped", "interrupted"]
    finally:
        release.set()


@pytest.mark.parametrize("outcome", ["returns", "raises"])
def test_a_wait_without_an_interrupt_gives_the_work_s_outcome(outcome):
    def work() -> int:
        if outcome == "raises":
            raise ValueError("the work's own error")
        return 7

    with default_sigint(), recorded_interrupts():
        if outcome == "returns":
            assert waited(work) == 7
        else:
            with pytest.raises(ValueError, match="own error"):
                waited(work)
