"""The training state of many MLPs trained together (`testbed.metrics.mlp`) and the
scheduler that runs their chunks epoch after epoch on whichever core is free."""

from __future__ import annotations

import dataclasses
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any, NamedTuple

import jax
import numpy as np

from testbed.cores import thread_budget


class ModelData(NamedTuple):
    """Each model's data (leading model axis): labels [M, N], its training rows padded to
    whole batches [M, R] with their count, its shuffle word, its validation rows."""

    y: Any
    rows: Any
    n_train: Any
    words: Any
    val_rows: Any
    n_val: Any


class TrainState(NamedTuple):
    """Each model's training state (leading model axis): flat parameters [M, P], Adam's
    moments and step count, the best score and parameters so far, the stopping counters."""

    params: Any
    m: Any
    v: Any
    t: Any
    best: Any
    best_params: Any
    no_improve: Any
    active: Any
    n_iter: Any
    loss: Any

    @classmethod
    def start(cls, flat: np.ndarray, early_stopping: bool) -> TrainState:
        """The host state of models starting from flat parameters [M, P]."""
        n = flat.shape[0]
        return cls(
            params=flat,
            m=np.zeros_like(flat),
            v=np.zeros_like(flat),
            t=np.zeros(n, np.float32),
            best=np.full(n, -np.inf if early_stopping else np.inf, np.float32),
            best_params=flat.copy(),
            no_improve=np.zeros(n, np.int32),
            active=np.ones(n, bool),
            n_iter=np.zeros(n, np.int32),
            loss=np.full(n, np.nan, np.float32),
        )


@dataclasses.dataclass
class Chunk:
    """Models trained together by one compiled epoch: their ids (the real ones: a last
    chunk is padded with frozen copies), device state and data, and their inputs."""

    ids: np.ndarray
    state: TrainState
    data: ModelData
    x: Any


class ChunkScheduler:
    """Runs chunks epoch after epoch, each on whichever core is free (no barrier between
    epochs: models carry their own epoch counters). A chunk in which a model stopped is
    taken apart: its state goes back to the host (`out`, updated in place) and its models
    still training wait as `loose` until they fill a chunk, or a core would otherwise idle
    (then in small chunks, to pad little). XLA runs one CPU computation on about one core,
    so independent chunks in threads use them all. Only the models `out` has active train
    (a resumed run's). With a `checkpoint` (`testbed.metrics.mlp_checkpoint`), every model's
    state is gathered on the host and saved whenever it is due: the chunks running finish
    their epoch first, so each model is saved between two of its epochs."""

    def __init__(
        self, epoch, out: TrainState, data: ModelData, x, x_host, chunk: int, checkpoint=None
    ):
        self.epoch, self.out, self.data, self.x, self.x_host = epoch, out, data, x, x_host
        n_models = len(out.n_iter)
        self.chunk = chunk
        # many models: the last few stragglers move to chunks of a quarter size (a second
        # compiled size), so they neither wait in a chunk of padding nor leave a core idle
        self.small = max(1, chunk // 4) if n_models >= 4 * chunk else chunk
        self.n_active = int(np.sum(out.active))
        self.workers = thread_budget()
        self.checkpoint = checkpoint

    def size_for(self, n_active: int) -> int:
        return self.chunk if n_active > self.chunk else self.small

    def make_chunks(self, ids: np.ndarray, size: int) -> list[Chunk]:
        """Chunks of `size` models from the host state of `ids`."""
        chunks = []
        for start in range(0, len(ids), size):
            real = ids[start : start + size]
            # pad the last chunk with copies of its first model, frozen (inactive)
            pick = np.concatenate([real, np.full(size - len(real), real[0])])
            state = TrainState(*(a[pick] for a in self.out))
            state.active[len(real) :] = False
            data = jax.device_put(ModelData(*(a[pick] for a in self.data)))
            x = self.x if self.x.ndim == 2 else jax.device_put(self.x_host[pick])
            chunks.append(Chunk(real, jax.device_put(state), data, x))
        return chunks

    def advance(self, c: Chunk) -> Chunk:
        """One epoch of one chunk, finished before returning (chunks run in threads)."""
        state = jax.block_until_ready(self.epoch(c.state, c.data, c.x))
        return Chunk(c.ids, state, c.data, c.x)

    def to_host(self, c: Chunk) -> None:
        """The state of `c`'s real models written back to the host (`out`)."""
        for host, device in zip(self.out, c.state):
            host[c.ids] = np.asarray(device)[: len(c.ids)]

    def collect(self, c: Chunk, pending: deque, loose: list) -> None:
        """A chunk after its epoch: on again when all its models train, else taken apart
        (its state to the host, its models still training to `loose`)."""
        active = np.asarray(c.state.active)[: len(c.ids)]
        if active.all():
            pending.append(c)
            return
        self.to_host(c)
        self.n_active -= int((~active).sum())
        if active.any():
            loose.append(c.ids[active])

    def run(self) -> None:
        ids = np.flatnonzero(self.out.active)
        pending = deque(self.make_chunks(ids, self.size_for(len(ids))) if len(ids) else [])
        loose: list[np.ndarray] = []
        running: set = set()
        with ThreadPoolExecutor(self.workers) as pool:
            while pending or running or loose:
                if loose:  # full chunks only, unless a core would idle (padding costs compute)
                    ids, size = np.concatenate(loose), self.size_for(self.n_active)
                    idle = len(pending) + len(running) < self.workers
                    take = len(ids) if idle else len(ids) // size * size
                    if idle and take < size:
                        size = self.small
                    pending.extend(self.make_chunks(ids[:take], size))
                    loose = [ids[take:]] if take < len(ids) else []
                while pending and len(running) < self.workers:
                    running.add(pool.submit(self.advance, pending.popleft()))
                done, running = wait(running, return_when=FIRST_COMPLETED)
                save = self.checkpoint is not None and self.checkpoint.due()
                if save:
                    done, running = done | running, set()  # every chunk between two epochs
                for future in done:
                    self.collect(future.result(), pending, loose)
                if save:
                    for c in pending:
                        self.to_host(c)
                    self.checkpoint.save(self.out)
