"""Problems that misbehave on purpose, for the leaderboard's reliability tests.

Imported by the tests and, through the executors' `imports`, by the worker processes.
`lbfault/<mode>` (or `lbfault/<mode>-<n>` for many problems of one mode): `nan` returns a
NaN KL, `raise` raises, `hang` sleeps for an hour, `die` kills its worker process, `env`
reports the worker's thread settings, JAX cache folder and SIGINT state, `infstd` has an infinite
diagnostic, `infkl` an infinite KL, `clock` sleeps for LBFAULT_SLEEP seconds (default 0.5),
reports when it ran and appends its problem id to the file LBFAULT_LOG if that is set.
`lbfault_sbi/<task>/<budget>/<observation>`: settings of a posterior problem (c2st rows).
"""

from __future__ import annotations

import os
import time

from generative.registry import FAMILIES, register_family
from testbed import ranking
from testbed.base import Data, PriorKnowledge, Quality
from testbed.errors import InputError

MODES = ("nan", "raise", "hang", "die", "env", "infstd", "infkl", "clock")


class FaultProblem:
    def __init__(self, mode: str, name: str = ""):
        self.mode = mode
        self.name = name

    @property
    def train_data(self) -> Data:
        return Data(x=[[0.0]], y=[0])

    @property
    def prior_knowledge(self) -> PriorKnowledge:
        return PriorKnowledge(input_dim=1, num_train=1, num_classes=2)

    def evaluate(self, predictive) -> Quality:
        if self.mode == "nan":
            return Quality(kl_estimate=float("nan"), test_acc=0.5)
        if self.mode == "infstd":  # an infinite diagnostic: data, not a failure
            return Quality(kl_estimate=0.25, kl_estimate_std=float("inf"))
        if self.mode == "infkl":
            return Quality(kl_estimate=float("inf"))
        if self.mode == "raise":
            raise RuntimeError("deliberate failure\nsecond line")
        if self.mode == "hang":
            time.sleep(3600)
        if self.mode == "die":
            os._exit(7)
        if self.mode == "clock":
            started = time.time()
            time.sleep(float(os.environ.get("LBFAULT_SLEEP", "0.5")))
            if os.environ.get("LBFAULT_LOG"):
                with open(os.environ["LBFAULT_LOG"], "a") as f:
                    f.write(f"{self.name} {os.getpid()}\n")
            return Quality(kl_estimate=0.0, started=started, ended=time.time())
        import signal

        import jax

        flags = os.environ.get("XLA_FLAGS", "")
        cache = jax.config.jax_compilation_cache_dir
        return Quality(
            jax_cache_set=float(bool(cache) and cache == os.environ.get("TESTBED_JAX_CACHE")),
            kl_estimate=0.0,
            omp_threads=float(os.environ.get("OMP_NUM_THREADS", "-1")),
            xla_one_thread=float("intra_op_parallelism_threads=1" in flags),
            eigen_off=float("--xla_cpu_multi_thread_eigen=false" in flags),
            sigint_ignored=float(signal.getsignal(signal.SIGINT) is signal.SIG_IGN),
            sigint_blocked=float(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        )


def _settings(rest: str) -> dict:
    mode, _, copy = rest.partition("-")
    if mode not in MODES or (copy and not copy.isdigit()):
        raise InputError(f"lbfault mode: got {rest!r}; allowed: one of {MODES}, or mode-<n>")
    return {"mode": mode, "name": rest}


def _sbi_settings(rest: str) -> dict:
    task, budget, obs = rest.split("/")
    return {"task": task, "num_simulations": int(budget), "num_observation": int(obs)}


if "lbfault" not in FAMILIES:

    @register_family("lbfault", _settings, "misbehaving problems for leaderboard tests")
    def build(settings: dict) -> FaultProblem:
        return FaultProblem(settings["mode"], settings["name"])

    @register_family(
        "lbfault_sbi",
        _sbi_settings,
        "posterior-problem settings for tests",
        ranked_by=ranking.c2st(("task", "num_simulations"), replicate="num_observation"),
    )
    def build_sbi(settings: dict):
        raise InputError("lbfault_sbi problems only carry settings")
