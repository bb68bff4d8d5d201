"""What the PPL agents share: their settings, the refusals, the diagnostics, the model cache.

Every PPL agent runs NUTS at its PPL's defaults with the settings of "What's your bench"
(1,000 draws a chain after 200 warm-up steps; chains an option), on the conjugate problem's
own model written in its language (`agents/ppl/spec.py` reads the model), and returns the
pooled draws as a `DrawsPosterior` (as `nuts` does) whose `.diagnostics` go into the Quality:
compile time apart from sampling time, R-hat, bulk and tail ESS (ArviZ, on the draws of all
chains), divergences and ESS per second.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import importlib
import os
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np

from agents.nuts import ChainsConfig, DrawsPosterior
from testbed.errors import InputError

INSTALL = 'pip install -c constraints.txt -e ".[ppl]"'


@dataclasses.dataclass(frozen=True)
class PplConfig(ChainsConfig):
    """NUTS at the PPL's defaults; the benchmark's sizes: 200 warm-up + 1,000 draws a chain."""

    num_warmup: int = 200
    num_chains: int = 2
    seed: int = 0
    min_samples: ClassVar[int] = 4


def require(agent: str, module: str, package: str | None = None) -> Any:
    """Import a PPL's module (and ArviZ, which every PPL agent's diagnostics use), or one
    line saying which extra installs it."""
    if module != "arviz":
        require(agent, "arviz")
    try:
        with warnings.catch_warnings():  # pkg_resources (PyStan), ArviZ's refactor notice
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("ignore", FutureWarning)
            return importlib.import_module(module)
    except ImportError as exc:
        raise InputError(
            f"agent {agent}: the package {package or module} is not installed ({exc.msg}); "
            f"allowed: install the PPL extra: {INSTALL}"
        ) from None


def check_family(agent: str, knowledge: Any, served: tuple[str, ...]) -> Any:
    """The problem's family if this PPL agent serves it, else one line naming those it does."""
    model = getattr(knowledge, "model", None)
    family = getattr(model, "family", None)
    if family is None:
        raise InputError(
            f"agent {agent}: got {type(knowledge).__name__} as prior knowledge, without a "
            "conjugate family; allowed: conjugate problems (conjugate/...)"
        )
    if family.name not in served:
        raise InputError(
            f"agent {agent}: family {family.name!r} is not served; allowed: "
            + ", ".join(sorted(served))
        )
    return family


def diagnostics(
    theta: np.ndarray, compile_seconds: float, sampling_seconds: float, divergences: int
) -> dict[str, float]:
    """R-hat (max over parameters; rank-normalised split R-hat), bulk and tail ESS (min,
    and bulk median) by ArviZ of theta [chains, draws, dim]; ESS per second of sampling
    (warm-up and draws, compilation left out); the two times apart; divergences."""
    import arviz as az  # the agent asked for it first (`require`)

    data = az.convert_to_dataset(np.asarray(theta, np.float64)[:, :, :])
    (name,) = list(data.data_vars)
    # a parameter that is a deterministic function of others (the last simplex entry is
    # not) would give NaN: take the finite ones
    rhat = np.asarray(az.rhat(data)[name]).reshape(-1)
    bulk = np.asarray(az.ess(data, method="bulk")[name]).reshape(-1)
    tail = np.asarray(az.ess(data, method="tail")[name]).reshape(-1)
    out = {
        "ess_bulk_min": float(np.nanmin(bulk)),
        "ess_bulk_median": float(np.nanmedian(bulk)),
        "ess_tail_min": float(np.nanmin(tail)),
        "ess_per_second": float(np.nanmin(bulk) / max(sampling_seconds, 1e-9)),
        "compile_seconds": float(compile_seconds),
        "sampling_seconds": float(sampling_seconds),
        "num_divergences": float(divergences),
    }
    if theta.shape[0] > 1:
        out["r_hat_max"] = float(np.nanmax(rhat))
    return out


def posterior(
    theta: np.ndarray, compile_seconds: float, sampling_seconds: float, divergences: int
) -> DrawsPosterior:
    """The draws of theta [chains, draws, dim], pooled, with their chains (ArviZ's
    `to_inference_data`) and their diagnostics."""
    theta = np.asarray(theta, np.float64)
    if not np.all(np.isfinite(theta)):
        raise InputError("draws: got NaN or infinite values; allowed: finite draws")
    diag = diagnostics(theta, compile_seconds, sampling_seconds, divergences)
    return DrawsPosterior.of_chains(theta, diag)


class ModelCache:
    """Compiled models by key (a family and its shapes): compiled once per process."""

    def __init__(self):
        self._models: dict[Any, Any] = {}

    def get(self, key: Any, build: Callable[[], Any]) -> tuple[Any, float]:
        """(the compiled model, the seconds spent compiling it now: 0.0 when cached)."""
        if key in self._models:
            return self._models[key], 0.0
        start = time.perf_counter()
        model = build()
        self._models[key] = model
        return model, time.perf_counter() - start

    def clear(self) -> None:
        self._models.clear()


def outside_running_loop(fn: Callable[[], Any]) -> Any:
    """fn() in this thread, or in a worker thread while an event loop runs in this one (a
    Jupyter notebook's): PyStan calls `asyncio.run`, which a running loop refuses. The
    caller waits for the worker, so fn's side effects (streams, files) happen as here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(fn).result()


class Interrupted(Exception):
    """Raised by a sampler's callback after Ctrl-C, to end sampling where the library
    would catch a KeyboardInterrupt; `interrupts_kept` turns it back into one."""


@contextlib.contextmanager
def interrupts_kept() -> Iterator[Callable[[], bool]]:
    """Ctrl-C inside is never lost to a library that catches KeyboardInterrupt: PyMC ends
    the chain it samples and goes on to the next, nutpie returns the draws so far, PyStan
    returns None. SIGINT is recorded as well as handled as before, and the block ends in
    KeyboardInterrupt whatever it ended with (the library's None, its partial draws, or an
    `Interrupted` a callback raised). Yields `interrupted()`, for a library's callback.
    Only in the main thread over a Python handler (elsewhere nothing is recorded)."""
    seen: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield lambda: False
        return

    def record(signum: int, frame: Any) -> None:
        seen.append(signum)
        previous(signum, frame)

    signal.signal(signal.SIGINT, record)
    try:
        try:
            yield lambda: bool(seen)
        finally:
            signal.signal(signal.SIGINT, previous)
    except BaseException:
        if seen:
            raise KeyboardInterrupt from None
        raise
    if seen:
        raise KeyboardInterrupt


def one_torch_thread() -> None:
    """Pyro on a small model: one torch thread (two threads cost twice the CPU here)."""
    import torch

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence a PPL's progress lines and its compiler's warnings (file descriptors 1 and 2,
    which subprocesses such as g++ write to directly)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as sink:
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
