"""Every PPL agent runs while an event loop runs in the calling thread, as in a Jupyter
notebook (`notebooks/ppl_against_exact.ipynb`): PyStan calls `asyncio.run`, which a running
loop refuses, so `stan` runs PyStan in a worker thread there (`outside_running_loop`).

Each agent is evaluated synchronously inside `asyncio.run(main())`, at small sizes; `stan`
is in the default tier (the regression this file guards), the others in the slow tier.
"""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import agents
import generative
import testbed
from agents.ppl.common import outside_running_loop

MODULES = {"blackjax": "blackjax", "numpyro": "numpyro", "nutpie": "nutpie", "pymc": "pymc"}
MODULES |= {"pyro": "pyro", "stan": "stan"}
SIZES = {"num_warmup": 100, "num_samples": 200, "num_chains": 2}


def test_outside_running_loop_moves_to_a_worker_only_under_a_running_loop():
    here = threading.get_ident()
    assert outside_running_loop(threading.get_ident) == here

    async def main():
        asyncio.get_running_loop()  # a loop runs in this thread
        return outside_running_loop(threading.get_ident), outside_running_loop(
            lambda: asyncio.run(asyncio.sleep(0, result="ran"))  # what PyStan does
        )

    ident, ran = asyncio.run(main())
    assert ident != here and ran == "ran"
    with pytest.raises(ZeroDivisionError):  # the worker's exception reaches the caller

        async def fails():
            return outside_running_loop(lambda: 1 / 0)

        asyncio.run(fails())


def _evaluate_in_a_running_loop(agent: str) -> dict:
    problem = generative.load("conjugate/wyb/1", use_c2st=False)

    async def main():
        asyncio.get_running_loop()  # raises unless a loop runs here
        return testbed.evaluate(agents.load(agent, **SIZES), problem)  # synchronously

    return asyncio.run(main())


@pytest.mark.parametrize(
    "agent",
    [pytest.param(a, marks=() if a == "stan" else pytest.mark.slow, id=a) for a in sorted(MODULES)],
)
@pytest.mark.timeout(600)
def test_each_ppl_agent_runs_inside_a_running_event_loop(agent):
    pytest.importorskip(MODULES[agent])
    quality = _evaluate_in_a_running_loop(agent)
    assert quality["num_divergences"] == 0 and quality["r_hat_max"] < 1.1, quality
    assert np.isfinite(quality["pit_ks_pvalue"]) and quality["sampling_seconds"] > 0
