"""The bandit's compiled Thompson loop against the reference's loop, each timed whole.

The reference (`neural_testbed/bandit/thompson.py`, which cannot be installed here: it
needs dm-acme and TF 2.8 pins) runs a Python loop over the T steps with a jitted action
selection, a replay held in numpy (`replay.py`: `add` one row, `sample` a batch) and a
jitted SGD step. That loop is written out here with the same learner (ensemble+ with 10
members, its online form), the same keys and the same batch indices as ours, so both sides
take the same actions: their traces must agree step for step (float rounding aside, the
first step where they part is printed). Ours runs all T steps in one `lax.scan`.

Usage:
    .venv/bin/python benchmarks/bench_bandit.py            # 10,000 steps, ~1 min
    .venv/bin/python benchmarks/bench_bandit.py --steps 2000
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402

import agents  # noqa: E402
from generative.bandit import BanditProblem, BanditSettings  # noqa: E402
from testbed import thompson  # noqa: E402
from testbed.online import ReplayBatch  # noqa: E402
from testbed.reference_rng import reference_stream  # noqa: E402


def reference_loop(learner, problem, random, capacity, batch_size):
    """The reference's structure: per step a jitted selection, a numpy replay, a jitted step."""
    actions, probs = problem.actions, problem.probs
    best = float(jnp.max(probs))

    @jax.jit
    def select(state, fkey, tie_key):
        logits = learner.sample_logits(state, actions, fkey)
        return thompson.choose(thompson.reward_probs(logits), tie_key)

    sgd = jax.jit(learner.step)
    buf_x = np.zeros((capacity, actions.shape[1]), np.float32)
    buf_y = np.zeros((capacity,), np.int32)
    state, regrets, chosen = learner.state, [], []
    probs_np, actions_np = np.asarray(probs), np.asarray(actions)
    for t in range(random.reward.shape[0]):
        a = int(select(state, random.function[t], random.ties[t]))
        p = probs_np[a]
        reward = int(float(random.reward[t]) < p)
        buf_x[t % capacity], buf_y[t % capacity] = actions_np[a], reward
        index_key, loss_key = jax.random.split(jax.random.fold_in(random.train[t], 0))
        index = np.asarray(jax.random.randint(index_key, (batch_size,), 0, min(t + 1, capacity)))
        batch = ReplayBatch(
            jnp.asarray(buf_x[index]), jnp.asarray(buf_y[index]), jnp.asarray(index)
        )
        state = sgd(state, batch, loss_key, jnp.float32(t + 1))
        regrets.append(best - p)
        chosen.append(a)
    jax.block_until_ready(state)
    return np.asarray(regrets), np.asarray(chosen)


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--no-record", action="store_true")
    args = record.arguments(parser)
    meter = record.Meter()
    problem = BanditProblem(BanditSettings(num_steps=args.steps))
    agent = agents.load("ensemble+", num_ensemble=args.members)
    learner = agent.online_learner(problem.prior_knowledge, problem._agent_key)
    with reference_stream():
        random = thompson.step_keys(problem._run_key, args.steps)
    cap, batch = problem.settings.replay_capacity, problem.settings.batch_size

    def ours():
        _, trace = thompson.run_online(learner, problem.actions, problem.probs, random,
                                       capacity=cap, batch_size=batch, steps_per_obs=1)  # fmt: skip
        return trace

    trace, ours_wall, ours_cpu = timed(ours)
    (ref_regret, ref_action), ref_wall, ref_cpu = timed(
        lambda: reference_loop(learner, problem, random, cap, batch)
    )
    apart = np.nonzero(ref_action != trace.action)[0]
    same = len(apart) == 0
    agree = (
        f"the same {args.steps} actions; average regret {trace.regret.mean():.5f}"
        if same
        else f"actions part at step {apart[0]} of {args.steps} (float rounding); average "
        f"regret {trace.regret.mean():.5f} (ours) vs {ref_regret.mean():.5f}"
    )
    print(f"ours: {ours_wall:.1f} s wall, {ours_cpu:.1f} s CPU (compilation included)")
    print(f"reference loop: {ref_wall:.1f} s wall, {ref_cpu:.1f} s CPU")
    print(f"ratio {record.ratio(ref_wall, ours_wall)} wall, {record.ratio(ref_cpu, ours_cpu)} CPU")
    print(agree)
    row = {
        "case": f"ensemble+ ({args.members} members) as a Thompson sampler, {args.steps:,} "
        "steps, d = 2 (100 actions)",
        "ours": f"{ours_wall:.1f} s wall, {ours_cpu:.1f} s CPU (one lax.scan, compilation "
        "included)",
        "reference": "the Neural Testbed bandit's loop (Python loop of a jitted selection, a "
        "numpy replay and a jitted SGD step; written out: it needs dm-acme and TF 2.8 pins): "
        f"{ref_wall:.1f} s wall, {ref_cpu:.1f} s CPU",
        "ratio": f"{record.ratio(ref_wall, ours_wall)} wall, {record.ratio(ref_cpu, ours_cpu)} CPU",
        "agree": agree,
    }
    if not args.no_record:
        record.save(__file__, [row], meter)


if __name__ == "__main__":
    main()
