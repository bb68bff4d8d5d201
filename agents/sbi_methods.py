"""How each neural SBI method (`agents.sbi_agents`) builds sbi's inference object and
network, trains a round and turns the estimator into a posterior and a predictive.

sbi is imported inside the methods (its import costs seconds).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from agents.sbi_configs import (
    BNREConfig,
    FMPEConfig,
    MCMCConfig,
    NLEConfig,
    NPEConfig,
    NPSEConfig,
    NRECConfig,
    NREConfig,
    TrainingConfig,
    VectorFieldConfig,
)
from agents.sbi_torch import SbiDensity, SbiFlow, SbiMCMC, SbiSamples
from testbed.posterior_adapter import batches_mcmc_over_x

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
