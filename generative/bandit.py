"""The Neural Testbed's bandit: any agent as a Thompson sampler on a random-MLP reward model.

As the reference's `ThompsonEnnBandit` (neural_testbed/bandit, 2022): N = 50 x input_dim
actions with features drawn from N(0, I) once per seed; the reward of an action is
Bernoulli with probability softmax(logits / T)[1] of a 2-layer, 50-unit random MLP from
the testbed's own generator (`testbed.random_mlp`, the environment of `classification*`);
regret of a step = best probability - chosen probability; T steps (10,000). The keys follow
the reference's `hk.PRNGSequence(seed)`: the actions, then the reward MLP; then ours: the
agent's initial parameters and the run's per-step draws.

A problem runs the agent (`interact`) and scores its trace (`evaluate`): average and
cumulative regret, the share of steps on the best action, and the regret curve in 50
windows. How the agent learns is what its registry entry declares (`testbed.online`).
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from generative.classification import environment_logits, environment_net
from generative.registry import register_sweep, register_table
from testbed import thompson
from testbed.base import Data, Oracle, PriorKnowledge, Quality
from testbed.config import check_at_least, check_positive
from testbed.errors import InputError
from testbed.online import ONLINE, learns
from testbed.ranking import regret
from testbed.reference_rng import key_sequence, reference_stream

CURVE_WINDOWS = 50  # the regret curve is stored as the mean regret of 50 equal windows
MAX_STEPS = 1_000_000
MAX_ACTIONS = 100_000
AGENT_NUM_TRAIN = 100  # the reference's PriorKnowledge(num_train=100) for its online agents


def curve_column(i: int) -> str:
    """The metric of window i of the regret curve (`regret_w00` ... `regret_w49`)."""
    return f"regret_w{i:02d}"


@dataclasses.dataclass(frozen=True)
class BanditSettings:
    """Everything that defines a bandit run (joined onto leaderboard rows). `environment`
    names the reward model's (input_dim, temperature): the cell its runs are ranked in."""

    input_dim: int = 2
    temperature: float = 0.1
    seed: int = 0
    num_steps: int = 10_000
    actions_per_dim: int = 50
    hidden: tuple[int, ...] = (50, 50)
    replay_capacity: int = 10_000
    batch_size: int = 128
    steps_per_obs: int = 1
    refit_every: int = 100
    environment: str = ""

    def __post_init__(self):
        check_at_least("input_dim", self.input_dim, 1)
        check_positive("temperature", self.temperature)
        check_at_least("seed", self.seed, 0)
        for name, high in (("num_steps", MAX_STEPS), ("num_actions", MAX_ACTIONS)):
            value = self.num_steps if name == "num_steps" else self.num_actions
            if not 1 <= value <= high:
                what = "actions_per_dim x input_dim" if name == "num_actions" else name
                raise InputError(f"{what}: got {value!r}; allowed: an integer in [1, {high:,}]")
        for name in ("actions_per_dim", "replay_capacity", "batch_size", "steps_per_obs"):
            check_at_least(name, getattr(self, name), 1)
        check_at_least("refit_every", self.refit_every, 1)
        for name, high in (("batch_size", 100_000), ("steps_per_obs", 100)):
            if getattr(self, name) > high:
                raise InputError(
                    f"{name}: got {getattr(self, name)!r}; allowed: an integer in [1, {high:,}]"
                )
        if self.replay_capacity > MAX_STEPS:
            raise InputError(
                f"replay_capacity: got {self.replay_capacity!r}; allowed: an integer in "
                f"[1, {MAX_STEPS:,}]"
            )
        object.__setattr__(self, "environment", f"d={self.input_dim}, T={self.temperature:g}")

    @property
    def num_actions(self) -> int:
        return int(self.actions_per_dim) * int(self.input_dim)


class BanditProblem:
    """A seeded bandit: `interact(agent)` runs T Thompson steps, `evaluate(trace)` scores."""

    prediction = "labels"  # an agent must predict labels (reward or not) at each action

    def __init__(self, settings: BanditSettings):
        self.settings = s = settings
        self._net = environment_net(s.input_dim, 2, tuple(s.hidden))
        with reference_stream():
            action_key, env_key, self._agent_key, self._run_key = key_sequence(s.seed, 4)
            self.actions = jax.random.normal(action_key, (s.num_actions, s.input_dim))
            self._params = self._net.init(env_key, jnp.zeros((1, s.input_dim)))
        self.probs = thompson.reward_probs(self.logit_fn(self.actions))

    def logit_fn(self, x: jax.Array) -> jax.Array:
        """The reward model: x [n, d] -> logits [n, 2] (divided by the temperature)."""
        return environment_logits(
            self._net, self._params, jnp.float32(self.settings.temperature), x
        )

    @property
    def train_data(self) -> Data:
        """Nothing before the run: the agent learns from the rewards it observes."""
        return Data(np.zeros((0, self.settings.input_dim), np.float32), np.zeros((0,), np.int32))

    @cached_property
    def prior_knowledge(self) -> PriorKnowledge:
        """What the reference tells its online agents (num_train 100, tau 1); a refit agent
        is told the number of observations it is trained on."""
        s = self.settings
        return PriorKnowledge(
            input_dim=s.input_dim, num_train=AGENT_NUM_TRAIN, num_classes=2, tau=1,
            temperature=s.temperature, layers=len(s.hidden),
        )  # fmt: skip

    def oracle_predictive(self):
        """The reward model itself as a (deterministic) sampler: its regret is 0 up to ties."""
        return lambda x, key: self.logit_fn(x)

    def interact(self, agent: Any) -> thompson.Trace:
        """Runs `agent` as a Thompson sampler for T steps: online (SGD on replay batches, one
        compiled loop) when it learns online, else refit every `refit_every` steps; an
        oracle plays the reward model."""
        s = self.settings
        with reference_stream():
            random = thompson.step_keys(self._run_key, s.num_steps)
        if isinstance(agent, Oracle):
            fixed = agent.predictive_for(self)
            return thompson.run_refit(
                None, self.actions, self.probs, random, refit_every=s.num_steps, fixed=fixed
            )
        if learns(agent) == ONLINE:
            learner = agent.online_learner(self.prior_knowledge, self._agent_key)
            _, trace = thompson.run_online(
                learner, self.actions, self.probs, random, capacity=s.replay_capacity,
                batch_size=s.batch_size, steps_per_obs=s.steps_per_obs,
            )  # fmt: skip
            return trace

        def fit(data: Data, seen: int):
            prior = dataclasses.replace(self.prior_knowledge, num_train=seen)
            sampler = agent(data, prior)
            if sampler is None:
                raise InputError(
                    "agent returned None; allowed: a sampler (x, key) -> logits [n, 2]"
                )
            return sampler

        return thompson.run_refit(fit, self.actions, self.probs, random, refit_every=s.refit_every)

    def evaluate(self, trace: thompson.Trace) -> Quality:
        """Average and cumulative regret, the share of steps on the best action, the mean
        regret over the last tenth of the run, and the regret curve (50 windows)."""
        if not isinstance(trace, thompson.Trace):
            raise InputError(
                f"bandit evaluate: got {type(trace).__name__}; allowed: the Trace of "
                "problem.interact(agent) (testbed.evaluate(agent, problem) runs both)"
            )
        regret = np.asarray(trace.regret, np.float64)
        best = np.asarray(self.probs).argmax()
        q = Quality(
            average_regret=regret.mean(),
            cumulative_regret=regret.sum(),
            final_regret=regret[-max(1, len(regret) // 10) :].mean(),
            best_action_share=np.mean(np.asarray(trace.action) == best),
            reward_rate=np.mean(trace.reward),
            best_probability=float(np.max(self.probs)),
            num_steps=len(regret),
        )
        for i, window in enumerate(np.array_split(regret, CURVE_WINDOWS)):
            q[curve_column(i)] = window.mean() if len(window) else np.nan
        return q


# (input_dim, temperature): the reference's setting first, then one more temperature and
# one more input dimension, each with the classification problems they share a generator
# with (classification_2d at T 0.1 and 0.5; classification at d = 10, T = 0.1).
ENVIRONMENTS = ((2, 0.1), (2, 0.5), (10, 0.1))
NUM_SEEDS = 10
TABLE = [
    dict(input_dim=d, temperature=t, seed=seed)
    for d, t in ENVIRONMENTS
    for seed in range(NUM_SEEDS)
]

register_table(
    "bandit",
    TABLE,
    BanditSettings,
    BanditProblem,
    "Neural Testbed Thompson-sampling bandit on a random-MLP reward model (d x T x 10 seeds)",
    prediction="labels",
    ranked_by=dataclasses.replace(
        regret(("environment", "num_steps"), replicate="seed"), shipped="decisions_ours"
    ),
)


@register_sweep("bandit_quick")
def quick_ids() -> list[str]:
    """The reference's setting (d = 2, T = 0.1), three seeds."""
    return [f"bandit/{i}" for i in range(3)]
