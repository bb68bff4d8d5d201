"""Checkpoints of a long `train_many` run (`testbed.metrics.mlp`), so an interrupted one
resumes at the epochs its models had reached.

A batch of MLPs can train for hours: local-HPD's 1,100 null regressions on a 100-d x fit
labels that carry no signal, so each runs until its training loss stalls. With a
checkpoint directory set (`testbed.checkpoints`; a sweep or a reproduction with a results
store sets `<results>.checkpoints`), `train_many` writes every model's training state
(parameters, Adam's moments, best score, stopping counters, epoch counts) at most every
`CHECKPOINT_SECONDS`, the first time only after that long, so short trainings write
nothing. A later call on the same inputs (a digest of the data, rows, settings, seeds and
key names the file) loads it and trains only the models that had not stopped. Each model's
shuffles follow its own epoch counter, so it ends where an uninterrupted run ends (up to
float rounding: its chunk-mates differ). The file is removed when the training ends. A
file written by another version of testbed or jax, or one that cannot be read, is set
aside (`*.unused`) and said; a failure to write is said and the training goes on. Files
are numpy archives, not pickles.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from testbed.metrics.mlp_chunks import TrainState

log = logging.getLogger("testbed.progress")

CHECKPOINT_SECONDS = 300.0  # at most one checkpoint every five minutes of training


def training_digest(*parts) -> str:
    """A digest of what decides a training: arrays by dtype, shape and bytes, the rest by
    repr (lists of arrays, e.g. each model's rows, element by element)."""
    h = hashlib.sha256()

    def add(part) -> None:
        if isinstance(part, np.ndarray):
            h.update(f"{part.dtype}{part.shape}".encode())
            h.update(np.ascontiguousarray(part).tobytes())
        elif isinstance(part, list | tuple) and any(isinstance(p, np.ndarray) for p in part):
            h.update(f"seq{len(part)}".encode())
            for p in part:
                add(np.asarray(p))
        else:
            h.update(repr(part).encode())

    for part in parts:
        add(part)
    return h.hexdigest()


def _versions() -> str:
    import jax

    from testbed.version import __version__

    return f"testbed {__version__}, jax {jax.__version__}"


class EpochCheckpoint:
    """Saves and restores the state of one `train_many` run at `path` (module docstring)."""

    def __init__(self, path: Path, every: float | None = None):
        self.path, self.clock, self.say = Path(path), time.monotonic, log.info
        self.every = CHECKPOINT_SECONDS if every is None else float(every)
        self._saved_at = self.clock()

    def load(self, fresh: TrainState) -> TrainState:
        """The saved state when there is one of this training (same shapes and versions),
        else `fresh`; a file that does not fit is set aside and said."""
        if not self.path.exists():
            return fresh
        try:
            with np.load(self.path, allow_pickle=False) as saved:
                versions = str(saved["versions"])
                state = TrainState(*(np.array(saved[name]) for name in TrainState._fields))
            reason = None
            if versions != _versions():
                reason = f"was written by {versions} (this is {_versions()})"
            elif any(a.shape != b.shape or a.dtype != b.dtype for a, b in zip(state, fresh)):
                reason = "holds models of other shapes"
        except Exception as exc:  # truncated, foreign, or missing a field
            reason = f"cannot be read ({type(exc).__name__}: {exc})"
        if reason is not None:
            self.say(f"MLP training checkpoint {self.path} {reason}; training from the start")
            self._set_aside()
            return fresh
        done = int(np.sum(~state.active))
        self.say(
            f"MLP training resumed from {self.path}: {done} of {len(state.active)} models "
            f"had stopped, the rest at epochs {int(state.n_iter.min())}-{int(state.n_iter.max())}"
        )
        return state

    def due(self) -> bool:
        return self.clock() - self._saved_at >= self.every

    def save(self, state: TrainState) -> None:
        """Writes `state` atomically (a crash mid-write leaves the previous file); a failure
        to write is said, never raised."""
        from testbed.checkpoints import write_atomically

        arrays = {name: np.asarray(a) for name, a in zip(TrainState._fields, state)}
        failed = write_atomically(self.path, lambda f: np.savez(f, versions=_versions(), **arrays))
        if failed is not None:
            self.say(
                f"MLP training checkpoint {self.path} not written ({failed}); training goes on"
            )
        self._saved_at = self.clock()

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _set_aside(self) -> None:
        from testbed.checkpoints import set_aside

        set_aside(self.path)


def for_training(parts: Sequence) -> EpochCheckpoint | None:
    """The checkpoint of the training `parts` decide, in the checkpoint directory in force
    (`testbed.checkpoints.checkpoint_dir`), or None when there is none."""
    from testbed.checkpoints import checkpoint_dir

    directory = checkpoint_dir()
    if directory is None:
        return None
    return EpochCheckpoint(directory / f"mlps-{training_digest(*parts)[:20]}.npz")
