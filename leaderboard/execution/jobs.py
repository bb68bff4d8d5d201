"""Jobs, from a sweep's expansion to the store: `Job`, `JobGroup`, `JobResult`.

A `Job` is one (agent, config, problem id, seed[, problem options]); its key is
`config_key/problem_id/seed` (plus a hash of the problem options when there are any),
where `config_key` hashes the agent name and its config *without* the seed, so the same
hyper-parameters under several seeds share a config key (what "best config per agent"
groups on). A `JobGroup` is jobs one training serves (`training_groups`); an executor
runs a `Job` or a `JobGroup` as one unit and gives back one `JobResult` per job, which
the store records.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from leaderboard.agent_fit import problem_class
from leaderboard.execution.seeds import AgentSeeds, parse_seeds  # noqa: F401  (parse_seeds: named here too)
from testbed.errors import InputError, bad_value

log = logging.getLogger("testbed.sweep")


def config_key(agent: str, config: Mapping[str, Any]) -> str:
    """A stable hash of (agent name, config without its seed): `Job.config_key`'s."""
    return Job(agent, config_json(config), "").config_key


def config_json(config: Mapping[str, Any]) -> str:
    """A config as a job holds it: sorted JSON, without its seed (seeds are the job's)."""
    return json.dumps({k: v for k, v in config.items() if k != "seed"}, sort_keys=True)


def options_json(options: Mapping[str, Any] | None) -> str:
    """Problem options as a job holds them: sorted JSON, "" for none."""
    return json.dumps(dict(options), sort_keys=True) if options else ""


@dataclasses.dataclass(frozen=True)
class Job:
    """One unit of work: train `agent` with `config` (and `seed`) on `problem_id`, loaded
    with the problem `options` (evaluation sizes and the like; none by default)."""

    agent: str
    config_json: str  # the config without its seed, as sorted JSON (hashable, stable)
    problem_id: str
    seed: int = 0
    options_json: str = ""  # problem options as sorted JSON; "" for none

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(self.config_json)

    @property
    def options(self) -> dict[str, Any]:
        return json.loads(self.options_json) if self.options_json else {}

    @property
    def config_key(self) -> str:
        """A hash of the agent name and the config JSON the job holds: the text is
        `json.dumps({"agent": agent, "config": config}, sort_keys=True)`, built from the
        JSON without parsing it again (a sweep computes a million of these)."""
        text = f'{{"agent": {json.dumps(self.agent)}, "config": {self.config_json}}}'
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def key(self) -> str:
        key = f"{self.config_key}/{self.problem_id}/{self.seed}"
        if not self.options_json:  # the keys of jobs without options never change
            return key
        return f"{key}/{hashlib.sha256(self.options_json.encode()).hexdigest()[:8]}"

    @property
    def jobs(self) -> tuple[Job, ...]:
        """The jobs of this unit of work: itself (as `JobGroup.jobs`)."""
        return (self,)

    def as_dict(self) -> dict[str, Any]:
        """The job's fields as a stored row has them."""
        row = {
            "key": self.key,
            "agent": self.agent,
            "config": self.config,
            "config_key": self.config_key,
            "problem_id": self.problem_id,
            "seed": self.seed,
        }
        if self.options_json:
            row["problem_options"] = self.options
        return row

    @classmethod
    def make(
        cls,
        agent: str,
        config: Mapping[str, Any],
        problem_id: str,
        seed: int = 0,
        options: Mapping[str, Any] | None = None,
    ) -> Job:
        return cls(agent, config_json(config), problem_id, int(seed), options_json(options))


@dataclasses.dataclass(frozen=True)
class JobGroup:
    """Jobs one training serves: one agent config and seed on problems of one training
    key. An executor runs it as one unit (its time limit: the timeout per job)."""

    jobs: tuple[Job, ...]

    @property
    def key(self) -> str:
        return f"{self.jobs[0].key} (+{len(self.jobs) - 1} sharing its training)"


Unit = Job | JobGroup  # what an executor runs


@dataclasses.dataclass
class JobResult:
    """What a job gave: `ok` with its metrics, or `failed` with the reason (one line) and
    the end of a traceback; the seconds from its start to its result; the versions and
    host it ran with."""

    job: Job
    status: str = "ok"
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    error: str | None = None
    traceback: str | None = None
    wall_seconds: float = math.nan
    versions: dict[str, str] = dataclasses.field(default_factory=dict)
    host: str = dataclasses.field(default_factory=socket.gethostname)

    @property
    def key(self) -> str:
        return self.job.key

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def row(self) -> dict[str, Any]:
        """The row the results store records; the problem options, part of what the
        result was made with, go with the versions (`problem_options`)."""
        made_with = dict(self.versions)
        if self.job.options_json:
            made_with["problem_options"] = self.job.options
        return {
            **self.job.as_dict(),
            "status": self.status,
            "metrics": dict(self.metrics),
            "error": self.error,
            "traceback": self.traceback,
            "wall_seconds": self.wall_seconds,
            "versions": made_with,
            "host": self.host,
        }

    @classmethod
    def failed(
        cls, job: Job, reason: str, seconds: float = math.nan, traceback: str | None = None
    ) -> JobResult:
        return cls(job, "failed", error=reason, traceback=traceback, wall_seconds=seconds)


def failed_results(
    unit: Unit, reason: str, seconds: float = math.nan, traceback: str | None = None
) -> list[JobResult]:
    """Each job of `unit` failed for `reason` (a timeout, a dead worker), with `traceback`
    (the worker's stack when it was stopped, or why there is none)."""
    return [JobResult.failed(job, reason, seconds, traceback) for job in unit.jobs]


def time_limit(unit: Unit, seconds: float | None) -> float | None:
    """A unit's time limit: `seconds` per job."""
    return None if seconds is None else seconds * len(unit.jobs)


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


def expand(
    agent_names: Iterable[str],
    problem_ids: Sequence[str],
    *,
    seeds: AgentSeeds | Sequence[int] = (0,),
    overrides: Mapping[str, Any] | None = None,
    configs: str = "default",
    problem_options: Mapping[str, Any] | None = None,
) -> list[Job]:
    """Jobs for every (agent config, problem id, seed), in a stable order without repeats.
    `seeds`: parsed (`leaderboard.execution.seeds.AgentSeeds`, as a sweep passes them) or
    as given.

    `configs='default'` (as the command line) runs each agent's default config;
    `configs='sweep'` its whole hyper-parameter sweep (`agents.sweep(name)`).
    `problem_options` (checked by the caller, as `generative.load` checks them) go with
    every job: its problem is loaded with them, and they are part of its key.

    Checks up front that each agent exists, so a typo fails before any job runs. An agent
    whose results do not depend on a seed (`agents.registry.takes_seed`: no `seed` field,
    or one marked unused, as uniform's) runs seed 0 only, whatever `seeds` are (a warning
    says so). An override applies to the agents whose
    config has that field (`uniform,mlp --set num_batches=500` sets mlp's); a key no agent
    has is refused. A `seed` override is refused: a job's seed comes from `seeds` (it is
    part of the job key, not of the config). Last, the data of every problem must be at
    hand (`generative.require_data`: real datasets prepared, data files readable).
    """
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
    import agents
    from testbed.names import unused_override

    seeds = AgentSeeds.parse(seeds).values()  # parsed once when a sweep passes them parsed
    overrides = dict(overrides or {})
    entries = {n: agents.AGENTS.get(n) for n in agent_names}  # each name looked up once
    fields = {n: {f.name for f in dataclasses.fields(e.config_cls)} for n, e in entries.items()}
    if error := unused_override(fields, overrides):  # a typo (the index says it alike)
        raise InputError(error)
    jobs: dict[str, Job] = {}
    options = options_json(problem_options)  # made once, as each config's JSON below
    for name in agent_names:
        own_seeds = seeds
        if seeds != [0] and not agents.registry.takes_seed(name):  # seed 0's results again
            why = (
                "its config has no 'seed'"
                if "seed" not in fields[name]
                else "nothing in it is random"
            )
            log.warning(
                "seeds: agent %s runs seed 0 only, not %s (%s: its results are the same at "
                "every seed)", name, ", ".join(str(s) for s in seeds if s != 0), why,
            )  # fmt: skip
            own_seeds = [0]
        own = {k: v for k, v in overrides.items() if k in fields[name]}
        for config in agent_configs(name, own, configs=configs):
            body = config_json(config)
            for pid in problem_ids:
                for seed in own_seeds:
                    job = Job(name, body, pid, int(seed), options)
                    jobs.setdefault(job.key, job)
    check_fit({n: e.predicts for n, e in entries.items()}, problem_ids)
    import generative  # no job starts when a dataset is missing (one error naming them all)

    generative.require_data(problem_ids)
    return list(jobs.values())


def check_fit(predicts: Mapping[str, Sequence[str]], problem_ids: Sequence[str]) -> None:
    """Refuses, before any job, an agent that predicts another kind than a problem family
    needs, from what agents declare (`predicts`: agent name -> its entry's `predicts`) and
    families declare (no agent or problem is built). Agents and families that declare
    nothing are not checked; for one problem the message is `testbed.evaluate.check_fit`'s."""
    import agents
    from generative.registry import split_id
    from testbed.base import PREDICTIONS, predictions_in_words

    families: dict[str, tuple[Any, list[str]]] = {}
    for pid in problem_ids:
        family = split_id(pid)[0]
        families.setdefault(family.name, (family, []))[1].append(pid)
    for name, kinds in predicts.items():
        for family, ids in families.values():
            need = family.prediction
            if not kinds or need is None or need in kinds:
                continue
            shown = ", ".join(ids) if len(ids) <= 3 else f"{ids[0]}, ..., {ids[-1]}"
            where = (
                f"problem {ids[0]} needs"
                if len(ids) == 1
                else f"{len(ids)} problems of family {family.name} ({shown}) need"
            )
            fits = agents.fitting(need, problem_class(family, ids[0]))
            raise InputError(
                f"agent {name} predicts {predictions_in_words(kinds)}; {where} "
                f"{PREDICTIONS[need]}; agents that fit: {', '.join(fits) or '(none registered)'}"
            )


def sweep_jobs(
    agent_names: Iterable[str],
    sweep: str,
    *,
    seeds: Sequence[int] = (0,),
    overrides: Mapping[str, Any] | None = None,
    configs: str = "default",
    problem_options: Mapping[str, Any] | None = None,
) -> list[Job]:
    """`expand` over the problem ids of the registered sweep `sweep`."""
    import generative

    return expand(
        agent_names, generative.sweep_ids(sweep), seeds=seeds, overrides=overrides,
        configs=configs, problem_options=problem_options,
    )  # fmt: skip


def training_groups(jobs: Sequence[Job]) -> list[Job | JobGroup]:
    """`jobs` in order, with the jobs one training serves gathered where the first of them
    stands, by the rule `testbed.evaluate.training_groups` applies to problems
    (`testbed.base.group_by_training`): an agent config and seed on problems of one
    training key that the agent may share (every agent but an oracle when the family says
    the problems differ only in scoring, e.g. the Neural Testbed's tau pairs; amortized
    agents otherwise, e.g. the SBI benchmark's observations of one task and budget). Read
    from what agents and families declare: no agent or problem is built."""
    import agents
    from generative.registry import training_of
    from testbed.base import TRAINS_ON_DATA, group_by_training, may_share_training

    by_entry: dict[tuple[str, str, int, str], list[int]] = {}
    for i, job in enumerate(jobs):
        by_entry.setdefault((job.agent, job.config_json, job.seed, job.options_json), []).append(i)
    unit_of: dict[int, list[int]] = {}
    for (agent, config, _, _), indices in by_entry.items():
        try:  # an unknown agent or a bad config shares what every agent may (its jobs fail)
            depends_on = agents.load(agent, **json.loads(config)).trains_on
        except Exception:
            depends_on = TRAINS_ON_DATA
        keys = []
        for i in indices:  # the training key that config may share there, or None
            try:
                training = training_of(jobs[i].problem_id)
            except Exception:  # an unknown id shares nothing (its job fails)
                keys.append(None)
                continue
            shared = may_share_training(depends_on, training.shared_by)
            keys.append(training.key if shared else None)
        for members in group_by_training(keys):
            unit = [indices[m] for m in members]
            unit_of[unit[0]] = unit
    out: list[Job | JobGroup] = []
    for first in sorted(unit_of):
        unit = unit_of[first]
        out.append(jobs[first] if len(unit) == 1 else JobGroup(tuple(jobs[i] for i in unit)))
    return out
