"""Checkpoints of an sbi training, so that an interrupted sweep resumes it where it stopped.

A 10,000-simulation NRE training can run for an hour; a sweep stopped during it (a preempted
machine, Ctrl-C, a time limit) would start it again from epoch 0. With a checkpoint
directory set (`testbed.checkpoints`; a sweep with a results store sets
`<results>.checkpoints`), a one-round training saves its state at most every
`CHECKPOINT_SECONDS` and when it ends; a later run of the same agent config on the same task
and budget loads it and continues with sbi's `resume_training`, or, when the saved training
had ended, trains no further. The state saved is everything sbi's training loop reads
(network, optimizer, epoch counters, best weights, the train/validation split) and torch's
random state, so a resumed training ends with the same weights as an uninterrupted one. A
checkpoint of other simulations (their digest differs), of another sbi version, or that
cannot be read is set aside (`*.unused`, said on the training's progress) and the training
starts afresh; a checkpoint that cannot be written is said and the training goes on. A
resumed training's predictive carries the seconds it trained before
(`earlier_train_seconds`), which `train_seconds` then includes.

Only one-round (amortized) trainings are checkpointed: a sequential round's simulations
come from the previous round's posterior, which a checkpoint would also have to hold.
Checkpoints are pickles: load only those your own runs wrote.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from testbed.checkpoints import set_aside, write_atomically

log = logging.getLogger("testbed.progress")

CHECKPOINT_SECONDS = 60.0  # at most one checkpoint a minute while a training runs
FORMAT = 1
# what sbi's training loop reads back when it resumes (besides the network and optimizer)
_LOOP_STATE = (
    "epoch",
    "_val_loss",
    "_best_val_loss",
    "_epochs_since_last_improvement",
    "_best_model_state_dict",
    "train_indices",
    "val_indices",
    "_summary",
)


def data_digest(inference: Any) -> str:
    """A digest of the simulations appended to `inference` (all rounds)."""
    theta, x, _ = inference.get_simulations(0)
    h = hashlib.sha256()
    for t in (theta, x):
        h.update(str(tuple(t.shape)).encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


class TrainingCheckpoint:
    """Saves and restores one sbi training's state at `path` (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        every: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], None] | None = None,
    ):
        self.path, self.clock = Path(path), clock
        self.say = say or log.info  # where a resumed or set-aside checkpoint is said
        self.every = CHECKPOINT_SECONDS if every is None else float(every)
        self._saved_at = clock()
        self._digest: str | None = None
        self._began = clock()  # when this process's part of the training began
        self.earlier_seconds = 0.0  # the training's seconds in the runs it resumes

    def restore(self, inference: Any) -> bool:
        """Loads the saved state into `inference` (its simulations appended); True when it
        did, False when there is none or it does not fit (set aside, and said)."""
        import sbi
        import torch

        self._began = self.clock()
        self._digest = data_digest(inference)
        if not self.path.exists():
            return False
        try:
            state = torch.load(self.path, weights_only=False)
            reason = self._mismatch(state, sbi.__version__)
        except Exception as exc:  # a truncated or foreign file
            reason = f"cannot be read ({type(exc).__name__}: {exc})"
        if reason is not None:
            self.say(f"training checkpoint {self.path} {reason}; training from the start")
            self._set_aside()
            return False
        random = torch.get_rng_state()
        try:
            net = state["net"]
            optimizer = torch.optim.Adam(list(net.parameters()))
            optimizer.load_state_dict(state["optimizer"])
            loop = {name: state["loop"][name] for name in _LOOP_STATE}
            rng, epoch = state["rng"], int(loop["epoch"])
            ended = " (it had ended)" if state["finished"] else ""
            earlier = float(state["seconds"])
            torch.set_rng_state(rng)  # a bad state raises here, before anything is applied
        except Exception as exc:  # written by a testbed that saved other things
            torch.set_rng_state(random)
            self.say(
                f"training checkpoint {self.path} does not fit ({exc}); training from the start"
            )
            self._set_aside()
            return False
        inference._neural_net, inference.optimizer = net, optimizer
        for name, value in loop.items():
            setattr(inference, name, value)
        self.earlier_seconds = earlier
        self.say(f"training resumed from {self.path} at epoch {epoch}{ended}")
        return True

    def _mismatch(self, state: Any, sbi_version: str) -> str | None:
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            return "is not a checkpoint of this version of testbed"
        if state.get("sbi") != sbi_version:
            return f"was written by sbi {state.get('sbi')} (this is sbi {sbi_version})"
        if state.get("data") != self._digest:
            return "holds a training on other simulations"
        return None

    def save(self, inference: Any, finished: bool = False) -> None:
        """Writes the training's state atomically (a crash mid-write leaves the previous
        checkpoint); a failure to write is said, never raised."""
        import sbi
        import torch

        state = {
            "format": FORMAT,
            "sbi": sbi.__version__,
            "data": self._digest,
            "finished": finished,
            "net": inference._neural_net,
            "optimizer": inference.optimizer.state_dict(),
            "loop": {name: getattr(inference, name) for name in _LOOP_STATE},
            "rng": torch.get_rng_state(),
            "seconds": self.earlier_seconds + self.clock() - self._began,
        }
        failed = write_atomically(self.path, lambda f: torch.save(state, f))
        if failed is not None:
            self.say(f"training checkpoint {self.path} not written ({failed}); training goes on")
        self._saved_at = self.clock()

    def on_epoch(self, inference: Any) -> None:
        """After each epoch: a checkpoint when `every` seconds passed since the last."""
        if self.clock() - self._saved_at >= self.every:
            self.save(inference)

    def _set_aside(self) -> None:
        set_aside(self.path)


@contextlib.contextmanager
def resumable(inference: Any, checkpoint: TrainingCheckpoint | None) -> Iterator[None]:
    """Within: `inference.train(...)` resumes from `checkpoint` when it holds this training
    (after the simulations are appended), saves it after epochs (`on_epoch`) and when it
    ends. sbi's loop calls `_maybe_show_progress` once per epoch, after the epoch counter
    moves on: the state there is the state the next epoch starts from."""
    if checkpoint is None:
        yield
        return
    train, show = inference.train, inference._maybe_show_progress

    def resumed_train(*args: Any, **kwargs: Any):
        if checkpoint.restore(inference):
            kwargs["resume_training"] = True
        out = train(*args, **kwargs)
        checkpoint.save(inference, finished=True)
        return out

    def shown(show_bars: bool, epoch: int) -> None:
        show(show_bars, epoch)
        checkpoint.on_epoch(inference)

    inference.train, inference._maybe_show_progress = resumed_train, shown
    try:
        yield
    finally:
        del inference.train, inference._maybe_show_progress  # the class's own again
