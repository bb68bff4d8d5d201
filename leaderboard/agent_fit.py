"""Which agents fit which problems, from what agents and families declare (no agent or
problem is built): read by execution (a sweep refuses an agent that does not fit) and by
ranking (the commands a note suggests name agents that fit). Imports neither side."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def fitting(agent_names: Iterable[str], problem_ids: Sequence[str]) -> list[str]:
    """Those of `agent_names` registered here that fit every family of `problem_ids`: what
    they predict and, for an oracle, what it reads (`agents.fitting`; an agent that declares
    nothing fits). From what agents and families declare: nothing is built."""
    import agents
    from generative.registry import split_id

    families = {}
    for pid in problem_ids:
        family = split_id(pid)[0]
        families.setdefault(family.name, (family, pid))
    out = [n for n in agent_names if n in agents.AGENTS]
    for family, pid in families.values():
        if family.prediction is not None:
            fits = set(agents.fitting(family.prediction, problem_class(family, pid)))
            out = [n for n in out if n in fits or not agents.AGENTS.get(n).predicts]
    return out


def problem_class(family: Any, problem_id: str) -> Any:
    """What `agents.fitting` checks oracles against: the class the family declares it
    builds; a family that does not say has its first problem loaded (a refusal only). An
    id the family refuses is said first, as loading it would."""
    import generative
    from generative.registry import problem_type_of

    generative.problem_settings(problem_id)
    return problem_type_of(family) or generative.load(problem_id)
