"""`coin/i`: a biased coin, the smallest joint-prediction problem, scored exactly.

Inputs carry no information (x = 0); labels are Bernoulli(p) flips (class 1 = heads).
With tau test flips at one input, the agent's joint predictive over all 2^tau label
sequences is enumerated exactly for its M sampled functions, so the KL has no test-batch
noise. It proves the plumbing: a Beta-Bernoulli agent's KL has a closed form.
"""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from generative.registry import index_settings, register_family, register_sweep
from testbed.base import Data, PriorKnowledge
from testbed.evaluation import Evidence, EvidenceScoring
from testbed.joint_kl import LabelDistribution, sample_keys

PROBS = (0.2, 0.5, 0.9)
NUM_TRAIN = (0, 10, 100)
TAUS = (1, 5)

SETTINGS = [
    {"p": p, "num_train": n, "tau": tau, "seed": j + 1, "num_enn_samples": 1000}
    for tau in TAUS
    for j, (p, n) in enumerate(itertools.product(PROBS, NUM_TRAIN))
]


@dataclasses.dataclass
class CoinProblem(EvidenceScoring):
    """A Bernoulli(p) coin: `num_train` training flips, KL over `tau` test flips."""

    offers = frozenset({"sampler", "label_distribution"})
    metrics = ("exact_joint_kl",)

    p: float
    num_train: int
    tau: int
    seed: int
    num_enn_samples: int = 1000

    def __post_init__(self):
        rng = np.random.default_rng(self.seed)
        y = (rng.random(self.num_train) < self.p).astype(np.int32)
        self.train_data = Data(x=np.zeros((self.num_train, 1), np.float32), y=y)
        self._key = jax.random.PRNGKey(self.seed)

    @property
    def prior_knowledge(self) -> PriorKnowledge:
        return PriorKnowledge(input_dim=1, num_train=self.num_train, num_classes=2, tau=self.tau)

    def true_log_probs(self, num_rows: int) -> np.ndarray:
        """log [1 - p, p] at each of `num_rows` inputs."""
        return np.tile(np.log([1.0 - self.p, self.p]), (num_rows, 1))

    def oracle_predictive(self):
        """The environment itself as a (deterministic) sampler: KL 0."""
        logits = jnp.log(jnp.array([1.0 - self.p, self.p], jnp.float32))
        return lambda x, key: jnp.broadcast_to(logits, (x.shape[0], 2))

    def evidence(self, sampler) -> Evidence:
        """The sampler and the coin's label distribution at tau flips (all at x = 0)."""
        flips = LabelDistribution(
            x=jnp.zeros((self.tau, 1), jnp.float32),
            log_probs=self.true_log_probs(self.tau),
            keys=sample_keys(self._key, self.num_enn_samples),
            num_classes=2,
        )
        return Evidence({"sampler": lambda _: sampler, "label_distribution": lambda _: flips})


def _settings(rest: str) -> dict:
    return index_settings("coin", rest, SETTINGS)


@register_family(
    "coin",
    _settings,
    "biased coin, exact joint KL over tau flips (plumbing)",
    id_form=f"coin/<i>, i = 0..{len(SETTINGS) - 1}",
    prediction="labels",
)
def build(settings: dict) -> CoinProblem:
    return CoinProblem(**settings)


@register_sweep("coin")
def coin_ids() -> list[str]:
    return [f"coin/{i}" for i in range(len(SETTINGS))]
