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

Here: the rounds of simulation and training, and the registrations; the configs are in
`agents.sbi_configs`, how each method builds and trains sbi's objects in `agents.sbi_methods`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from agents.registry import register
from agents.sbi_checkpoint import TrainingCheckpoint, resumable
from agents.sbi_configs import (
    BNREConfig,
    FMPEConfig,
    NLEConfig,
    NPEConfig,
    NPSEConfig,
    NRECConfig,
    NREConfig,
    SBNREConfig,
    SNLEConfig,
    SNPEConfig,
    SNRECConfig,
    SNREConfig,
    TrainingConfig,
)
from agents.sbi_methods import (
    BNRE_METHOD,
    FMPE_METHOD,
    NLE_METHOD,
    NPE_METHOD,
    NPSE_METHOD,
    NRE_METHOD,
    NREC_METHOD,
    Method,
    set_embedding,
)
from agents.sbi_progress import TrainingProgress
from agents.sbi_torch import NullTracker, make_torch_prior, make_torch_simulator
from testbed.base import POSTERIOR
from testbed.checkpoints import checkpoint_dir, checkpoint_path
from testbed.errors import InputError
from testbed.simulation import SimulationAccess, SimulatorKnowledge, check_access

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
