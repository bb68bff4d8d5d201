"""Neural SBI agents via the `sbi` package: npe, nle, nre and their 10-round forms.

Each agent takes a posterior problem's simulation access (prior, budgeted simulator,
observation x_o) and returns a `PosteriorEstimate`. Defaults reproduce the SBI benchmark
(sbibm `algorithms/sbi/{snpe,snle,snre}.py` and the paper's hydra configs): NSF / MAF /
ResNet with 50 hidden features, z-scored theta and x, training batch 10,000 (capped at
the round's simulations), lr 5e-4, 10% validation, stop after 20 epochs, clip 5; NLE /
NRE sample with sbi's vectorized slice sampler (100 chains, thin 10, warm-up 100,
`resample` init from 10,000 candidates) in the prior's unconstrained space, and draw at
several observations in one batched MCMC call (`SbiMCMC.sample_many`, for amortized runs).
torch and sbi are imported inside the agent (their import costs seconds).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import numpy as np

from agents.registry import register
from agents.sbi_progress import TrainingProgress
from agents.sbi_torch import (
    NullTracker,
    SbiDensity,
    SbiMCMC,
    SbiSamples,
    make_torch_prior,
    make_torch_simulator,
)
from testbed.base import POSTERIOR
from testbed.config import check_at_least, check_in_range, check_nonnegative, check_positive
from testbed.errors import InputError
from testbed.posterior_adapter import batches_mcmc_over_x
from testbed.simulation import SimulationAccess, SimulatorKnowledge, check_access


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """sbi training settings shared by all neural agents (the benchmark's values)."""

    num_rounds: int = 1
    hidden_features: int = 50
    training_batch_size: int = 10_000
    learning_rate: float = 5e-4
    validation_fraction: float = 0.1
    stop_after_epochs: int = 20
    max_num_epochs: int = 2**31 - 1
    clip_max_norm: float = 5.0
    z_score: bool = True
    torch_threads: int = 0  # 0: leave torch's default
    seed: int = 0

    def __post_init__(self):
        check_at_least("num_rounds", self.num_rounds, 1)
        check_at_least("hidden_features", self.hidden_features, 1)
        check_at_least("training_batch_size", self.training_batch_size, 1)
        check_positive("learning_rate", self.learning_rate)
        check_in_range("validation_fraction", self.validation_fraction, 1e-6, 0.5)
        check_at_least("stop_after_epochs", self.stop_after_epochs, 1)
        check_at_least("max_num_epochs", self.max_num_epochs, 1)
        check_positive("clip_max_norm", self.clip_max_norm)
        check_at_least("torch_threads", self.torch_threads, 0)
        check_nonnegative("seed", self.seed)

    @property
    def amortized(self) -> bool:
        """One round trains on prior simulations only: the posterior serves any x_o."""
        return self.num_rounds == 1


@dataclasses.dataclass(frozen=True)
class NPEConfig(TrainingConfig):
    """NPE (sbi NPE_C): a conditional flow q(theta | x) trained on the simulations."""

    density_estimator: Literal["nsf", "maf", "mdn", "made"] = "nsf"
    num_transforms: int = 5
    num_bins: int = 10
    num_atoms: int = 10  # atomic loss of later rounds (SNPE-C)

    def __post_init__(self):
        super().__post_init__()
        check_at_least("num_transforms", self.num_transforms, 1)
        check_at_least("num_bins", self.num_bins, 1)
        check_at_least("num_atoms", self.num_atoms, 2)


@dataclasses.dataclass(frozen=True)
class MCMCConfig(TrainingConfig):
    """Settings of sbi's slice sampler for likelihood / ratio posteriors (the benchmark's)."""

    mcmc_method: Literal["slice_np_vectorized", "slice_np"] = "slice_np_vectorized"
    num_chains: int = 100
    thin: int = 10
    warmup_steps: int = 100
    init_strategy: Literal["resample", "sir", "proposal"] = "resample"
    num_candidate_samples: int = 10_000

    def __post_init__(self):
        super().__post_init__()
        check_at_least("num_chains", self.num_chains, 1)
        check_at_least("thin", self.thin, 1)
        check_at_least("warmup_steps", self.warmup_steps, 0)
        check_at_least("num_candidate_samples", self.num_candidate_samples, 1)

    def mcmc_parameters(self) -> dict[str, Any]:
        return {
            "num_chains": self.num_chains,
            "thin": self.thin,
            "warmup_steps": self.warmup_steps,
            "init_strategy": self.init_strategy,
            "init_strategy_parameters": {"num_candidate_samples": self.num_candidate_samples},
        }


@dataclasses.dataclass(frozen=True)
class NLEConfig(MCMCConfig):
    """NLE (sbi NLE_A): a conditional flow for p(x | theta), sampled by MCMC."""

    density_estimator: Literal["maf", "nsf", "mdn", "made"] = "maf"


@dataclasses.dataclass(frozen=True)
class NREConfig(MCMCConfig):
    """NRE (sbi NRE_B): a classifier for p(theta, x) / p(theta)p(x), sampled by MCMC."""

    classifier: Literal["resnet", "mlp", "linear"] = "resnet"
    num_atoms: int = 10

    def __post_init__(self):
        super().__post_init__()
        check_at_least("num_atoms", self.num_atoms, 2)


@dataclasses.dataclass(frozen=True)
class SNPEConfig(NPEConfig):
    """SNPE-C: NPE over 10 rounds, each simulating from the last round's posterior at x_o."""

    num_rounds: int = 10


@dataclasses.dataclass(frozen=True)
class SNLEConfig(NLEConfig):
    """SNLE: NLE over 10 rounds, each simulating from the last round's posterior at x_o."""

    num_rounds: int = 10


@dataclasses.dataclass(frozen=True)
class SNREConfig(NREConfig):
    """SNRE-B: NRE over 10 rounds, each simulating from the last round's posterior at x_o."""

    num_rounds: int = 10


# ----- the shared training loop -----


def round_sizes(budget: int, num_rounds: int) -> list[int]:
    """Simulations per round: floor(budget / num_rounds) each (sbibm's split)."""
    per_round = math.floor(budget / num_rounds)
    if per_round < 2:
        raise InputError(
            f"num_rounds: got {num_rounds}; allowed: at most budget/2 = {budget // 2} "
            f"rounds for a budget of {budget} simulations"
        )
    return [per_round] * num_rounds


def _train_kwargs(config: TrainingConfig, num: int) -> dict[str, Any]:
    return {
        "training_batch_size": min(config.training_batch_size, num),
        "learning_rate": config.learning_rate,
        "validation_fraction": config.validation_fraction,
        "stop_after_epochs": config.stop_after_epochs,
        "max_num_epochs": config.max_num_epochs,
        "clip_max_norm": config.clip_max_norm,
    }


def _z(config: TrainingConfig) -> str:
    return "independent" if config.z_score else "none"


class Method:
    """One neural SBI method: how it builds sbi's inference object, trains a round and
    turns the estimator into a posterior. NPE trains later rounds with the atomic
    (SNPE-C) loss and has a normalised density; NLE / NRE sample by MCMC."""

    def inference(self, config, torch_prior, tracker): ...

    def train(self, inference, config, theta, x, proposal, first: bool): ...

    def posterior(self, inference, estimator, config): ...

    def predictive(self, posterior, x_o: np.ndarray):
        return SbiSamples(posterior, x_o)


class NPEMethod(Method):
    def inference(self, config: NPEConfig, torch_prior, tracker):
        from sbi.inference import NPE
        from sbi.neural_nets import posterior_nn

        net = posterior_nn(
            config.density_estimator,
            z_score_theta=_z(config),
            z_score_x=_z(config),
            hidden_features=config.hidden_features,
            num_transforms=config.num_transforms,
            num_bins=config.num_bins,
        )
        return NPE(
            prior=torch_prior, density_estimator=net, show_progress_bars=True, tracker=tracker
        )

    def train(self, inference, config, theta, x, proposal, first):
        inference.append_simulations(
            theta, x, proposal=None if first else proposal, exclude_invalid_x=True
        )
        return inference.train(num_atoms=config.num_atoms, **_train_kwargs(config, len(theta)))

    def posterior(self, inference, estimator, config):
        return inference.build_posterior(estimator)

    def predictive(self, posterior, x_o):
        return SbiDensity(posterior, x_o)


class MCMCMethod(Method):
    """NLE / NRE: the estimator's posterior sampled by sbi's slice sampler."""

    def train(self, inference, config, theta, x, proposal, first):
        # sbi warns on every NRE run given exclude_invalid_x=True ("systematically wrong
        # results"), which holds only when some x is invalid: ask for it only then
        invalid = not bool(np.isfinite(np.asarray(x)).all())
        inference.append_simulations(theta, x, exclude_invalid_x=invalid)
        return inference.train(**self.train_kwargs(config, len(theta)))

    def train_kwargs(self, config, num: int) -> dict[str, Any]:
        return _train_kwargs(config, num)

    def posterior(self, inference, estimator, config: MCMCConfig):
        return inference.build_posterior(
            estimator,
            sample_with="mcmc",
            mcmc_method=config.mcmc_method,
            mcmc_parameters=config.mcmc_parameters(),
        )

    def predictive(self, posterior, x_o):
        """With sbi's vectorized slice sampler, draws at several observations in one call."""
        batched = batches_mcmc_over_x(posterior)
        return SbiMCMC(posterior, x_o) if batched else SbiSamples(posterior, x_o)


class NLEMethod(MCMCMethod):
    def inference(self, config: NLEConfig, torch_prior, tracker):
        from sbi.inference import NLE
        from sbi.neural_nets import likelihood_nn

        net = likelihood_nn(
            config.density_estimator,
            z_score_theta=_z(config),
            z_score_x=_z(config),
            hidden_features=config.hidden_features,
        )
        return NLE(
            prior=torch_prior, density_estimator=net, show_progress_bars=True, tracker=tracker
        )


class NREMethod(MCMCMethod):
    def inference(self, config: NREConfig, torch_prior, tracker):
        from sbi.inference import NRE
        from sbi.neural_nets import classifier_nn

        net = classifier_nn(
            config.classifier,
            z_score_theta=_z(config),
            z_score_x=_z(config),
            hidden_features=config.hidden_features,
        )
        return NRE(prior=torch_prior, classifier=net, show_progress_bars=True, tracker=tracker)

    def train_kwargs(self, config: NREConfig, num: int) -> dict[str, Any]:
        return {**_train_kwargs(config, num), "num_atoms": config.num_atoms}


NPE_METHOD, NLE_METHOD, NRE_METHOD = NPEMethod(), NLEMethod(), NREMethod()


def run_rounds(
    config: TrainingConfig,
    method: Method,
    access: SimulationAccess,
    knowledge: SimulatorKnowledge,
    name: str = "sbi",
):
    """Simulate, train and build the posterior for `num_rounds` rounds; returns a predictive.
    Training reports its progress as `name` (agents.sbi_progress).

    Round r > 1 simulates from the round r-1 posterior at x_o (sequential SBI).
    """
    import torch

    check_access(access, knowledge)
    x_o = np.asarray(access.x_o, np.float32).reshape(1, -1)
    sizes = round_sizes(int(access.budget), config.num_rounds)
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    torch.manual_seed(config.seed)
    torch_prior = make_torch_prior(access, knowledge)
    simulator = make_torch_simulator(access, knowledge)
    x_o_t = torch.as_tensor(x_o)
    inference = method.inference(config, torch_prior, NullTracker())
    proposal = torch_prior
    posterior = None
    progress = TrainingProgress(f"{name} on {knowledge.task}", int(access.budget))
    with progress.capture(inference):
        for r, num in enumerate(sizes):
            progress.begin_round(r + 1, len(sizes), access.num_simulations)
            theta = (
                proposal.sample((num,))
                if r == 0
                else proposal.sample((num,), show_progress_bars=False)
            )
            x = simulator(theta)
            progress.simulations = access.num_simulations
            estimator = method.train(inference, config, theta, x, proposal, first=r == 0)
            posterior = method.posterior(inference, estimator, config)
            posterior.set_default_x(x_o_t)
            proposal = posterior
            progress.end_round(access.num_simulations)
    progress.close()
    return method.predictive(posterior, x_o)


def _make(method: Method, name: str):
    def make(config):
        def agent(access: SimulationAccess, knowledge: SimulatorKnowledge):
            return run_rounds(config, method, access, knowledge, name)

        return agent

    return make


@register("npe", NPEConfig, predicts=POSTERIOR)
def make_npe(config: NPEConfig):
    """NPE via sbi (NSF flow, the SBI benchmark's settings); amortized, has log_prob."""
    return _make(NPE_METHOD, "npe")(config)


@register("snpe", SNPEConfig, predicts=POSTERIOR)
def make_snpe(config: SNPEConfig):
    """SNPE-C via sbi: 10 rounds of NPE with the atomic loss (the benchmark's settings)."""
    return _make(NPE_METHOD, "snpe")(config)


@register("nle", NLEConfig, predicts=POSTERIOR)
def make_nle(config: NLEConfig):
    """NLE via sbi (MAF likelihood, vectorized slice-sampling MCMC as in the benchmark)."""
    return _make(NLE_METHOD, "nle")(config)


@register("snle", SNLEConfig, predicts=POSTERIOR)
def make_snle(config: SNLEConfig):
    """SNLE via sbi: 10 rounds of NLE, each from the last MCMC posterior."""
    return _make(NLE_METHOD, "snle")(config)


@register("nre", NREConfig, predicts=POSTERIOR)
def make_nre(config: NREConfig):
    """NRE-B via sbi (ResNet classifier, vectorized slice-sampling MCMC as in the benchmark)."""
    return _make(NRE_METHOD, "nre")(config)


@register("snre", SNREConfig, predicts=POSTERIOR)
def make_snre(config: SNREConfig):
    """SNRE-B via sbi: 10 rounds of NRE, each from the last MCMC posterior."""
    return _make(NRE_METHOD, "snre")(config)
