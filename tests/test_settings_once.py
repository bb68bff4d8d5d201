"""Settings installed once per entry point: a command reads the environment once and the
rest of it reads that snapshot; the threefry lowering is installed once per process; a
library call without an entry point still follows the environment."""

from __future__ import annotations

import json
import os
import sys
import types

import pytest

import generative
import testbed
from experiments import catalog
from experiments.cli import main
from testbed import settings, threefry_cpu
from testbed.settings import Settings


@pytest.fixture
def reads(monkeypatch):
    """The reads of this process's environment (`Settings.from_env()` without a mapping)."""
    done: list[int] = []
    real = Settings.from_env.__func__

    def counting(cls, environ=None):
        if environ is None:
            done.append(1)
        return real(cls, environ)

    monkeypatch.setattr(Settings, "from_env", classmethod(counting))
    return done


def test_a_sweep_reads_the_environment_once(reads, tmp_path, monkeypatch, capsys):
    """`testbed sweep`: one read at its start; the progress check, the compilation cache,
    the threefry lowering, the checkpoints folder, the jobs' thread pools and size bounds
    all read the command's settings."""
    monkeypatch.setenv("TESTBED_MEMORY_GB", "64")
    argv = ["sweep", "--agent", "uniform,beta_bernoulli", "--problem", "coin/0,coin/1",
            "--executor", "inline", "--results", str(tmp_path / "r.db"), "--json"]  # fmt: skip
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["ok"] == 4
    assert len(reads) == 1


def test_a_library_sweep_reads_the_environment_once(reads, tmp_path):
    """`leaderboard.sweep` called from a script or a notebook (no entry point installed
    settings): the environment's, read once at the call, hold until it returns."""
    import leaderboard

    summary = leaderboard.sweep(["uniform", "beta_bernoulli"], ["coin/4", "coin/13"],
                                results=tmp_path / "r.db", executor="inline")  # fmt: skip
    assert summary.ok == 4 and len(reads) == 1
    assert settings._installed == []


def test_a_run_reads_the_environment_once(reads, capsys):
    assert main(["run", "--agent", "uniform", "--problem", "coin/2", "--json"]) == 0
    assert len(reads) == 1


def test_the_command_keeps_its_settings_while_it_runs_then_lets_them_go(monkeypatch):
    """What the command read is in force inside it, whatever the environment says meanwhile;
    after it, a library call reads the environment again."""
    from experiments.console import installed

    monkeypatch.setenv("TESTBED_THREADS", "3")
    with installed(catalog.environment()) as chosen:
        monkeypatch.setenv("TESTBED_THREADS", "5")
        assert settings.current() is chosen and settings.current().threads == 3
    assert settings.current().threads == 5


def test_the_index_reads_the_settings_it_is_given(tmp_path):
    """experiments.catalog reads no variable itself: its folder and key come from settings."""
    off = Settings.from_env({"TESTBED_CATALOG": "off"})
    assert catalog.cache_dir(off) is None and catalog.load(off) is None
    here = Settings.from_env({"TESTBED_CATALOG": str(tmp_path)})
    assert catalog.cache_dir(here) == tmp_path
    other = here.replace(TESTBED_THREADS="2")
    assert catalog.key(here) != catalog.key(other)  # a TESTBED_* setting changes the key
    assert catalog.key(here) == catalog.key(here.replace(TESTBED_CATALOG="/elsewhere"))


@pytest.fixture
def installs(monkeypatch):
    """The calls of `threefry_cpu.install` (the lowering's installation)."""
    done: list[int] = []
    real = threefry_cpu.install

    def counting(chosen=None):
        done.append(1)
        return real(chosen)

    monkeypatch.setattr(threefry_cpu, "install", counting)
    return done


def test_the_command_installs_the_lowering_once(installs, capsys):
    """`testbed run` installs it at its start; building the problem and evaluating the agent
    find it installed."""
    assert main(["run", "--agent", "uniform", "--problem", "coin/2", "--json"]) == 0
    assert len(installs) == 1


def test_library_calls_install_the_lowering_once_per_process(installs, monkeypatch):
    """A library user who calls no entry point gets the lowering from the first call that
    needs it, and the calls after it find it installed (a flag check)."""
    monkeypatch.setitem(threefry_cpu._state, "installed", False)
    import agents

    problems = [generative.load("coin/0"), generative.load("coin/1")]
    testbed.evaluate(agents.load("uniform"), problems[0])
    testbed.evaluate_many(agents.load("uniform"), problems)
    assert len(installs) == 1
    assert threefry_cpu.ensure_installed() == threefry_cpu.lowering()
    assert len(installs) == 1


def test_a_worker_installs_its_drivers_settings_at_its_start(monkeypatch):
    """`leaderboard.execution.worker.prepare`: the settings its driver sent are in force in
    the worker (not its own environment's), and installing the lowering again is harmless."""
    from leaderboard.execution.worker import prepare, worker_settings

    monkeypatch.setenv("TESTBED_MEMORY_GB", "7")
    chosen = worker_settings(2)
    monkeypatch.setenv("TESTBED_MEMORY_GB", "9")
    monkeypatch.setattr(settings, "_installed", [])  # this test's process stands for a worker
    lowering = threefry_cpu.lowering()
    prepare(chosen)
    assert settings.current() is chosen and chosen.memory_gb == 7 and chosen.threads == 2
    assert threefry_cpu.lowering() == lowering


def test_pymc_gets_its_blas_in_pytensors_configuration_not_in_the_environment(monkeypatch):
    """import_pymc sets PyTensor's BLAS in its configuration when it first imports it (as
    PYTENSOR_FLAGS would), and leaves the process's environment alone; the user's flags
    naming a BLAS, or a PyTensor imported before, are left as they are."""
    from agents.ppl import pymc_agent

    def fake_require(agent, module):  # PyMC's import imports PyTensor
        sys.modules.setdefault("pytensor", types.SimpleNamespace(config=types.SimpleNamespace()))
        return "pm"

    monkeypatch.setattr(pymc_agent, "require", fake_require)
    monkeypatch.setattr(pymc_agent.ctypes.util, "find_library", lambda name: f"lib{name}.so")
    monkeypatch.delenv("PYTENSOR_FLAGS", raising=False)
    monkeypatch.setitem(sys.modules, "pytensor", None)  # the real one (if any) put back after
    del sys.modules["pytensor"]
    before = dict(os.environ)
    assert pymc_agent.import_pymc("pymc") == "pm"
    assert sys.modules["pytensor"].config.blas__ldflags == "-lopenblas"
    assert dict(os.environ) == before
    monkeypatch.setenv("PYTENSOR_FLAGS", "blas__ldflags=-lmkl_rt")  # the user's BLAS
    del sys.modules["pytensor"]
    pymc_agent.import_pymc("pymc")
    assert not hasattr(sys.modules["pytensor"].config, "blas__ldflags")
    monkeypatch.delenv("PYTENSOR_FLAGS")
    pymc_agent.import_pymc("pymc")  # imported before: its own configuration stands
    assert not hasattr(sys.modules["pytensor"].config, "blas__ldflags")
