"""Speed of the SBI tasks: simulations per second and seconds for 10,000 reference draws.

Per task: the batched simulator at batch 10,000 vs. a loop of one simulation per call (for
SIR and Lotka-Volterra the loop uses scipy's solve_ivp, RK45 at the same 1e-8 tolerances,
one parameter set at a time), measured in the same run; then the time to draw 10,000
reference posterior samples for observation 1.

    .venv/bin/python benchmarks/bench_sbi_tasks.py [--tasks two_moons sir] [--batch 10000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.integrate import solve_ivp

from generative import sbi
from generative.sbi import ode_tasks


def _scipy_one(name: str, theta: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One SIR / Lotka-Volterra simulation with solve_ivp (the per-simulation reference)."""
    if name == "sir":
        rhs, y0, times = ode_tasks.sir_rhs, [1e6 - 1.0, 1.0, 0.0], ode_tasks.SIR_TIMES
    else:
        rhs, y0, times = ode_tasks.lotka_volterra_rhs, [30.0, 1.0], ode_tasks.LV_TIMES
    sol = solve_ivp(
        lambda t, y: rhs(y[None], theta[None])[0],
        (times[0], times[-1]),
        y0,
        method="RK45",
        rtol=1e-8,
        atol=1e-8,
        t_eval=times,
    ).y.T[:-1]
    if name == "sir":
        return rng.binomial(1000, np.clip(sol[:, 1] / 1e6, 0, 1)).astype(float)
    u = np.log(np.clip(np.concatenate([sol[:, 0], sol[:, 1]]), 1e-10, 1e4))
    return np.exp(u + 0.1 * rng.standard_normal(u.shape))


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_task(name: str, batch: int, num_loop: int, num_reference: int) -> None:
    """Prints one row: batched and looped simulation rates, their ratio, reference time."""
    task = sbi.get_task(name)
    theta = task.sample_prior(batch, seed=0)
    task.simulate(theta[:10], seed=0)  # warm caches (design matrix, mixture, ...)
    batched = batch / _seconds(lambda: task.simulate(theta, seed=1))
    rng = np.random.default_rng(2)
    if name in ("sir", "lotka_volterra"):
        num_loop = min(num_loop, 50)
        loop_fn = lambda: [_scipy_one(name, t, rng) for t in theta[:num_loop]]  # noqa: E731
        how = "scipy solve_ivp RK45 1e-8, one at a time"
    else:
        loop_fn = lambda: [task.simulate(t, seed=i) for i, t in enumerate(theta[:num_loop])]  # noqa: E731
        how = "task.simulate, one row per call"
    loop = num_loop / _seconds(loop_fn)
    x_o = task.observation(1)
    ref_seconds = _seconds(lambda: task.reference_posterior(x_o, num_reference, seed=0))
    print(
        f"{name:24s} {batched:15.0f} {loop:12.0f} {batched / loop:8.1f} {ref_seconds:12.2f}  {how}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=sbi.task_names())
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--loop", type=int, default=200, help="simulations in the loop baseline")
    parser.add_argument("--reference", type=int, default=10_000, help="reference draws")
    args = parser.parse_args()
    print(
        f"{'task':24s} {'batched sims/s':>15s} {'loop sims/s':>12s} {'ratio':>8s}"
        f" {'reference s':>12s}  loop baseline"
    )
    for name in args.tasks:
        bench_task(name, args.batch, args.loop, args.reference)


if __name__ == "__main__":
    main()
