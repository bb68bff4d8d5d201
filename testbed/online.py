"""An agent as it learns one observation at a time: what a bandit's Thompson sampler needs.

A network agent that can learn online (declared in its registry entry: `learns="online"`)
gives an `OnlineLearner`: its state (parameters, optimiser state, fixed arrays such as
prior networks), a pure `step` that takes one SGD step on a replay batch, and a pure
`sample_logits` that evaluates one sampled function of its predictive. Both functions are
module-level (cached per structure), so the whole decision loop compiles once per agent
structure and is reused across bandit seeds. Any other agent is refit on the data seen so
far (`learns="refit"`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax

ONLINE = "online"  # SGD steps on replay batches between actions, state carried across steps
REFIT = "refit"  # trained again from scratch on the data seen so far, every k steps
LEARNS = (ONLINE, REFIT)


class ReplayBatch(NamedTuple):
    """A batch drawn from the replay: actions x [b, d], rewards y [b] (int32 labels 0/1)
    and their replay slots [b] (what per-example bootstrap weights are indexed by)."""

    x: jax.Array
    y: jax.Array
    index: jax.Array


class OnlineLearner(NamedTuple):
    """`state`: a pytree of arrays; `step(state, batch, key, t) -> state`: one SGD step on a
    `ReplayBatch` after t >= 1 observations (the prior's weight decays as 1 / t);
    `sample_logits(state, x [n, d], key) -> logits [n, C]`: one key, one function."""

    state: Any
    step: Callable[[Any, ReplayBatch, jax.Array, jax.Array], Any]
    sample_logits: Callable[[Any, jax.Array, jax.Array], jax.Array]


@runtime_checkable
class LearnsOnline(Protocol):
    """An agent that can learn online: `online_learner(prior_knowledge, key)` builds its
    learner with initial parameters drawn from `key` (mixed with the agent's own seed)."""

    def online_learner(self, prior_knowledge: Any, key: jax.Array) -> OnlineLearner: ...


def learns(agent: Any) -> str:
    """How `agent` learns in a decision loop: what it declares (`learns`), else `online`
    when it offers `online_learner`, else `refit`."""
    declared = getattr(agent, "learns", None)
    if isinstance(declared, str) and declared in LEARNS:
        return declared
    return ONLINE if isinstance(agent, LearnsOnline) else REFIT


@runtime_checkable
class Interactive(Protocol):
    """A problem the agent acts in (a bandit): `interact(agent)` runs it and returns what
    `evaluate` scores, in place of training on data and scoring a predictive."""

    def interact(self, agent: Any) -> Any: ...
