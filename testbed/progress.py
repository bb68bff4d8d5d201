"""What long work says while it runs: a status line on a terminal, a log line every ~10 s
elsewhere, all through the `testbed.progress` logger.

`activity(label)` marks a stretch of work (a training, a scoring, a sweep). While it runs,
the innermost activity speaks for all that enclose it ("mlp on classification_2d/75 ·
training (20 s)"): on a terminal (a `StatusLine` handler, which the `testbed` command
installs) one line rewritten in place; elsewhere an INFO record every `INTERVAL` seconds.
A more specific reporter (sbi's epochs) calls `said()`, and the heartbeat then keeps quiet.
Nothing is said unless logging shows INFO for `testbed.progress` (the command line does;
`--quiet` and library users' default logging do not), and `TESTBED_PROGRESS=off` silences
it; `lines` gives log lines even on a terminal.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping

from testbed import settings

log = logging.getLogger("testbed.progress")
MODES = settings.PROGRESS_MODES
INTERVAL = 10.0  # seconds between log lines off a terminal
TICK = 0.25  # seconds between redraws of a terminal's status line
DETAIL_HOLD = 1.0  # a terminal heartbeat waits this long after a more specific report

_lock = threading.Lock()
_stack: list[_Activity] = []  # open activities, outermost first
_last_detail = [-float("inf")]  # monotonic time of the last specific report (`said`)
_held = [0]  # > 0: activities keep quiet (e.g. under a sweep's progress bar)


def progress_mode(environ: Mapping[str, str] | None = None) -> str:
    """`TESTBED_PROGRESS` checked: auto, lines or off (of `environ` when given, else of the
    settings in force)."""
    chosen = settings.current() if environ is None else settings.Settings.from_env(environ)
    return chosen.progress


def listening() -> bool:
    """Whether progress would show: logging takes INFO from `testbed.progress` somewhere
    and TESTBED_PROGRESS is not off."""
    return log.isEnabledFor(logging.INFO) and log.hasHandlers() and progress_mode() != "off"


def status_line() -> StatusLine | None:
    """The terminal status line handler that `testbed.progress` records reach, if any."""
    logger: logging.Logger | None = log
    while logger is not None:
        for handler in logger.handlers:
            if isinstance(handler, StatusLine):
                return handler
        logger = logger.parent if logger.propagate else None
    return None


def said() -> None:
    """A more specific reporter (e.g. an sbi training's epochs) just spoke: the heartbeat
    of the enclosing activities waits."""
    _last_detail[0] = time.monotonic()


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Activities opened inside keep quiet (a progress bar already speaks for them)."""
    _held[0] += 1
    try:
        yield
    finally:
        _held[0] -= 1


@contextlib.contextmanager
def kept() -> Iterator[None]:
    """The open activities as they were on entering, whatever happens inside.

    Work stopped by a time limit while an activity of its cleans up (the alarm lands in
    the activity's `finally`) leaves that activity open: every later line of the process
    would carry its label, and its heartbeat would speak on. Put back, the stale activity
    is no longer innermost and its heartbeat stays quiet."""
    with _lock:
        before = list(_stack)
    try:
        yield
    finally:
        with _lock:
            _stack[:] = before


class _Activity:
    def __init__(self, label: str | Callable[[], str], timed: bool):
        self.label, self.timed = label, timed
        self.start = time.monotonic()

    def text(self) -> str:
        text = self.label() if callable(self.label) else self.label
        return f"{text} ({time.monotonic() - self.start:.0f} s)" if self.timed else text


@contextlib.contextmanager
def activity(
    label: str | Callable[[], str], *, timed: bool = True, interval: float | None = None
) -> Iterator[None]:
    """Work that may take long: while it runs, it (with the activities around it) is said
    every `interval` seconds off a terminal, and kept on the status line on one.

    `label`: its text, or a function giving the text at each report; `timed` appends the
    seconds it has run; `interval` defaults to INTERVAL.
    """
    interval = INTERVAL if interval is None else interval
    me = _Activity(label, timed)
    with _lock:
        _stack.append(me)
    stop = threading.Event()
    thread = None
    terminal = status_line() is not None and progress_mode() == "auto"
    if listening() and not _held[0]:
        tick = TICK if terminal else interval
        hold = DETAIL_HOLD if terminal else interval
        thread = threading.Thread(
            target=_heartbeat, args=(me, stop, tick, hold, terminal), daemon=True
        )
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        with _lock:
            _stack.remove(me)
        if timed:
            log.debug("%s: %.1f s", me.text().rsplit(" (", 1)[0], time.monotonic() - me.start)
        line = status_line() if terminal else None
        if line is not None:
            line.clear()


def _heartbeat(me: _Activity, stop: threading.Event, tick: float, hold: float, terminal: bool):
    while not stop.wait(tick):
        with _lock:
            if not _stack or _stack[-1] is not me:  # an inner activity speaks for us all
                continue
            chain = list(_stack)
        if time.monotonic() - _last_detail[0] < hold or _held[0]:
            continue
        log.info(" · ".join(a.text() for a in chain), extra={"status": terminal})


def fit(text: str, width: int) -> str:
    """`text` in `width` characters: cut in the middle, keeping its start (what runs) and
    its end (the innermost activity: an epoch, a loss), which an end cut would lose."""
    if len(text) <= width:
        return text
    first = text.find(" · ")  # the outermost activity whole, when it takes under half
    head = first if 0 < first <= width // 2 else width // 3
    return text[:head] + " …" + text[len(text) - (width - head - 2) :]


class StatusLine(logging.Handler):
    """For a terminal: records marked `status` rewrite one line in place (stderr); any
    other record clears that line and is printed as a line of its own."""

    def __init__(self, stream=None):
        super().__init__()
        self._stream, self._width = stream, 0

    @property
    def stream(self):
        return sys.stderr if self._stream is None else self._stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            if getattr(record, "status", False):  # one line: cut to the terminal's width
                text = fit(text, max(20, shutil.get_terminal_size().columns - 1))
                self.stream.write("\r" + text.ljust(self._width))
                self._width = len(text)
            else:
                self.clear()
                self.stream.write(text + "\n")
            self.stream.flush()
        except Exception:
            self.handleError(record)

    def clear(self) -> None:
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
