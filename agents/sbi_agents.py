"""Neural SBI agents via the `sbi` package: npe, nle, nre and their 10-round forms, and
sbi 0.27's newer methods: fmpe (flow matching), npse (score-based), nre_c (contrastive
NRE), bnre (balanced NRE), with snre_c / sbnre, their 10-round forms.

Each agent takes a posterior problem's simulation access (prior, budgeted simulator,
observation x_o) and returns a `PosteriorEstimate`. Defaults reproduce the SBI benchmark
(sbibm `algorithms/sbi/{snpe,snle,snre}.py` and the paper's hydra configs): NSF / MAF /
ResNet with 50 hidden features, z-scored theta and x, training batch 10,000 (capped at
the round's simulations), lr 5e-4, 10% validation, stop after 20 epochs, clip 5; NLE /
NRE sample with sbi's vectorized slice sampler (100 chains, thin 10, warm-up 100,
`resample` init from 10,000 candidates) in the prior's unconstrained space, and draw at
several observations in one batched MCMC call (`SbiMCMC.sample_many`, for amortized runs).
The newer methods keep those settings where they apply (the ratio methods all of them,
their own loss settings at sbi's defaults); fmpe / npse use sbi's vector-field network
and batch size (see their configs). sbi trains fmpe / npse on prior simulations only, so
they have no sequential form.

I.i.d. observation sets (`SimulatorKnowledge.num_iid` = n > 1, x_o [n, dim_x]): NLE / NRE
and their variants train on single simulations and condition on the whole set through the
product of likelihoods (sbi's i.i.d. potentials); NPE / FMPE / NPSE train on sets of n
simulations at one theta (each draw counts against the budget: budget // n training sets)
through sbi's permutation-invariant embedding (`set_embedding`). torch and sbi are
imported inside the agent (their import costs seconds).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from agents.registry import register
from agents.sbi_checkpoint import TrainingCheckpoint, resumable
from agents.sbi_progress import TrainingProgress
from agents.sbi_torch import (
    NullTracker,
    SbiDensity,
    SbiFlow,
    SbiMCMC,
    SbiSamples,
    make_torch_prior,
    make_torch_simulator,
)
from testbed.base import POSTERIOR
from testbed.checkpoints import checkpoint_dir, checkpoint_path
from testbed.config import (
    check_at_least,
    check_in_range,
    check_nonnegative,
    check_positive,
    check_sizes,
)
from testbed.errors import InputError, bad_value
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
        check_sizes(self, num_rounds=1, hidden_features=1, training_batch_size=1)
        check_positive("learning_rate", self.learning_rate)
        check_in_range("validation_fraction", self.validation_fraction, 1e-6, 0.5)
        check_sizes(self, stop_after_epochs=1, max_num_epochs=1)
        check_positive("clip_max_norm", self.clip_max_norm)
        check_at_least("torch_threads", self.torch_threads, 0)
        check_nonnegative("seed", self.seed)

    @property
    def amortized(self) -> bool:
        """One round trains on prior simulations only: the posterior serves any x_o."""
        return self.num_rounds == 1


@dataclasses.dataclass(frozen=True)
class NPEConfig(TrainingConfig):
    """NPE (sbi NPE_C): a conditional flow q(theta | x) trained on the simulations.

    On i.i.d. sets of n, a budget makes budget // n examples and the benchmark's batch
    would leave one gradient step an epoch (the flow stays at the prior: gaussian_linear,
    sets of 10 at 100,000 simulations, C2ST 0.98 against 0.76 at sbi's batch): there the
    batch left at its default is sbi's, `SETS_TRAINING_BATCH_SIZE`."""

    density_estimator: Literal["nsf", "maf", "mdn", "made"] = "nsf"
    num_transforms: int = 5
    num_bins: int = 10
    num_atoms: int = 10  # atomic loss of later rounds (SNPE-C)

    def __post_init__(self):
        super().__post_init__()
        check_sizes(self, num_transforms=1, num_bins=1, num_atoms=2)


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
        check_sizes(self, num_chains=1, thin=1, warmup_steps=0, num_candidate_samples=1)

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
class RatioConfig(MCMCConfig):
    """Settings shared by the ratio estimators: sbi's classifier network, sampled by MCMC."""

    classifier: Literal["resnet", "mlp", "linear"] = "resnet"


@dataclasses.dataclass(frozen=True)
class NREConfig(RatioConfig):
    """NRE (sbi NRE_B): a classifier for p(theta, x) / p(theta)p(x), sampled by MCMC."""

    num_atoms: int = 10

    def __post_init__(self):
        super().__post_init__()
        check_at_least("num_atoms", self.num_atoms, 2)


@dataclasses.dataclass(frozen=True)
class NRECConfig(RatioConfig):
    """NRE-C (sbi NRE_C, contrastive NRE; Miller et al. 2022): a classifier telling the
    joint pair from `num_classes` contrasting parameters plus one independently drawn pair,
    sampled by MCMC. The benchmark's NRE settings (ResNet, 50 hidden features, batch 10,000
    capped at the simulations, lr 5e-4, 10% validation, stop after 20 epochs, clip 5, slice
    sampling as for nre); num_classes 5 and gamma 1 are sbi's defaults."""

    num_classes: int = 5
    gamma: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        check_at_least("num_classes", self.num_classes, 1)
        check_positive("gamma", self.gamma)


@dataclasses.dataclass(frozen=True)
class BNREConfig(RatioConfig):
    """BNRE (sbi BNRE, balanced NRE; Delaunoy et al. 2022): NRE-A's binary classifier with a
    balancing penalty (regularization_strength = 100, sbi's default), sampled by MCMC, with
    sbi's training batch of 200: at the benchmark's batch (10,000, capped at the
    simulations: one gradient step an epoch) its balanced loss stops improving within the
    first steps and training ends after about 35 of them, the ratio still flat (on
    two_moons at 1,000 simulations, C2ST 0.99, the draws near the prior). Otherwise the
    benchmark's NRE settings (ResNet, 50 hidden features, lr 5e-4, 10% validation, stop
    after 20 epochs, clip 5, slice sampling as for nre)."""

    training_batch_size: int = 200
    regularization_strength: float = 100.0

    def __post_init__(self):
        super().__post_init__()
        check_positive("regularization_strength", self.regularization_strength)  # sbi's rule


@dataclasses.dataclass(frozen=True)
class VectorFieldConfig(TrainingConfig):
    """Settings shared by fmpe and npse: sbi's vector-field network (an MLP of `num_layers`
    layers of 100 units with a sinusoidal time embedding, z-scored theta and x) trained
    with sbi's batch size for these losses (200: the flow-matching / denoising losses are
    noisy, and the benchmark's 10,000 would give one step an epoch); lr 5e-4, 10%
    validation, stop after 20 epochs, clip 5 as the benchmark. One round only: sbi 0.27
    has no multi-round training for them."""

    hidden_features: int = 100
    num_layers: int = 5
    training_batch_size: int = 200
    vf_estimator: Literal["mlp", "ada_mlp", "transformer"] = "mlp"

    def __post_init__(self):
        super().__post_init__()
        check_at_least("num_layers", self.num_layers, 1)
        if self.num_rounds != 1:
            raise bad_value(
                "num_rounds",
                self.num_rounds,
                "1 (sbi 0.27 trains FMPE and NPSE on prior simulations only: it has no "
                "multi-round training for them)",
            )


@dataclasses.dataclass(frozen=True)
class FMPEConfig(VectorFieldConfig):
    """FMPE (sbi FMPE, flow matching posterior estimation; Dax et al. 2023): a vector field
    trained by flow matching, sampled by solving its ODE (sbi's zuko solver, atol 1e-6,
    rtol 1e-5) from the base Gaussian; draws outside the prior are rejected. Has a
    normalised log_prob (through the ODE). Network and training: `VectorFieldConfig`."""


@dataclasses.dataclass(frozen=True)
class NPSEConfig(VectorFieldConfig):
    """NPSE (sbi NPSE, neural posterior score estimation; Geffner et al. 2023, Sharrock et
    al. 2024): a score network trained by denoising score matching on a variance-exploding
    SDE (sbi's default), sampled by `sampling_steps` = 500 Euler-Maruyama steps of the
    reverse SDE (sbi's defaults; `sample_with='ode'` solves the probability-flow ODE
    instead); draws outside the prior are rejected. Network and training:
    `VectorFieldConfig`."""

    sde_type: Literal["ve", "vp", "subvp"] = "ve"
    sample_with: Literal["sde", "ode"] = "sde"
    sampling_steps: int = 500

    def __post_init__(self):
        super().__post_init__()
        check_at_least("sampling_steps", self.sampling_steps, 2)


@dataclasses.dataclass(frozen=True)
class SequentialConfig:
    """The sequential form of a method (listed first among its bases): 10 rounds, each
    simulating from the last round's posterior at x_o."""

    num_rounds: int = 10


@dataclasses.dataclass(frozen=True)
class SNPEConfig(SequentialConfig, NPEConfig):
    """SNPE-C: NPE over 10 rounds, each simulating from the last round's posterior at x_o."""


@dataclasses.dataclass(frozen=True)
class SNLEConfig(SequentialConfig, NLEConfig):
    """SNLE: NLE over 10 rounds, each simulating from the last round's posterior at x_o."""


@dataclasses.dataclass(frozen=True)
class SNREConfig(SequentialConfig, NREConfig):
    """SNRE-B: NRE over 10 rounds, each simulating from the last round's posterior at x_o."""


@dataclasses.dataclass(frozen=True)
class SNRECConfig(SequentialConfig, NRECConfig):
    """SNRE-C: NRE-C over 10 rounds, each simulating from the last MCMC posterior at x_o
    (sbi trains ratio estimators on later rounds without a correction)."""


@dataclasses.dataclass(frozen=True)
class SBNREConfig(SequentialConfig, BNREConfig):
    """SBNRE: BNRE over 10 rounds, each simulating from the last MCMC posterior at x_o."""


# ----- the shared training loop -----


def round_sizes(budget: int, num_rounds: int, set_size: int = 1) -> list[int]:
    """Training examples per round: floor(budget / set_size / num_rounds) each (sbibm's
    split; an example is a set of `set_size` simulations for set-embedding agents)."""
    examples = budget // set_size
    per_round = math.floor(examples / num_rounds)
    if per_round < 2:
        if set_size > 1:
            raise InputError(
                f"num_simulations: a budget of {budget} simulations makes {examples} training "
                f"sets of {set_size} i.i.d. draws in {num_rounds} round(s); allowed: a "
                f"budget of at least {2 * set_size * num_rounds} for sets of {set_size}"
            )
        raise InputError(
            f"num_rounds: got {num_rounds}; allowed: at most budget/2 = {budget // 2} "
            f"rounds for a budget of {budget} simulations"
        )
    return [per_round] * num_rounds


SET_EMBEDDING_DIM = 20  # trial and set features of the permutation-invariant embedding


def set_embedding(dim_x: int, hidden_features: int):
    """sbi's permutation-invariant embedding of a set [batch, n, dim_x]: a 2-layer MLP per
    draw (`hidden_features` units, 20 features), the mean over the set with the set size
    appended, then a 2-layer MLP to 20 features."""
    from sbi.neural_nets.embedding_nets import FCEmbedding, PermutationInvariantEmbedding

    trial = FCEmbedding(
        input_dim=dim_x, output_dim=SET_EMBEDDING_DIM, num_layers=2, num_hiddens=hidden_features
    )
    return PermutationInvariantEmbedding(
        trial,
        trial_net_output_dim=SET_EMBEDDING_DIM,
        aggregation_fn="mean",
        num_hiddens=hidden_features,
        num_layers=2,
        output_dim=SET_EMBEDDING_DIM,
    )


SETS_TRAINING_BATCH_SIZE = 200  # sbi's: NPE's batch on i.i.d. sets (NPEConfig)


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


def _net_kwargs(config: TrainingConfig) -> dict[str, Any]:
    """The network settings every sbi method takes: z-scoring of theta and x, and width."""
    return {
        "z_score_theta": _z(config),
        "z_score_x": _z(config),
        "hidden_features": config.hidden_features,
    }


def _embedding_kwargs(embedding) -> dict[str, Any]:
    """`embedding_net=embedding` when there is one (else sbi's default, the identity)."""
    return {} if embedding is None else {"embedding_net": embedding}


class Method:
    """One neural SBI method: how it builds sbi's inference object, trains a round and
    turns the estimator into a posterior. NPE trains later rounds with the atomic
    (SNPE-C) loss and has a normalised density; NLE / NRE sample by MCMC.

    `set_input`: given an i.i.d. set, the method trains on sets through a permutation-
    invariant embedding (posterior estimators); else it trains on single simulations and
    conditions on the set through the product of likelihoods (likelihood / ratio ones)."""

    set_input = False

    def inference(self, config, torch_prior, tracker, embedding=None): ...

    def train(self, inference, config, theta, x, proposal, first: bool): ...

    def posterior(self, inference, estimator, config): ...

    def predictive(self, posterior, x_o: np.ndarray, shape: tuple[int, ...], config):
        return SbiSamples(posterior, x_o, shape)


class NPEMethod(Method):
    set_input = True

    def inference(self, config: NPEConfig, torch_prior, tracker, embedding=None):
        from sbi.inference import NPE
        from sbi.neural_nets import posterior_nn

        net = posterior_nn(
            config.density_estimator,
            **_net_kwargs(config),
            num_transforms=config.num_transforms,
            num_bins=config.num_bins,
            **_embedding_kwargs(embedding),
        )
        return NPE(
            prior=torch_prior, density_estimator=net, show_progress_bars=True, tracker=tracker
        )

    def train(self, inference, config, theta, x, proposal, first):
        inference.append_simulations(
            theta, x, proposal=None if first else proposal, exclude_invalid_x=True
        )
        if x.ndim == 3 and config.training_batch_size == TrainingConfig.training_batch_size:
            config = dataclasses.replace(config, training_batch_size=SETS_TRAINING_BATCH_SIZE)
        return inference.train(num_atoms=config.num_atoms, **_train_kwargs(config, len(theta)))

    def posterior(self, inference, estimator, config):
        return inference.build_posterior(estimator)

    def predictive(self, posterior, x_o, shape, config):
        net = getattr(posterior.posterior_estimator, "net", None)
        flow = net is not None and hasattr(net, "_transform") and len(shape) == 2
        return (SbiFlow if flow else SbiDensity)(posterior, x_o, shape)


class VectorFieldMethod(Method):
    """FMPE / NPSE: a vector field trained on prior simulations (one round), sampled by
    sbi's ODE / SDE solver; normalised densities through the probability-flow ODE."""

    set_input = True

    def train(self, inference, config, theta, x, proposal, first):
        inference.append_simulations(theta, x, exclude_invalid_x=True)
        return inference.train(**_train_kwargs(config, len(theta)))

    def net_kwargs(self, config: VectorFieldConfig, embedding) -> dict[str, Any]:
        return {
            "model": config.vf_estimator,
            **_net_kwargs(config),
            "num_layers": config.num_layers,
            **_embedding_kwargs(embedding),
        }

    def predictive(self, posterior, x_o, shape, config):
        return SbiDensity(posterior, x_o, shape, sample_kwargs=self.sample_kwargs(config))

    def sample_kwargs(self, config) -> dict[str, Any]:
        return {}


class FMPEMethod(VectorFieldMethod):
    def inference(self, config: FMPEConfig, torch_prior, tracker, embedding=None):
        from sbi.inference import FMPE
        from sbi.neural_nets import posterior_flow_nn

        net = posterior_flow_nn(**self.net_kwargs(config, embedding))
        return FMPE(prior=torch_prior, vf_estimator=net, show_progress_bars=True, tracker=tracker)

    def posterior(self, inference, estimator, config):
        return inference.build_posterior(estimator, sample_with="ode")


class NPSEMethod(VectorFieldMethod):
    def inference(self, config: NPSEConfig, torch_prior, tracker, embedding=None):
        from sbi.inference import NPSE
        from sbi.neural_nets import posterior_score_nn

        net = posterior_score_nn(sde_type=config.sde_type, **self.net_kwargs(config, embedding))
        return NPSE(prior=torch_prior, vf_estimator=net, show_progress_bars=True, tracker=tracker)

    def posterior(self, inference, estimator, config: NPSEConfig):
        return inference.build_posterior(estimator, sample_with=config.sample_with)

    def sample_kwargs(self, config: NPSEConfig) -> dict[str, Any]:
        return {"steps": config.sampling_steps} if config.sample_with == "sde" else {}


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

    def predictive(self, posterior, x_o, shape, config):
        """With sbi's vectorized slice sampler, draws at several observations in one call
        (single observations: sbi batches no i.i.d. sets)."""
        batched = batches_mcmc_over_x(posterior) and shape[0] == 1
        return SbiMCMC(posterior, x_o, shape) if batched else SbiSamples(posterior, x_o, shape)


class NLEMethod(MCMCMethod):
    def inference(self, config: NLEConfig, torch_prior, tracker, embedding=None):
        from sbi.inference import NLE
        from sbi.neural_nets import likelihood_nn

        net = likelihood_nn(config.density_estimator, **_net_kwargs(config))
        return NLE(
            prior=torch_prior, density_estimator=net, show_progress_bars=True, tracker=tracker
        )


class NREMethod(MCMCMethod):
    trainer = "NRE"  # the sbi.inference class: NRE (= NRE_B), NRE_C, BNRE

    def inference(self, config, torch_prior, tracker, embedding=None):
        import sbi.inference
        from sbi.neural_nets import classifier_nn

        net = classifier_nn(config.classifier, **_net_kwargs(config))
        trainer = getattr(sbi.inference, self.trainer)
        return trainer(prior=torch_prior, classifier=net, show_progress_bars=True, tracker=tracker)

    def train_kwargs(self, config: NREConfig, num: int) -> dict[str, Any]:
        return {**_train_kwargs(config, num), "num_atoms": config.num_atoms}


class NRECMethod(NREMethod):
    trainer = "NRE_C"

    def train_kwargs(self, config: NRECConfig, num: int) -> dict[str, Any]:
        extra = {"num_classes": config.num_classes, "gamma": config.gamma}
        return {**_train_kwargs(config, num), **extra}


class BNREMethod(NREMethod):
    trainer = "BNRE"

    def train_kwargs(self, config: BNREConfig, num: int) -> dict[str, Any]:
        extra = {"regularization_strength": config.regularization_strength}
        return {**_train_kwargs(config, num), **extra}


NPE_METHOD, NLE_METHOD, NRE_METHOD = NPEMethod(), NLEMethod(), NREMethod()
FMPE_METHOD, NPSE_METHOD = FMPEMethod(), NPSEMethod()
NREC_METHOD, BNRE_METHOD = NRECMethod(), BNREMethod()


def run_rounds(
    config: TrainingConfig,
    method: Method,
    access: SimulationAccess,
    knowledge: SimulatorKnowledge,
    name: str = "sbi",
):
    """Simulate, train and build the posterior for `num_rounds` rounds; returns a predictive.
    Training reports its progress as `name` (agents.sbi_progress).

    Round r > 1 simulates from the round r-1 posterior at x_o (sequential SBI). With an
    i.i.d. set x_o [n, dim_x] (`knowledge.num_iid` = n > 1), a `set_input` method trains
    on sets of n draws at one theta through `set_embedding` and sees x_o as one set
    [1, n, dim_x]; the others train on single draws and see x_o as n i.i.d. rows.
    """
    import torch

    check_access(access, knowledge)
    n = int(knowledge.num_iid)
    x_o = np.asarray(access.x_o, np.float32).reshape(n, -1)
    dim_x = x_o.shape[1]
    sets = method.set_input and n > 1
    shape = (1, n, dim_x) if sets else (n, dim_x)  # how sbi sees x_o
    sizes = round_sizes(int(access.budget), config.num_rounds, n if sets else 1)
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    torch.manual_seed(config.seed)
    torch_prior = make_torch_prior(access, knowledge)
    simulator = make_torch_simulator(access, knowledge, n if sets else 1)
    x_o_t = torch.as_tensor(x_o.reshape(shape))
    embedding = set_embedding(dim_x, config.hidden_features) if sets else None
    inference = method.inference(config, torch_prior, NullTracker(), embedding)
    proposal = torch_prior
    posterior = None
    on = f"{knowledge.task} (iid{n})" if n > 1 else knowledge.task  # as the leaderboard says
    progress = TrainingProgress(f"{name} on {on}", int(access.budget))
    checkpoint = _checkpoint(config, name, knowledge, int(access.budget), n, sets, progress.say)
    with progress.capture(inference), resumable(inference, checkpoint):
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
    predictive = method.predictive(posterior, x_o, shape, config)
    if checkpoint is not None and checkpoint.earlier_seconds:  # its training ran before too
        predictive.earlier_train_seconds = checkpoint.earlier_seconds
    return predictive


def _checkpoint(
    config: TrainingConfig,
    name: str,
    knowledge: SimulatorKnowledge,
    budget: int,
    n: int,
    sets: bool,
    say: Callable[[str], None],
) -> TrainingCheckpoint | None:
    """The checkpoint of a one-round training where a checkpoint directory is set
    (`agents.sbi_checkpoint`), keyed by what decides the training; it says what it does
    through `say` (the training's progress)."""
    directory = checkpoint_dir()
    if directory is None or config.num_rounds != 1:
        return None
    import sbi
    import torch

    import testbed

    key = (repr(config), budget, n, sets, sbi.__version__, torch.__version__, testbed.__version__)
    return TrainingCheckpoint(checkpoint_path(directory, name, knowledge.task, *key), say=say)


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


@register("fmpe", FMPEConfig, predicts=POSTERIOR)
def make_fmpe(config: FMPEConfig):
    """FMPE via sbi (flow matching; ODE sampling); amortized, has log_prob."""
    return _make(FMPE_METHOD, "fmpe")(config)


@register("npse", NPSEConfig, predicts=POSTERIOR)
def make_npse(config: NPSEConfig):
    """NPSE via sbi (score-based, VE SDE; 500-step reverse-SDE sampling); amortized."""
    return _make(NPSE_METHOD, "npse")(config)


@register("nre_c", NRECConfig, predicts=POSTERIOR)
def make_nre_c(config: NRECConfig):
    """NRE-C via sbi (contrastive ratio estimation, slice-sampling MCMC as nre)."""
    return _make(NREC_METHOD, "nre_c")(config)


@register("snre_c", SNRECConfig, predicts=POSTERIOR)
def make_snre_c(config: SNRECConfig):
    """SNRE-C via sbi: 10 rounds of NRE-C, each from the last MCMC posterior."""
    return _make(NREC_METHOD, "snre_c")(config)


@register("bnre", BNREConfig, predicts=POSTERIOR)
def make_bnre(config: BNREConfig):
    """BNRE via sbi (balanced ratio estimation, slice-sampling MCMC as nre)."""
    return _make(BNRE_METHOD, "bnre")(config)


@register("sbnre", SBNREConfig, predicts=POSTERIOR)
def make_sbnre(config: SBNREConfig):
    """SBNRE via sbi: 10 rounds of BNRE, each from the last MCMC posterior."""
    return _make(BNRE_METHOD, "sbnre")(config)
