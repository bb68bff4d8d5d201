"""The bandit family: any agent as a Thompson sampler, its regret checked against closed
forms (the oracle's is 0, uniform's is max p - mean p), online learning against the same
updates replayed offline, the regret rule's ranking, and the refusals."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import agents
import generative
import testbed
from generative.bandit import CURVE_WINDOWS, BanditProblem, BanditSettings, curve_column
from testbed import thompson
from testbed.errors import InputError
from testbed.online import ONLINE, REFIT, OnlineLearner, ReplayBatch


def small(**settings) -> BanditProblem:
    return BanditProblem(BanditSettings(**{"num_steps": 400, "seed": 3, **settings}))


def test_the_environment_is_the_classification_generator():
    """The reward model is the testbed's random MLP: the same generator as classification_2d,
    so its probabilities are softmax(net(x) / T)[1] of a Haiku MLP with 50-50 hidden units."""
    from generative.classification import environment_net

    p = small()
    net = environment_net(2, 2, (50, 50))
    assert net is p._net  # one transform per architecture: the classification problems'
    assert p.actions.shape == (100, 2)  # 50 x input_dim actions
    probs = jax.nn.softmax(net.apply(p._params, p.actions) / 0.1)[:, 1]
    np.testing.assert_allclose(p.probs, probs, rtol=1e-6)
    # the same seed gives the same bandit; another seed another one
    np.testing.assert_array_equal(small().actions, p.actions)
    assert not np.allclose(small(seed=4).actions, p.actions)


def test_oracle_regret_is_zero():
    p = small()
    q = testbed.evaluate(agents.load("oracle"), p)
    assert q["average_regret"] == 0.0 and q["cumulative_regret"] == 0.0
    assert q["best_action_share"] == 1.0 and q["num_steps"] == 400


def test_uniform_regret_matches_its_closed_form():
    """Uniform picks every action with probability 1/N (all tie): E[regret] = max p - mean p;
    the tolerance is 4 standard errors of a mean over T independent steps."""
    p = small(num_steps=4000, temperature=0.5)
    probs = np.asarray(p.probs, np.float64)
    gaps = probs.max() - probs
    expected, sd = gaps.mean(), gaps.std()
    q = testbed.evaluate(agents.load("uniform"), p)
    assert abs(q["average_regret"] - expected) < 4 * sd / math.sqrt(4000)
    # actions are uniform: the first tenth of them is chosen about a tenth of the time
    trace = p.interact(agents.load("uniform"))
    share = np.mean(trace.action < 10)
    assert abs(share - 0.1) < 4 * math.sqrt(0.1 * 0.9 / 4000)


def test_regret_curve_and_quality():
    p = small(num_steps=500)
    trace = p.interact(agents.load("uniform"))
    q = p.evaluate(trace)
    windows = [q[curve_column(i)] for i in range(CURVE_WINDOWS)]
    assert np.isclose(np.mean(windows), q["average_regret"])  # 50 windows of 10 steps
    assert np.isclose(q["cumulative_regret"], trace.regret.sum())
    assert np.isclose(q["reward_rate"], trace.reward.mean())


def _replayed(learner: OnlineLearner, p: BanditProblem, trace: thompson.Trace, random):
    """The learner's updates replayed offline, one observation at a time, from the trace's
    actions and rewards (a numpy ring buffer of the same capacity)."""
    s = p.settings
    cap = s.replay_capacity
    xs, ys = np.zeros((cap, s.input_dim), np.float32), np.zeros(cap, np.int32)
    state = learner.state
    actions = np.asarray(p.actions)
    for t in range(s.num_steps):
        xs[t % cap], ys[t % cap] = actions[trace.action[t]], trace.reward[t]
        for j in range(s.steps_per_obs):
            index_key, loss_key = jax.random.split(jax.random.fold_in(random.train[t], j))
            index = jax.random.randint(index_key, (s.batch_size,), 0, min(t + 1, cap))
            batch = ReplayBatch(jnp.asarray(xs)[index], jnp.asarray(ys)[index], index)
            state = learner.step(state, batch, loss_key, jnp.float32(t + 1))
    return state


@pytest.mark.parametrize("agent", ["mlp", "ensemble+"])
def test_online_learning_equals_its_updates_replayed_offline(agent):
    """The compiled loop learns from exactly what it observed: its final parameters are those
    of the same updates replayed offline from the trace (a ring buffer that wraps: capacity 7
    < 30 steps; two SGD steps per observation)."""
    p = small(num_steps=30, replay_capacity=7, batch_size=5, steps_per_obs=2)
    a = agents.load(agent, hidden_sizes=(8,), **({"num_ensemble": 3} if agent != "mlp" else {}))
    learner = a.online_learner(p.prior_knowledge, p._agent_key)
    with generative.bandit.reference_stream():
        random = thompson.step_keys(p._run_key, 30)
    final, trace = thompson.run_online(learner, p.actions, p.probs, random, capacity=7,
                                       batch_size=5, steps_per_obs=2)  # fmt: skip
    replayed = _replayed(learner, p, trace, random)
    for x, y in zip(jax.tree.leaves(final["params"]), jax.tree.leaves(replayed["params"])):
        np.testing.assert_allclose(x, y, rtol=2e-5, atol=1e-6)
    # and it did learn: the parameters moved
    before = jax.tree.leaves(learner.state["params"])
    moved = [np.abs(x - y).max() for x, y in zip(jax.tree.leaves(final["params"]), before)]
    assert max(moved) > 1e-3
    # the trace the problem scores is the same run
    np.testing.assert_array_equal(p.interact(a).action, trace.action)


def test_how_an_agent_learns_is_declared_unbuilt():
    entries = agents.registry.AGENTS
    for name in ("mlp", "ensemble", "ensemble+", "dropout", "hypermodel", "epinet", "bbb",
                 "sgmcmc", "uniform"):  # fmt: skip
        assert entries.get(name).learns == ONLINE, name
    for name in ("knn", "random_forest", "deep_kernel", "prior"):
        assert entries.get(name).learns == REFIT, name
    with pytest.raises(InputError, match="knn learns by refitting"):
        agents.load("knn").online_learner(small().prior_knowledge, jax.random.PRNGKey(0))


@pytest.mark.slow
def test_every_online_agent_runs_and_learns():
    """Each online agent with epistemic uncertainty beats uniform on a bandit with d = 2,
    T = 0.5 in 1,500 steps. The greedy mlp (one function: the trap) and sgmcmc (its testbed
    step size, sqrt(1e-4), barely moves in so few steps) only have to run and give finite
    regret: on this seed the greedy mlp does no better than uniform."""
    p = small(num_steps=1500, temperature=0.5, seed=1)
    uniform = testbed.evaluate(agents.load("uniform"), p)["average_regret"]
    small_nets = dict(num_ensemble=3)
    for name, kw in [("mlp", {}), ("ensemble", small_nets), ("ensemble+", small_nets),
                     ("dropout", {}), ("hypermodel", {}), ("epinet", {}), ("bbb", {}),
                     ("sgmcmc", {})]:  # fmt: skip
        q = testbed.evaluate(agents.load(name, **kw), p)
        assert np.isfinite(q["average_regret"]), name
        if name not in ("sgmcmc", "mlp"):
            assert q["average_regret"] < 0.8 * uniform, (name, q["average_regret"], uniform)


def test_a_refit_agent_is_refit_on_what_it_saw():
    """A refit agent is trained every `refit_every` steps on all observations so far, told
    their number; before its first refit it plays uniformly."""
    seen = []

    def counting(data, prior):
        seen.append((len(data.x), prior.num_train, int(np.sum(data.y))))
        return lambda x, key: jnp.zeros((x.shape[0], 2))

    p = small(num_steps=250, refit_every=100)
    trace = p.interact(counting)
    assert [s[:2] for s in seen] == [(100, 100), (200, 200)]
    assert seen[1][2] == int(trace.reward[:200].sum())
    q = p.evaluate(trace)
    assert q["num_steps"] == 250


def test_refusals():
    with pytest.raises(InputError, match="num_steps: got 0"):
        BanditSettings(num_steps=0)
    with pytest.raises(InputError, match=r"actions_per_dim x input_dim: got 1000000"):
        BanditSettings(actions_per_dim=100_000, input_dim=10)
    with pytest.raises(InputError, match="batch_size"):
        BanditSettings(batch_size=0)
    with pytest.raises(InputError, match="option of bandit problems"):
        generative.load("bandit/0", num_test_seeds=5)
    with pytest.raises(InputError, match="problem id"):
        generative.load("bandit/30")
    # an agent that predicts posteriors is refused before it runs, naming those that fit
    with pytest.raises(InputError, match="needs labels; agents that fit"):
        testbed.evaluate(agents.load("npe"), small())


def test_an_agent_that_fails_mid_run_is_an_error_with_its_reason():
    p = small(num_steps=300, refit_every=100)

    def breaks(data, prior):
        if len(data.x) >= 200:
            raise RuntimeError("out of ideas")
        return lambda x, key: jnp.zeros((x.shape[0], 2))

    with pytest.raises(RuntimeError, match="out of ideas"):
        testbed.evaluate(breaks, p)

    def nan_logits(data, prior):
        return lambda x, key: jnp.full((x.shape[0], 2), jnp.nan)

    with pytest.raises(InputError, match="NaN logits"):
        testbed.evaluate(nan_logits, p)


class _Diverges:
    """An online agent whose function turns NaN after 5 observations."""

    learns = ONLINE

    def online_learner(self, prior, key):
        def step(state, batch, key, t):
            return {"t": t}

        def sample(state, x, key):
            value = jnp.where(state["t"] > 5, jnp.nan, 0.0)
            return jnp.full((x.shape[0], 2), value)

        return OnlineLearner({"t": jnp.float32(0)}, step, sample)

    def __call__(self, data, prior):  # an agent is callable
        raise AssertionError("an online agent is not refit")


def test_an_online_agent_that_goes_nan_is_refused_naming_the_step():
    with pytest.raises(InputError, match="non-finite logits at bandit step 6"):
        testbed.evaluate(_Diverges(), small(num_steps=50))


def test_sweep_leaderboard_and_report_rank_by_regret(tmp_path):
    """A sweep over bandit ids stores each run; the leaderboard ranks lower regret first (the
    oracle, then uniform) per environment, and the report draws the regret curves."""
    import leaderboard
    from leaderboard.ranking import board as boards

    results = tmp_path / "r.db"
    ids = ["bandit/0", "bandit/1"]
    leaderboard.sweep(["uniform", "oracle"], ids, results=results, executor="inline",
                      progress=False)  # fmt: skip
    df = leaderboard.load(results)
    assert len(df) == 4 and set(df["status"]) == {"ok"}
    board = boards.rank(df, results=results, shipped=False)
    (ranking,) = board.rankings
    t = ranking.table
    assert list(t["label"]) == ["oracle", "uniform"] and list(t["rank"]) == [1, 2]
    assert set(t["task"]) == {"d=2, T=0.1"} and set(t["budget"]) == {10_000}
    assert t["mean_regret"].iloc[0] == 0.0 and t["num_observations"].iloc[1] == 2
    from leaderboard.ranking.report import write_report

    # our shipped runs of the same bandits rank beside them, labelled as ours
    beside = boards.rank(df, results=results).rankings[0].table
    assert "ensemble+ (ours, shipped)" in set(beside["label"])
    assert beside["label"].iloc[0] == "oracle"  # regret 0 stays first
    page = write_report(board, tmp_path / "r.html").read_text()
    assert 'data-plot="regret-curves"' in page and "average regret" in page


def test_settings_are_the_reference_defaults():
    s = dataclasses.asdict(BanditSettings())
    assert s["num_steps"] == 10_000 and s["input_dim"] == 2 and s["temperature"] == 0.1
    assert s["replay_capacity"] == 10_000 and s["batch_size"] == 128
    assert s["steps_per_obs"] == 1 and s["actions_per_dim"] == 50
    assert generative.problem_settings("bandit/0")["environment"] == "d=2, T=0.1"


def test_a_run_in_blocks_is_the_run_in_one(monkeypatch):
    """The loop runs in blocks of BLOCK steps (Ctrl-C and progress are heard between them):
    blocks of 7 give the same trace and final parameters as one block of 40."""
    p = small(num_steps=40, replay_capacity=16, batch_size=4)
    learner = agents.load("mlp", hidden_sizes=(8,)).online_learner(p.prior_knowledge, p._agent_key)
    with generative.bandit.reference_stream():
        random = thompson.step_keys(p._run_key, 40)
    runs = []
    for block in (40, 7):
        monkeypatch.setattr(thompson, "BLOCK", block)
        runs.append(thompson.run_online(learner, p.actions, p.probs, random, capacity=16,
                                        batch_size=4, steps_per_obs=1))  # fmt: skip
    (one_state, one), (many_state, many) = runs
    np.testing.assert_array_equal(one.action, many.action)
    np.testing.assert_array_equal(one.regret, many.regret)
    for x, y in zip(jax.tree.leaves(one_state), jax.tree.leaves(many_state)):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)
