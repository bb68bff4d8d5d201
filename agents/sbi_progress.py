"""Progress of an sbi agent's training: round, epochs, validation loss, simulations used.

sbi prints its epoch counter to stdout and raises warnings; `TrainingProgress` takes both
(`capture`) and says them through one channel: on a terminal, one status line rewritten in
place (stderr); elsewhere (a log file, a sweep's worker), a plain log line on the
`testbed.progress` logger at most every `interval` seconds, and at each round's end. Under
the `testbed` command on a terminal, the command's status line (`testbed.progress`) is that
line: the training is its innermost activity, so one writer draws it.
`TESTBED_PROGRESS` = `auto` (default), `lines` (log lines even on a terminal) or `off`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from testbed.interrupts import safe_point
from testbed.progress import (
    INTERVAL,
    MODES,
    activity,
    listening,
    log,
    progress_mode,
    said,
    status_line,
)

__all__ = ["INTERVAL", "MODES", "TrainingProgress", "progress_mode", "quiet_sampling"]
EPOCH = re.compile(r"Epochs trained:\s*(\d+)")


class TrainingProgress:
    """What one training says while it runs (see the module docstring)."""

    def __init__(
        self,
        name: str,
        budget: int,
        *,
        stream: TextIO | None = None,
        mode: str | None = None,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        seen: set[str] | None = None,
    ):
        self.name, self.budget = name, int(budget)
        self._to_logging = stream is None  # a given stream takes the lines itself
        self.stream = sys.stderr if stream is None else stream
        mode = progress_mode() if mode is None else mode
        tty = mode == "auto" and getattr(self.stream, "isatty", lambda: False)()
        self.mode = "off" if mode == "off" else ("terminal" if tty else "lines")
        if mode == "auto" and self.mode == "lines" and self._to_logging and not listening():
            # a script or notebook that did not ask for progress (no logging, no terminal):
            # nothing is said, and sbi's warnings stay Python warnings (`warn`)
            self.mode = "library"
        self.interval, self.clock = interval, clock
        self.start = self._said = clock()
        self.round, self.rounds, self.simulations = 0, 1, 0
        self.epoch: int | None = None
        self.loss: float | None = None
        self._seen: set[str] = set() if seen is None else seen  # messages said already
        self._width = 0
        self._last = ""
        # the command's terminal status line, if any: it draws our status (see capture)
        on_line = self.mode == "terminal" and self._to_logging
        self._status_line = status_line() if on_line else None

    def detail(self) -> str:
        """Round, epoch, validation loss and simulations used, e.g. 'round 1/1, epoch 74,
        validation loss 0.1, 1000/1000 simulations'."""
        parts = [f"round {self.round}/{self.rounds}"]
        if self.epoch is not None:
            parts.append(f"epoch {self.epoch}")
        if self.loss is not None:
            parts.append(f"validation loss {self.loss:.4g}")
        parts.append(f"{self.simulations}/{self.budget} simulations")
        return ", ".join(parts)

    def status(self) -> str:
        return f"{self.name}: {self.detail()} ({self.clock() - self.start:.0f} s)"

    def begin_round(self, r: int, rounds: int, simulations: int) -> None:
        """Round `r` (1-based) of `rounds` starts with `simulations` used so far."""
        self.round, self.rounds, self.simulations = r, rounds, simulations
        self.epoch = self.loss = None
        self._show(force=True)

    def end_round(self, simulations: int) -> None:
        self.simulations = simulations
        self._show(force=True)

    def on_epoch(self, epoch: int, loss: float | None) -> None:
        """An epoch ended: said, and a safe point for a Ctrl-C that Python dropped."""
        self.epoch, self.loss = epoch, loss
        self._show()
        safe_point()

    def say(self, text: str) -> None:
        """A message of sbi's (a print or a warning), said once per distinct text."""
        text = " ".join(text.split())
        if not text or text in self._seen or self.mode in ("off", "library"):
            return
        self._seen.add(text)
        self._clear()
        self._line(f"{self.name}: {text}")

    def warn(self, caught: warnings.WarningMessage, deprecation: bool = False) -> None:
        """A warning sbi (or torch) raised: said once (`say`), at DEBUG when it is a
        `deprecation` inside a library; where nobody listens, raised again as a Python
        warning (the user's warning filters decide)."""
        text = f"{caught.category.__name__}: {caught.message}"
        if deprecation:
            log.debug("%s: %s", self.name, " ".join(text.split()))
        elif self.mode == "library":
            warnings.warn_explicit(
                caught.message, caught.category, caught.filename, caught.lineno or 0
            )
        else:
            self.say(text)

    def close(self) -> None:
        self._clear()

    def _show(self, force: bool = False) -> None:
        if self.mode in ("off", "library") or self._status_line is not None:
            return  # nothing to say, or the command's status line draws `detail`
        said()  # the heartbeat of the enclosing activity (testbed.progress) waits
        now = self.clock()
        if self.mode == "terminal":
            if force or now - self._said >= 0.2:
                line = self.status()
                self.stream.write("\r" + line.ljust(self._width))
                self.stream.flush()
                self._width, self._said = len(line), now
        elif force or now - self._said >= self.interval:
            line = self.status()
            if line != self._last:  # a round's end right after a timed line: said once
                self._line(line)
            self._said, self._last = now, line

    def _line(self, text: str) -> None:
        """A log line: through `testbed.progress` where logging shows INFO (the `testbed`
        command), else on the stream with a time stamp (a worker has no logging set up)."""
        if self._to_logging and log.isEnabledFor(logging.INFO) and log.hasHandlers():
            log.info("%s", text)
        else:
            self.stream.write(f"{time.strftime('%H:%M:%S')} {text}\n")
            self.stream.flush()

    def _clear(self) -> None:
        if self.mode == "terminal" and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    @contextlib.contextmanager
    def capture(self, inference: Any = None) -> Iterator[None]:
        """sbi's prints (its epoch counter: with the validation loss read from
        `inference`) and warnings go to this progress, not raw to the terminal."""
        writer = _SbiOutput(self, inference)
        caught: list[warnings.WarningMessage] = []
        drawn = self._status_line is not None  # one writer: the command's status line
        try:
            with (
                activity(self.detail, timed=False) if drawn else contextlib.nullcontext(),
                warnings.catch_warnings(record=True) as recorded,
                contextlib.redirect_stdout(writer),
            ):
                warnings.simplefilter("always")
                try:
                    yield
                finally:
                    writer.flush_text()
                    caught = list(recorded)
        finally:  # outside the recording: a warning raised again is not recorded again
            for w in caught:
                self.warn(w, deprecation=_deprecation(w))


_SAID: set[str] = set()  # warnings said by `quiet_sampling` in this process


@contextlib.contextmanager
def quiet_sampling(name: str = "sbi sampling") -> Iterator[None]:
    """Warnings raised while sampling an sbi posterior are said once per process as one
    log line each, not printed raw at every call; deprecations inside torch and nflows
    (nothing a user can act on) only at DEBUG (`-v`)."""
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as recorded:
            warnings.simplefilter("always")
            try:
                yield
            finally:
                caught = list(recorded)
    finally:  # outside the recording: a warning raised again is not recorded again
        progress = TrainingProgress(name, 0, seen=_SAID)
        for w in caught:
            progress.warn(w, deprecation=_deprecation(w))


def _deprecation(caught: warnings.WarningMessage) -> bool:
    """A deprecation inside torch, nflows or sbi (of an argument we pass, or of their own
    internals): nothing a user can act on."""
    return "deprecated" in str(caught.message).lower()


class _SbiOutput(io.TextIOBase):
    """A stdout for sbi: epoch counters become `on_epoch`, other text `say`."""

    def __init__(self, progress: TrainingProgress, inference: Any):
        self.progress, self.inference = progress, inference
        self._text = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._text += text
        pieces = re.split(r"[\r\n]", self._text)
        self._text = pieces.pop()  # an unfinished piece waits for more
        for piece in pieces:
            self._piece(piece)
        found = EPOCH.search(self._text)  # sbi ends its counter with no newline
        if found and self._text.rstrip().endswith(found.group(1)):
            self._piece(self._text)
            self._text = ""
        return len(text)

    def flush_text(self) -> None:
        if self._text.strip():
            self._piece(self._text)
        self._text = ""

    def _piece(self, piece: str) -> None:
        found = EPOCH.search(piece)
        if found:
            self.progress.on_epoch(int(found.group(1)), self._loss())
        elif piece.strip():
            self.progress.say(piece)

    def _loss(self) -> float | None:
        """The last epoch's validation loss (sbi keeps it as `_val_loss`)."""
        try:
            return float(self.inference._val_loss)
        except (AttributeError, TypeError, ValueError):
            return None
