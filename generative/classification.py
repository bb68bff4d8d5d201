"""Random-MLP classification environments and the Neural Testbed's problem sweeps.

An environment is one random ReLU MLP (testbed.random_mlp) with softmax(logits / T)
label probabilities and N(0, I) inputs. A problem trains the agent on `num_train` pairs and
scores the joint KL over tau test inputs (i.i.d. Gaussian, or dyadic: kappa = 2 anchors
drawn with replacement). Problems with the same index in the tau = 1 and tau = 10 halves
of a sweep share environment, training data and estimator key (the seed restarts per tau).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from functools import cached_property
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from generative.input_designs import gaussian_inputs, polyadic_gaussian_inputs
from generative.registry import register_sweep, register_table
from testbed.accuracy import LabelledInputs
from testbed.base import SHARED_BY_ANY, Data, PriorKnowledge
from testbed.config import check_one_of, check_positive, check_sizes
from testbed.evaluation import Evidence, EvidenceScoring
from testbed.joint_kl import TestBatches, estimator_keys, sample_keys
from testbed.random_mlp import make_random_mlp
from testbed.ranking import JOINT_KL
from testbed.reference_rng import (
    key_sequence,
    labels_log_likelihood,
    reference_stream,
    sample_labels,
)
from testbed.sizes import check_memory


@dataclasses.dataclass(frozen=True)
class ClassificationSettings:
    """Everything that defines a classification problem (joined onto leaderboard rows)."""

    input_dim: int
    num_train: int
    temperature: float
    tau: int
    seed: int
    num_classes: int = 2
    test_design: Literal["gaussian", "dyadic"] = "gaussian"
    kappa: int = 2
    num_test_seeds: int = 1000
    num_enn_samples: int = 1000
    hidden: tuple[int, ...] = (50, 50)
    # tau above this uses the random-partition estimator (as the reference: tau > 10).
    max_tau_monte_carlo: int = 10

    def __post_init__(self):
        check_sizes(self, input_dim=1, num_train=0)
        check_positive("temperature", self.temperature)
        check_sizes(self, tau=1, num_classes=2)
        check_one_of("test_design", self.test_design, ("gaussian", "dyadic"))
        check_sizes(self, num_test_seeds=1, num_enn_samples=1)
        sizes = {"num_test_seeds": self.num_test_seeds, "num_enn_samples": self.num_enn_samples}
        check_memory(self.estimator_bytes, sizes, "the joint KL estimator", type(self))

    def estimator_bytes(self, num_test_seeds: int, num_enn_samples: int) -> int:
        """Bytes the KL estimator holds at once (float32): the N x tau test inputs with the
        environment MLP's activations and log-probabilities, made in one call, and the M
        sampler keys (two uint32) handed to each of the N batches."""
        rows = num_test_seeds * self.tau
        floats = rows * (self.input_dim + 2 * sum(self.hidden) + 4 * self.num_classes + 4)
        return 4 * floats + 8 * num_test_seeds * num_enn_samples + 8 * num_enn_samples


# The environment's functions are jitted once per shape, with the MLP's parameters and the
# temperature as arguments: problems of a sweep share the compiled code (a closure over each
# problem's parameters would compile again for every problem).


@functools.cache
def environment_net(input_dim: int, num_classes: int, hidden: tuple[int, ...]):
    """The generator MLP's Haiku transform (one object per architecture: a static jit arg)."""
    return make_random_mlp(input_dim, num_classes, hidden)


@functools.partial(jax.jit, static_argnums=0)
def environment_logits(net, params, temperature, x: jax.Array) -> jax.Array:
    """logits / temperature of the environment MLP `params` at x [n, d]."""
    return net.apply(params, x) / temperature


@functools.partial(jax.jit, static_argnums=(0, 4, 5, 6, 7))
def environment_batches(net, params, temperature, keys, tau, input_dim, design, kappa):
    """One test batch per key of keys [N]: x [N, tau, d], labels y [N, tau] drawn from the
    environment, and log p(y | x) [N]; batch i from (x_key, y_key) = split(keys[i])."""

    def one_batch(k):
        x_key, y_key = jax.random.split(k)
        if design == "gaussian":
            x = gaussian_inputs(x_key, 1, tau, input_dim)[0]
        else:
            x = polyadic_gaussian_inputs(x_key, 1, tau, input_dim, kappa)[0]
        probs = jax.nn.softmax(net.apply(params, x) / temperature)
        y = sample_labels(y_key, probs)
        return x, y, labels_log_likelihood(probs, y)

    return jax.vmap(one_batch)(keys)


def environment_test_batches(
    net, params, temperature, key, num_batches, tau, input_dim, design, kappa
):
    """N test batches from the keys split(key, N) (see `environment_batches`)."""
    keys = jax.random.split(key, num_batches)
    return environment_batches(net, params, temperature, keys, tau, input_dim, design, kappa)


def training_key(settings: dict, scheme: str = "nt") -> str:
    """What decides a problem's environment and training data (not tau, not how it is
    scored): problems with one key give the same training data. `scheme` names how the
    keys are derived from the seed (today's sweeps, or the 2021 one)."""
    hidden = "-".join(str(h) for h in settings.get("hidden", (50, 50)))
    return (
        f"classification[{scheme}]/d{settings['input_dim']}/n{settings['num_train']}"
        f"/T{settings['temperature']}/C{settings.get('num_classes', 2)}/h{hidden}"
        f"/seed{settings['seed']}"
    )


class ClassificationProblem(EvidenceScoring):
    """A seeded random-MLP classification problem scored by marginal or joint KL.

    Problems with one `training_key` (a sweep's tau = 1 and tau = 10 problems of one seed)
    give the same environment and training data: any agent trains once for them."""

    offers = frozenset({"sampler", "label_batches", "labelled_inputs"})
    metrics = ("joint_kl", "accuracy")
    key_scheme = "nt"
    training_shared_by = SHARED_BY_ANY

    @property
    def training_key(self) -> str:
        return training_key(dataclasses.asdict(self.settings), self.key_scheme)

    def __init__(self, settings: ClassificationSettings):
        self.settings = s = settings
        self._net = environment_net(s.input_dim, s.num_classes, tuple(s.hidden))
        self._temperature = jnp.float32(s.temperature)
        with reference_stream():
            env_key, (x_key, y_key), self._estimator_key = self.instance_keys()
            self._params = self._net.init(env_key, jnp.zeros((1, s.input_dim)))
            x = jax.random.normal(x_key, (s.num_train, s.input_dim))
            y = self._labels(y_key, x)
        self.train_data = Data(x=np.asarray(x), y=np.asarray(y))

    def instance_keys(self) -> tuple[jax.Array, tuple[jax.Array, jax.Array], jax.Array]:
        """(environment MLP key, (training x key, training y key), KL estimator key): the
        reference's keys in order from `hk.PRNGSequence(seed)`; the data sampler's own
        sequence starts with the training data's key, split into x and y keys."""
        env_key, data_key, estimator_key = key_sequence(self.settings.seed, 3)
        return env_key, tuple(jax.random.split(key_sequence(data_key, 1)[0])), estimator_key

    def logit_fn(self, x: jax.Array) -> jax.Array:
        """The environment: x [n, d] -> logits [n, C] (divided by the temperature)."""
        return environment_logits(self._net, self._params, self._temperature, x)

    def _labels(self, key: jax.Array, x: jax.Array) -> jax.Array:
        if x.shape[0] == 0:
            return jnp.zeros((0,), jnp.int32)
        return sample_labels(key, jax.nn.softmax(self.logit_fn(x)))

    @cached_property
    def prior_knowledge(self) -> PriorKnowledge:
        s = self.settings
        return PriorKnowledge.of_settings(
            s, num_classes=s.num_classes, temperature=s.temperature, layers=len(s.hidden)
        )

    def oracle_predictive(self):
        """The environment as a (deterministic) sampler: its KL is 0."""
        return lambda x, key: self.logit_fn(x)

    def test_batches(self, key: jax.Array, num_batches: int, tau: int):
        """N test batches: x [N, tau, d], y [N, tau] and the environment's log p(y | x) [N]."""
        s = self.settings
        with reference_stream():
            return environment_test_batches(
                self._net, self._params, self._temperature, key,
                num_batches, tau, s.input_dim, s.test_design, s.kappa,
            )  # fmt: skip

    def estimator_batches(self) -> TestBatches:
        """The KL estimator's N test batches and M sampler keys (and, above the Monte-Carlo
        limit of tau, the random-partition key): the Neural Testbed's key order."""
        s = self.settings
        with reference_stream():
            kl_key, keys = estimator_keys(self._estimator_key, s.num_enn_samples)
            x, y, env_ll = self.test_batches(kl_key, s.num_test_seeds, s.tau)
            partition = None if s.tau <= s.max_tau_monte_carlo else jax.random.fold_in(kl_key, 1)
        return TestBatches(x, y, keys, env_ll, partition, s.num_classes)

    def labelled_inputs(self, num_enn_samples: int = 100) -> LabelledInputs:
        """Test inputs (about 1000) and the training data, scored by the mean predictive
        over M = 100 functions (as the reference: batches and keys from PRNGKey(0))."""
        s = self.settings
        num_batches = 1000 // s.tau + 1
        with reference_stream():
            batch_key, sampler_key = jax.random.split(jax.random.PRNGKey(0))
            x, y, _ = self.test_batches(batch_key, num_batches, s.tau)
            keys = sample_keys(sampler_key, num_enn_samples)
        test = (x.reshape(-1, s.input_dim), y.reshape(-1))
        return LabelledInputs({"test": test, "train": self.train_data}, keys, s.num_classes)

    def evidence(self, sampler) -> Evidence:
        return Evidence(
            {
                "sampler": lambda _: sampler,
                "label_batches": lambda _: self.estimator_batches(),
                "labelled_inputs": lambda _: self.labelled_inputs(),
            }
        )


# Sweeps: grids and id -> settings maps exactly as the Neural Testbed's leaderboard.
TAUS = (1, 10)
TEMPERATURES = (0.01, 0.1, 0.5)
NUM_TRAIN_2D = (1, 3, 10, 30, 100, 300, 1000)
INPUT_DIMS = (2, 10, 100)
DATA_RATIOS = (1, 10, 100, 1000)


def classification_2d_grid(num_seed: int = 10) -> list[dict]:
    """tau x num_train x temperature x seeds (seed restarts at 1 for each tau)."""
    out = []
    for tau in TAUS:
        cells = itertools.product(NUM_TRAIN_2D, TEMPERATURES, range(num_seed))
        for j, (n, t, _) in enumerate(cells):
            out.append(dict(input_dim=2, num_train=n, temperature=t, tau=tau, seed=j + 1))
    return out


def classification_grid(num_seed: int = 5) -> list[dict]:
    """tau x input_dim x data_ratio x temperature x seeds, dyadic test inputs."""
    out = []
    for tau in TAUS:
        cells = itertools.product(INPUT_DIMS, DATA_RATIOS, TEMPERATURES, range(num_seed))
        for j, (d, r, t, _) in enumerate(cells):
            out.append(
                dict(
                    input_dim=d,
                    num_train=r * d,
                    temperature=t,
                    tau=tau,
                    seed=j + 1,
                    test_design="dyadic",
                )
            )
    return out


SWEEP_SETTINGS = {
    "classification_2d": classification_2d_grid(),
    "classification": classification_grid(),
    # the reference's test sweeps: the one-seed grid filtered to T = 0.01, tau = 1 (d = 2)
    "classification_2d_test": [
        s for s in classification_2d_grid(1) if s["temperature"] == 0.01 and s["tau"] == 1
    ],
    "classification_test": [
        s
        for s in classification_grid(1)
        if s["temperature"] == 0.01 and s["tau"] == 1 and s["input_dim"] == 2
    ],
}


def register_classification(
    name: str,
    table: list[dict],
    problem_cls: type[ClassificationProblem] = ClassificationProblem,
    what: str = "Neural Testbed random-MLP classification",
) -> None:
    """Registers the family and the sweep `name`: id `name/i` is row i of `table`; problems
    of one training key (its tau pairs) share a training, for any agent."""
    register_table(
        name,
        table,
        ClassificationSettings,
        problem_cls,
        what,
        options=("num_test_seeds", "num_enn_samples"),
        prediction="labels",
        training_key=functools.partial(training_key, scheme=problem_cls.key_scheme),
        training_shared_by=SHARED_BY_ANY,
        ranked_by=dataclasses.replace(JOINT_KL, shipped="neural_testbed"),
    )


for _name, _table in SWEEP_SETTINGS.items():
    register_classification(_name, _table)


@register_sweep("classification_2d_quick")
def quick_ids() -> list[str]:
    """A quick look at the headline: one seed per training size at T = 0.01, each at tau = 1
    and tau = 10 (14 problems of `classification_2d`, 7 trainings: each pair shares one)."""
    first = [30 * k for k in range(len(NUM_TRAIN_2D))]
    return [f"classification_2d/{j + half}" for j in first for half in (0, 210)]
