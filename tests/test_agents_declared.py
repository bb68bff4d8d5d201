"""Registries that answer without building: what an agent entry and a problem family
declare is enough for job expansion, training groups and kind checks."""

from __future__ import annotations

import dataclasses
import functools

import pytest

import agents
import generative
from agents.registry import AGENTS, ConfiguredOracle
from generative.registry import FAMILIES, problem_type_of, training_of
from leaderboard.execution.jobs import Job, JobGroup, expand, training_groups
from testbed.base import (
    SHARED_BY_AMORTIZED,
    SHARED_BY_ANY,
    TRAINS_ON_DATA,
    TRAINS_ON_PROBLEM,
    TRAINS_ON_SIMULATOR,
    OffersOracle,
    group_by_training,
    may_share_training,
)
from testbed.errors import InputError

PAIR = ["classification_2d/0", "classification_2d/210"]  # tau 1 and 10: one training
SBI = ["sbi/two_moons/1000/1", "sbi/two_moons/1000/2"]  # one task and budget


def _refuse(what: str):
    def refused(*args, **kwargs):
        raise AssertionError(f"{what} was built")

    return refused


@pytest.fixture
def nothing_builds(monkeypatch):
    """Every agent factory, family build and problem loader raises when called (the
    annotations of the builds stay, as a family's declaration of its problem class)."""
    for name, entry in list(AGENTS._entries.items()):
        monkeypatch.setitem(
            AGENTS._entries, name, dataclasses.replace(entry, make=_refuse(f"agent {name}"))
        )
    for name, family in list(FAMILIES._entries.items()):
        build = functools.wraps(family.build)(_refuse(f"a problem of {name}"))
        monkeypatch.setitem(FAMILIES._entries, name, dataclasses.replace(family, build=build))
    monkeypatch.setattr(generative, "load", _refuse("a problem"))
    monkeypatch.setattr(generative.registry, "load", _refuse("a problem"))


def test_expansion_grouping_and_kind_checks_build_nothing(nothing_builds):
    jobs = expand(["oracle", "npe", "snpe"], SBI, seeds=[0, 1], configs="sweep")
    assert {j.agent for j in jobs} == {"oracle", "npe", "snpe"} and len(jobs) == 10
    jobs = expand(["uniform", "oracle", "mlp"], [*PAIR, "coin/0"])
    units = training_groups(jobs)
    shared = [(u.jobs[0].agent, len(u.jobs)) for u in units if isinstance(u, JobGroup)]
    assert shared == [("uniform", 2), ("mlp", 2)]  # the oracle never shares
    sbi = expand(["npe", "oracle"], SBI) + expand(["snpe"], SBI, overrides={"num_rounds": 2})
    units = training_groups(sbi)
    assert [len(u.jobs) for u in units] == [2, 1, 1, 1, 1]  # amortized npe trains once
    assert isinstance(agents.load("oracle"), ConfiguredOracle)
    assert len(agents.sweep("mlp")) > 1 and agents.load("npe").amortized
    sbi_class = problem_type_of(FAMILIES.get("sbi"))
    assert "oracle" in agents.fitting("posterior", sbi_class)
    assert "exact" not in agents.fitting("posterior", sbi_class)
    with pytest.raises(InputError) as err:
        expand(["npe"], ["classification_2d/0"])
    fits = str(err.value).split("agents that fit: ")[1].split(", ")
    assert "oracle" in fits and "exact" not in fits and "npe" not in fits
    with pytest.raises(InputError) as err:
        expand(["uniform"], ["conjugate/beta_binomial/1"])
    fits = str(err.value).split("agents that fit: ")[1].split(", ")
    assert "exact" in fits and "oracle" not in fits


def test_a_sweeps_groups_are_evaluate_many_s_groups():
    from testbed.evaluate import training_groups as problem_groups

    ids = [PAIR[0], "coin/0", PAIR[1], "coin/1"]
    problems = [generative.load(pid) for pid in ids]
    for name in ("uniform", "oracle"):
        jobs = [Job.make(name, {}, pid) for pid in ids]
        by_jobs = [[ids.index(j.problem_id) for j in u.jobs] for u in training_groups(jobs)]
        assert by_jobs == problem_groups(agents.load(name), problems), name


def test_families_declare_how_their_problems_share_training():
    assert training_of(PAIR[0]) == training_of(PAIR[1])
    assert training_of(PAIR[0]).shared_by == SHARED_BY_ANY
    assert training_of(SBI[0]) == ("sbi/two_moons/1000/sbibm", SHARED_BY_AMORTIZED)
    assert training_of("coin/0").key is None  # coin problems share nothing
    assert issubclass(problem_type_of(FAMILIES.get("sbi")), OffersOracle)
    assert problem_type_of(FAMILIES.get("coin")).__name__ == "CoinProblem"


def test_what_training_depends_on_decides_who_shares():
    assert not may_share_training(TRAINS_ON_PROBLEM, SHARED_BY_ANY)
    assert may_share_training(TRAINS_ON_DATA, SHARED_BY_ANY)
    assert not may_share_training(TRAINS_ON_DATA, SHARED_BY_AMORTIZED)
    assert may_share_training(TRAINS_ON_SIMULATOR, SHARED_BY_AMORTIZED)
    assert group_by_training(["a", None, "b", "a", None]) == [[0, 3], [1], [2], [4]]
    assert agents.load("npe").trains_on == TRAINS_ON_SIMULATOR
    assert agents.load("snpe").trains_on == TRAINS_ON_DATA  # sequential rounds
    assert agents.load("oracle").trains_on == agents.load("exact").trains_on == TRAINS_ON_PROBLEM
    assert agents.load("mlp").trains_on == TRAINS_ON_DATA


class _Reader:
    def predictive_for(self, problem):
        return problem.oracle_predictive()


@dataclasses.dataclass(frozen=True)
class _Config:
    seed: int = 0


def test_registration_declares_oracle_and_amortized(scoped_registries):
    @agents.register("plain_test")
    def plain(train_data, prior, *, k: int = 1):
        return None

    @agents.register("amortized_fn_test")
    def amortized_fn(train_data, prior, *, amortized: bool = True):
        return None

    @agents.register("reader_test", _Config, predicts="labels")
    def make_reader(config: _Config) -> _Reader:
        raise AssertionError("built to learn that it is an oracle")

    @agents.register("always_test", _Config, amortized=True)
    def make_always(config):
        return lambda data, prior: None

    @agents.register("hidden_reader_test", _Config)
    def make_hidden(config):
        return _Reader()

    entry = AGENTS.get("plain_test")
    assert (entry.oracle, entry.reads, entry.trains_on(entry.config_cls())) == (
        False, None, TRAINS_ON_DATA,
    )  # fmt: skip
    assert agents.load("amortized_fn_test").trains_on == TRAINS_ON_SIMULATOR
    assert agents.load("amortized_fn_test", amortized=False).trains_on == TRAINS_ON_DATA
    assert isinstance(agents.load("reader_test"), ConfiguredOracle)  # from the annotation
    assert "reader_test" in agents.fitting("labels", generative.load("coin/0"))
    assert agents.load("always_test").amortized
    with pytest.raises(InputError, match="amortized: got 'yes'; allowed: true/false"):
        agents.register("bad_amortized_test", _Config, amortized="yes")
    with pytest.raises(InputError, match="which its registration does not declare"):
        agents.load("hidden_reader_test")(None, None)
    with pytest.raises(InputError, match="reads: got 'oracle_predictive'; allowed: a class"):
        agents.register("bad_reads_test", _Config, reads="oracle_predictive")
    agents.register("not_reader_test", _Config, oracle=False)(make_reader)
    agents.register("any_reader_test", _Config, oracle=True)(make_hidden)
    assert not AGENTS.get("not_reader_test").oracle  # declared: the annotation is not asked
    assert AGENTS.get("any_reader_test").serves(object)  # it says nothing of what it reads
    assert not AGENTS.get("oracle").serves(object)
    assert AGENTS.get("oracle").reads is OffersOracle
