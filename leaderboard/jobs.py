"""Jobs: one (agent name, agent config, problem id, seed) each, with a stable key.

A sweep expands an agent's hyper-parameter sweep (or one config) over a problem sweep
and a list of agent seeds. The key is `config_key/problem_id/seed`, where `config_key`
hashes the agent name and its config *without* the seed, so the same hyper-parameters
under several seeds share a config key (what "best config per agent" groups on).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from testbed.errors import InputError, bad_value

log = logging.getLogger("testbed.sweep")


def config_key(agent: str, config: Mapping[str, Any]) -> str:
    """A stable hash of (agent name, config without its seed)."""
    body = {k: v for k, v in config.items() if k != "seed"}
    text = json.dumps({"agent": agent, "config": body}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Job:
    """One unit of work: train `agent` with `config` (and `seed`) on `problem_id`."""

    agent: str
    config_json: str  # the config without its seed, as sorted JSON (hashable, stable)
    problem_id: str
    seed: int = 0

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(self.config_json)

    @property
    def config_key(self) -> str:
        return config_key(self.agent, self.config)

    @property
    def key(self) -> str:
        return f"{self.config_key}/{self.problem_id}/{self.seed}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "agent": self.agent,
            "config": self.config,
            "config_key": self.config_key,
            "problem_id": self.problem_id,
            "seed": self.seed,
        }

    @classmethod
    def make(cls, agent: str, config: Mapping[str, Any], problem_id: str, seed: int = 0) -> Job:
        body = {k: v for k, v in config.items() if k != "seed"}
        return cls(agent, json.dumps(body, sort_keys=True), problem_id, int(seed))


def agent_configs(
    agent: str, overrides: Mapping[str, Any] | None = None, *, configs: str = "default"
) -> list[dict[str, Any]]:
    """The agent's configs as dicts: its default (`configs='default'`, as the command
    line's `--configs default`) or its whole hyper-parameter sweep (`'sweep'`), with
    `overrides` applied to each. Configs the overrides make alike are kept once (said in a
    warning: the sweep is smaller than asked)."""
    import agents
    from testbed.config import config_as_dict, with_overrides

    if configs not in ("sweep", "default"):
        raise bad_value("configs", configs, ["sweep", "default"])
    if configs == "default":
        return [agents.load(agent, **(overrides or {})).config_dict()]
    sweep = agents.sweep(agent)
    where = f"agent {agent}"
    out = [config_as_dict(with_overrides(c.config, overrides or {}, where=where)) for c in sweep]
    distinct = _distinct(out)
    if len(distinct) < len(_distinct([c.config_dict() for c in sweep])):
        said = " ".join(f"{k}={v}" for k, v in (overrides or {}).items())
        log.warning(
            "the %d configs of %s's sweep are %d distinct after --set %s",
            len(out), agent, len(distinct), said,
        )  # fmt: skip
    return distinct


def _distinct(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`configs` without repeats, in order (a sweep may list a config twice, as the
    reference's mlp sweep does: one job runs it)."""
    return list({json.dumps(c, sort_keys=True, default=str): c for c in configs}.values())


def parse_seeds(text: str | Sequence[int]) -> list[int]:
    """Agent seeds from `0,1,2`, `0-4` (inclusive) or a list of integers."""
    if not isinstance(text, str):
        given = list(text)
        if not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0
                   for s in given):  # fmt: skip
            raise bad_value("seeds", given, "integers >= 0")
        return list(dict.fromkeys(int(s) for s in given))
    seeds: list[int] = []
    try:
        for part in [p.strip() for p in text.split(",") if p.strip()]:
            lo, _, hi = part.partition("-")
            seeds.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    except ValueError:
        seeds = []
    if not seeds:
        raise bad_value("seeds", text, "integers >= 0 like 0,1,2 or a range like 0-4")
    return list(dict.fromkeys(seeds))


def expand(
    agent_names: Iterable[str],
    problem_ids: Sequence[str],
    *,
    seeds: Sequence[int] = (0,),
    overrides: Mapping[str, Any] | None = None,
    configs: str = "default",
) -> list[Job]:
    """Jobs for every (agent config, problem id, seed), in a stable order without repeats.

    `configs='default'` (as the command line) runs each agent's default config;
    `configs='sweep'` its whole hyper-parameter sweep (`agents.sweep(name)`).

    Checks up front that each agent exists and accepts a `seed` when more than seed 0 is
    asked for, so a typo fails before any job runs. An override applies to the agents whose
    config has that field (`uniform,mlp --set num_batches=500` sets mlp's); a key no agent
    has is refused. A `seed` override is refused: a job's seed comes from `seeds` (it is
    part of the job key, not of the config). Last, the data of every problem must be at
    hand (`generative.require_data`: real datasets prepared, data files readable).
    """
    import agents

    agent_names = list(agent_names)
    if not agent_names:
        raise InputError("agent: got no agent name; allowed: one or more registered agents")
    if not problem_ids:
        raise InputError("problem_ids: got none; allowed: one or more problem ids")
    if overrides and "seed" in overrides:
        raise InputError(
            f"set seed: got {overrides['seed']!r}; allowed: agent seeds are given by "
            "--seeds (seeds=...), not --set"
        )
    seeds = parse_seeds(seeds)
    jobs: dict[str, Job] = {}
    fields = {
        n: {f.name for f in dataclasses.fields(agents.AGENTS.get(n).config_cls)}
        for n in agent_names
    }
    unused = sorted(set(overrides or {}) - set().union(*fields.values()))
    if unused:  # a key applies to the agents that have it; one no agent has is a typo
        names = ", ".join(agent_names)
        raise InputError(
            f"set {unused[0]}: no agent among {names} has this field; allowed: "
            + "; ".join(
                f"{n}: {', '.join(sorted(fields[n] - {'seed'})) or '(none)'}" for n in agent_names
            )
        )
    for name in agent_names:
        has_seed = "seed" in fields[name]
        if not has_seed and any(s != 0 for s in seeds):
            raise InputError(
                f"seeds: got {list(seeds)!r} for agent {name}, whose config has no 'seed' "
                "field (nothing to seed); allowed: seed 0 only (--seeds 0), or give the "
                "agent a seed setting"
            )
        own = {k: v for k, v in (overrides or {}).items() if k in fields[name]}
        for config in agent_configs(name, own, configs=configs):
            for pid in problem_ids:
                for seed in seeds:
                    job = Job.make(name, config, pid, seed)
                    jobs.setdefault(job.key, job)
    check_fit(agent_names, problem_ids)
    import generative  # no job starts when a dataset is missing (one error naming them all)

    generative.require_data(problem_ids)
    return list(jobs.values())


def check_fit(agent_names: Iterable[str], problem_ids: Sequence[str]) -> None:
    """Refuses, before any job, an agent that predicts another kind than a problem family
    needs (both as registered: no problem is loaded unless one is refused, to name the
    agents that fit it). Agents and families that declare nothing are not checked; for one
    problem the message is `testbed.evaluate.check_prediction`'s."""
    import agents
    import generative
    from generative.registry import split_id
    from testbed.base import PREDICTIONS
    from testbed.evaluate import check_prediction, say_predictions

    families: dict[str, tuple[Any, list[str]]] = {}
    for pid in problem_ids:
        family = split_id(pid)[0]
        families.setdefault(family.name, (family, []))[1].append(pid)
    for name in agent_names:
        predicts = agents.AGENTS.get(name).predicts
        for family, ids in families.values():
            need = family.prediction
            if not predicts or need is None or need in predicts:
                continue
            first = generative.load(ids[0])
            if len(ids) == 1:
                check_prediction(agents.load(name), first, ids[0])  # raises but for oracles
            shown = ", ".join(ids) if len(ids) <= 3 else f"{ids[0]}, ..., {ids[-1]}"
            where = (
                f"problem {ids[0]} needs"
                if len(ids) == 1
                else f"{len(ids)} problems of family {family.name} ({shown}) need"
            )
            fits = agents.fitting(need, first)
            raise InputError(
                f"agent {name} predicts {say_predictions(predicts)}; {where} "
                f"{PREDICTIONS[need]}; agents that fit: {', '.join(fits) or '(none registered)'}"
            )


def sweep_jobs(
    agent_names: Iterable[str],
    sweep: str,
    *,
    seeds: Sequence[int] = (0,),
    overrides: Mapping[str, Any] | None = None,
    configs: str = "default",
) -> list[Job]:
    """`expand` over the problem ids of the registered sweep `sweep` (its first
    TESTBED_SWEEP_LIMIT ones when that is set: `limited`)."""
    import generative

    ids = limited(generative.sweep_ids(sweep), f"sweep {sweep}")
    return expand(agent_names, ids, seeds=seeds, overrides=overrides, configs=configs)


SWEEP_LIMIT = "TESTBED_SWEEP_LIMIT"


def limited(problem_ids: Sequence[str], what: str) -> list[str]:
    """The first N of `problem_ids` when TESTBED_SWEEP_LIMIT=N is set (a quick trial of a
    long sweep, e.g. the README's commands in the tests), with a warning; else all."""
    text = os.environ.get(SWEEP_LIMIT, "").strip()
    if not text:
        return list(problem_ids)
    if not text.isdigit() or int(text) < 1:
        raise InputError(f"{SWEEP_LIMIT}: got {text!r}; allowed: a positive integer, or unset")
    n = int(text)
    if n < len(problem_ids):
        log.warning(
            "%s=%d: running the first %d of the %d problems of %s",
            SWEEP_LIMIT, n, n, len(problem_ids), what,
        )  # fmt: skip
    return list(problem_ids[:n])


def _may_share(job: Job, by_any: bool) -> bool:
    """Whether the job's agent config may train once for its problem's training key: any
    agent but an oracle when `by_any`, else an amortized one (`testbed.evaluate.may_share`)."""
    import agents
    from testbed.base import Oracle

    try:
        agent = agents.load(job.agent, **job.config)
    except Exception:  # a bad config fails in its worker, with its own message
        return False
    if isinstance(agent, Oracle):
        return False
    return by_any or bool(getattr(agent, "amortized", False))


def training_groups(jobs: Sequence[Job]) -> list[Job | tuple[Job, ...]]:
    """`jobs` in order, with the jobs one training serves gathered where the first of them
    stands: an agent config and seed on problems of one training key, for any agent where
    the family says the problems differ only in scoring (the Neural Testbed's tau pairs),
    for amortized agents otherwise (the SBI benchmark's observations of one task and
    budget). Other jobs stay single."""
    import generative
    from testbed.base import SHARED_BY_ANY

    groups: dict[tuple[str, int, str], list[Job]] = {}
    units: list[Job | list[Job]] = []
    shares: dict[tuple[str, str, bool], bool] = {}
    for job in jobs:
        try:
            key = generative.training_key(job.problem_id)
            by_any = generative.training_shared_by(job.problem_id) == SHARED_BY_ANY
        except Exception:
            key = None
        if key is not None:
            cache = (job.agent, job.config_json, by_any)
            if cache not in shares:
                shares[cache] = _may_share(job, by_any)
            key = key if shares[cache] else None
        if key is None:
            units.append(job)
            continue
        group = groups.setdefault((job.config_key, job.seed, key), [])
        if not group:
            units.append(group)
        group.append(job)
    return [u if isinstance(u, Job) else (u[0] if len(u) == 1 else tuple(u)) for u in units]
